"""The harness runs inside an arm's environment and owns all timing.

It is executed as a script (`python <path>/harness/run.py`), so it imports only the
standard library and torch, never the guard's own dependencies. `PROTOCOL_VERSION` is
the version of the JSON it reads and writes.
"""

from pathlib import Path

from guard.harness._mix import draw_schedule, pass_lengths
from guard.harness._protocol import PROTOCOL_VERSION

HARNESS_SCRIPT = Path(__file__).with_name("run.py")

__all__ = ["HARNESS_SCRIPT", "PROTOCOL_VERSION", "draw_schedule", "pass_lengths"]
