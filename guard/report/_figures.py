"""The figures the comment shows beside its changes: each the one its change is computed from,
and every interval at the level the verdict was decided at, so a reader meets one level.

A change is a ratio of geometric means (`measure.relative_change`), of the processes the
decision kept (those set aside left out): the table shows those means. The host's time per step
and each ablation arm's change, which their stages keep at the report's confidence (95%), are
made again here from the report's own values at the batch size's level; report.json keeps both."""

from __future__ import annotations

import math

from guard.compare import ArmStats, BatchComparison, MetricKey, bounds_level, kept_arm
from guard.explain import AblationEffect
from guard.measure import Change, Spread, relative_change


def level(batch: BatchComparison) -> float | None:
    """The level of the interval `batch` was decided on; None where it was not decided."""
    return bounds_level(batch.alpha_per_look) if batch.alpha_per_look is not None else None


def _kept(batch: BatchComparison, arm: str) -> ArmStats | None:
    stats = next((a for a in batch.arms if a.arm == arm), None)
    return kept_arm(stats, batch.set_aside) if stats is not None else None


def _figure(stats: ArmStats, metric: MetricKey) -> Spread | None:
    return {"gpu_ms": stats.gpu_ms_per_step, "end_to_end_ms": stats.end_to_end_gpu_ms_per_step,
            "tok_per_s": stats.tok_per_s}[metric]


def geometric(figure: Spread | None) -> float | None:
    """The geometric mean, where every value is one a change can be computed from (finite, above 0)."""
    if figure is None or not figure.values or not all(math.isfinite(v) and v > 0 for v in figure.values):
        return None
    return figure.geometric_mean


def decided_mean(batch: BatchComparison, arm: str, metric: MetricKey) -> float | None:
    """`arm`'s geometric mean of `metric` over the processes the decision kept at `batch`."""
    stats = _kept(batch, arm)
    return geometric(_figure(stats, metric)) if stats is not None else None


def instructions_mean(batch: BatchComparison, arm: str) -> float | None:
    """`arm`'s geometric mean of host instructions per step, as its change compares them."""
    stats = _kept(batch, arm)
    return geometric(stats.instructions_per_step) if stats is not None else None


def every_process_mean(stats: ArmStats, metric: MetricKey) -> float | None:
    """The geometric mean over every process of the arm: what an ablation arm's change compares."""
    return geometric(_figure(stats, metric))


def host_change(batch: BatchComparison, base: str, head: str) -> Change | None:
    """The host's time per step head against base, at `batch`'s level: None where the compare
    stage made no change of it (a host time of 0) or the batch size was not decided."""
    at = level(batch)
    b, h = _kept(batch, base), _kept(batch, head)
    if batch.host_ms_change is None or at is None or b is None or h is None:
        return None
    if b.host_ms_per_step is None or h.host_ms_per_step is None:
        return None
    return relative_change(b.host_ms_per_step.values, h.host_ms_per_step.values, at)


def ablation_change(batches: list[BatchComparison], base: str, effect: AblationEffect) -> Change | None:
    """An ablation arm's GPU ms per step against base at its batch size's level, from every
    process of both (as the explain stage compares them); None with a single process."""
    batch = next((b for b in batches if b.batch_size == effect.batch_size), None)
    at = level(batch) if batch is not None else None
    if effect.change is None or batch is None or at is None:
        return None
    before, after = (next((a for a in batch.arms if a.arm == name), None) for name in (base, effect.arm))
    if before is None or after is None:
        return None
    return relative_change(before.gpu_ms_per_step.values, after.gpu_ms_per_step.values, at)
