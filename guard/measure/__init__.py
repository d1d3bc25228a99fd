"""Measurement: run the harness for each arm in fresh processes, interleaved, and summarise."""

from guard.measure._models import ArmMeasurement, BatchRun, RepeatResult
from guard.measure._runner import ArmTarget, HarnessSpec, check_cpus, run_interleaved
from guard.measure._schedule import interleave
from guard.measure._stats import (
    MOST_REPEATS, PASS_RATE, Change, Spread, relative_change, repeats_to_decide, repeats_to_rule_out, spread,
)

__all__ = [
    "MOST_REPEATS",
    "PASS_RATE",
    "ArmMeasurement",
    "ArmTarget",
    "BatchRun",
    "Change",
    "HarnessSpec",
    "RepeatResult",
    "Spread",
    "check_cpus",
    "interleave",
    "relative_change",
    "repeats_to_decide",
    "repeats_to_rule_out",
    "run_interleaved",
    "spread",
]
