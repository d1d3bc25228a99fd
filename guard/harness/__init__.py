"""The harness runs inside an arm's environment and owns all timing.

It is executed as a script (`python <path>/harness/run.py`), so it imports only the
standard library and torch, never the guard's own dependencies. `Spec` is what a process
reads, `PROTOCOL_VERSION` the version of that JSON and of the result it writes.
"""

from pathlib import Path

from guard.harness._mix import draw_schedule, pass_lengths
from guard.harness._protocol import PROTOCOL_VERSION, REFERENCE_FORMAT, Spec

HARNESS_SCRIPT = Path(__file__).with_name("run.py")

__all__ = ["HARNESS_SCRIPT", "PROTOCOL_VERSION", "REFERENCE_FORMAT", "Spec", "draw_schedule", "pass_lengths"]
