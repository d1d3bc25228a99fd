"""What the picture shows: per batch size, every process's step time, base beside head, on
one axis per batch size. A process far from the rest of its arm stands out, which a median
and a range in the table hide.

Built from the report's numbers alone (no string of it is drawn), each checked as data:
a report read back may come from a pull request's run."""

from __future__ import annotations

import math

from pydantic import BaseModel

from guard._svg import axis_range
from guard.config import MAX_REPEATS, MAX_ROUNDS
from guard.report._schema import Report

# A run holds at most MAX_REPEATS repeats per arm and round, and MAX_ROUNDS rounds; a report with
# more per arm is not one the guard wrote, and gets no picture rather than a huge one.
MAX_PROCESSES_PER_ARM = MAX_REPEATS * MAX_ROUNDS
# When every process of both arms took the same time, the axis spans this share of it.
FLAT_SHARE = 0.001


class StripPanel(BaseModel):
    """One batch size: each process's median step time, in the order the arm ran them."""

    batch_size: int
    base_ms: list[float]
    head_ms: list[float]
    low_ms: float  # the axis, shared by both arms
    high_ms: float


class StripChart(BaseModel):
    gpu_timed: bool  # CUDA-event GPU time; else the host's wall clock
    panels: list[StripPanel]


def strip_chart(report: Report) -> StripChart | None:
    """The picture's data, or None when no batch size has both arms measured."""
    panels = []
    for batch in report.batch_sizes:
        arms = {a.arm: a for a in batch.arms}
        base, head = arms.get(report.base), arms.get(report.head)
        if base is None or head is None:
            continue
        base_ms, head_ms = base.gpu_ms_per_step.values, head.gpu_ms_per_step.values
        if not (_drawable(base_ms) and _drawable(head_ms)):
            continue
        low, high = axis_range(base_ms + head_ms, FLAT_SHARE)
        panels.append(StripPanel(batch_size=batch.batch_size, base_ms=base_ms, head_ms=head_ms,
                                 low_ms=low, high_ms=high))
    return StripChart(gpu_timed=report.gpu_timed(), panels=panels) if panels else None


def decimals(panel: StripPanel) -> int:
    """Digits after the point that tell the processes apart: a tenth of the axis's span
    shows, at most 9 digits."""
    span = panel.high_ms - panel.low_ms
    return max(0, min(9, 1 - math.floor(math.log10(span / 10)))) if span > 0 else 3


def _drawable(values: list[float]) -> bool:
    return 0 < len(values) <= MAX_PROCESSES_PER_ARM and all(math.isfinite(v) and v > 0 for v in values)
