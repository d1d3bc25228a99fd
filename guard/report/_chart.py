"""What the picture shows: per batch size, every process's step time, base beside head and
beside each ablation arm, on one axis per batch size marked at a round step, with each arm's
change against base. A process far from the rest of its arm stands out, which a mean and a
range in the table hide.

Built from the report's numbers alone (no string of it is drawn: an ablation arm is drawn as
"ablation", numbered where there are several), each checked as data: a report read back may
come from a pull request's run."""

from __future__ import annotations

import math

from pydantic import BaseModel

from guard._svg import axis_range, round_axis
from guard.config import MAX_REPEATS, MAX_ROUNDS
from guard.measure import geometric_mean
from guard.report import _figures as figures
from guard.report._schema import Report

# A run holds at most MAX_REPEATS repeats per arm and round, and MAX_ROUNDS rounds; a report with
# more per arm is not one the guard wrote, and gets no picture rather than a huge one.
MAX_PROCESSES_PER_ARM = MAX_REPEATS * MAX_ROUNDS
# When every process of both arms took the same time, the axis spans this share of it.
FLAT_SHARE = 0.001


class StripArm(BaseModel):
    """One arm at one batch size: each process's step time, in the order the arm ran them."""

    label: str  # "base", "head", "ablation" or "ablation 2": the guard's own words
    values_ms: list[float]
    # the geometric mean its change compares: base's and head's over the processes the decision
    # kept, an ablation arm's over every process
    mean_ms: float
    change_pct: float | None = None  # against base, as the report states it; None for base


class StripPanel(BaseModel):
    batch_size: int
    arms: list[StripArm]  # base, head, then each ablation arm in the order they ran
    low_ms: float  # the axis, shared by every arm, rounded out to its ticks
    high_ms: float
    ticks_ms: list[float]

    def arm(self, label: str) -> StripArm:
        return next(a for a in self.arms if a.label == label)

    @property
    def base_ms(self) -> list[float]:
        return self.arm("base").values_ms

    @property
    def head_ms(self) -> list[float]:
        return self.arm("head").values_ms


class StripChart(BaseModel):
    gpu_timed: bool  # CUDA-event GPU time; else the host's wall clock
    panels: list[StripPanel]


def strip_chart(report: Report) -> StripChart | None:
    """The picture's data, or None when no batch size has both arms measured."""
    ablated = [a.name for a in report.arms if a.source is not None]
    names = {name: "ablation" if len(ablated) == 1 else f"ablation {i}" for i, name in enumerate(ablated, start=1)}
    panels = []
    for batch in report.batch_sizes:
        stats = {a.arm: a for a in batch.arms}
        base, head = stats.get(report.base), stats.get(report.head)
        if base is None or head is None:
            continue
        if not (_drawable(base.gpu_ms_per_step.values) and _drawable(head.gpu_ms_per_step.values)):
            continue
        decided = batch.gpu_ms_bounds or batch.gpu_ms_change
        arms = [_arm("base", base.gpu_ms_per_step.values, figures.decided_mean(batch, report.base, "gpu_ms")),
                _arm("head", head.gpu_ms_per_step.values, figures.decided_mean(batch, report.head, "gpu_ms"),
                     decided.pct if decided is not None else None)]
        effects = {e.arm: e for e in report.explanation.ablations if e.batch_size == batch.batch_size}
        for name, label in names.items():
            values = stats[name].gpu_ms_per_step.values if name in stats else []
            if _drawable(values):
                effect = effects.get(name)
                arms.append(_arm(label, values, figures.every_process_mean(stats[name], "gpu_ms"),
                                 effect.pct if effect is not None else None))
        low, high, ticks = round_axis(*axis_range([v for a in arms for v in a.values_ms], FLAT_SHARE))
        panels.append(StripPanel(batch_size=batch.batch_size, arms=arms, low_ms=low, high_ms=high, ticks_ms=ticks))
    return StripChart(gpu_timed=report.gpu_timed(), panels=panels) if panels else None


def _arm(label: str, values: list[float], mean: float | None, change_pct: float | None = None) -> StripArm:
    """`mean` None (a value not above 0, which `_drawable` has ruled out): every process's."""
    return StripArm(label=label, values_ms=values, mean_ms=mean if mean is not None else geometric_mean(values),
                    change_pct=change_pct if change_pct is not None and math.isfinite(change_pct) else None)


def decimals(panel: StripPanel) -> int:
    """Digits after the point that tell the processes apart: a tenth of the axis's span
    shows, at most 9 digits."""
    span = panel.high_ms - panel.low_ms
    return max(0, min(9, 1 - math.floor(math.log10(span / 10)))) if span > 0 else 3


def _drawable(values: list[float]) -> bool:
    return 0 < len(values) <= MAX_PROCESSES_PER_ARM and all(math.isfinite(v) and v > 0 for v in values)
