"""The settings one batch size is decided by: its thresholds, the error level and the look."""

from __future__ import annotations

from dataclasses import dataclass

from guard.compare._models import METRICS
from guard.config import CalibratedSpread

# Every look tests each metric of every batch size: the error level is split this many ways per
# look and batch size. tok/s and end-to-end ms count even where they only inform, as they can
# still decide a regression, and end-to-end ms where it was not measured (a CPU, the mix): the
# split is the rule's, the same whatever the run measured.
METRICS_PER_LOOK = len(METRICS)


def alpha_per_look(alpha: float, looks: int, batch_sizes: int, metrics: int = METRICS_PER_LOOK) -> float:
    """Bonferroni: `alpha` split evenly over every bound a run may hold against a threshold, so
    the chance that any of them is wrong, and a verdict with it, stays at most `alpha`.
    `metrics`: 2 for a report from before end-to-end ms was decided."""
    if looks < 1 or batch_sizes < 1:
        raise ValueError("needs at least one look and one batch size")
    return alpha / (looks * metrics * batch_sizes)


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
    end_to_end_pct: float | None = None  # None: end-to-end ms is not decided (a report from before it was)
    # the calibration's spreads, borrowed where the run's agrees with them (compare/_borrow.py)
    spreads: tuple[CalibratedSpread, ...] = ()
    # within a batch size, a direction any metric decided stands over what another left undecided,
    # and a slowdown shown by a metric that does not gate keeps it open (`_interval.batch_verdict`);
    # False: the rule of schema 7's reports, where a batch size took its most severe metric's verdict
    felt_decides: bool = True

    @property
    def bounds_confidence(self) -> float:
        return bounds_level(self.alpha_per_look)
