"""Measurement: run the harness for each arm in fresh processes, interleaved, and summarise."""

from guard.measure._models import ArmMeasurement, BatchRun, RepeatResult
from guard.measure._runner import ArmTarget, HarnessSpec, run_interleaved
from guard.measure._schedule import interleave
from guard.measure._stats import Change, Spread, relative_change, spread

__all__ = [
    "ArmMeasurement",
    "ArmTarget",
    "BatchRun",
    "Change",
    "HarnessSpec",
    "RepeatResult",
    "Spread",
    "interleave",
    "relative_change",
    "run_interleaved",
    "spread",
]
