"""The validation suite: the guard run on changes whose effect is known, and graded on what its
reports say. `python -m validation injected` injects regressions of known size into the
reference engine (docs/notebook/validation.md); `python -m validation engines` runs real-engine
workloads in bf16 (docs/notebook/validation-engines.md). Each pair's report is kept beside its line in
pairs.jsonl and read back through guard's own Report model; `_older.py` reads the committed
reports of older schemas as data."""
