"""The settings one batch size is decided by: its thresholds, the error level and the look."""

from __future__ import annotations

from dataclasses import dataclass

from guard.compare._models import METRICS

# Every look tests each metric of every batch size: the error level is split this many ways per
# look and batch size. tok/s counts even where it only informs, as it can still decide a regression.
METRICS_PER_LOOK = len(METRICS)


def alpha_per_look(alpha: float, looks: int, batch_sizes: int) -> float:
    """Bonferroni: `alpha` split evenly over every bound a run may hold against a threshold, so
    the chance that any of them is wrong, and a verdict with it, stays at most `alpha`."""
    if looks < 1 or batch_sizes < 1:
        raise ValueError("needs at least one look and one batch size")
    return alpha / (looks * METRICS_PER_LOOK * batch_sizes)


def bounds_level(alpha_per_bound: float) -> float:
    """The two-sided level whose tails are each `alpha_per_bound`: its interval holds both bounds."""
    return 1 - 2 * alpha_per_bound


@dataclass(frozen=True)
class Rule:
    gpu_pct: float
    tok_pct: float
    alpha: float
    confidence: float  # of the intervals shown beside the verdict (`Change`), not the decision's
    alpha_per_look: float  # the error each one-sided bound may make (`alpha_per_look()`)
    look: int = 1  # the round being decided, from 1

    @property
    def bounds_confidence(self) -> float:
        return bounds_level(self.alpha_per_look)
