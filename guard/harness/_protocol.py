"""The version of the JSON the guard and the harness exchange (the spec it reads, the result
it writes). Bump it on any change the other side would misread. Standard library only: run.py
loads this file by path inside the arm's environment, and the guard imports it."""

PROTOCOL_VERSION = 1
