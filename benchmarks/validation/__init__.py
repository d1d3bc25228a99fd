"""The validation harness behind benchmarks/validate.py: inject regressions of known size
into the reference engine and check that the guard finds them and names their cause."""
