"""The settings one batch size is decided by: its thresholds, the error level and the look.

Two versions of the rule are kept, so that a stored report is decided again by its own:
- 1 (schema 7's reports): alpha split evenly (Bonferroni) over every look the run might take
  (measure.max_rounds) x 3 metrics x the batch sizes, and a batch size takes its most severe
  metric's verdict;
- 2 (schema 8 on): alpha split over the looks the time budget can hold (planned from the first
  round's process times), by a Pocock-type spending function, x 2 families (GPU ms; end-to-end
  ms with tok/s, the two figures of one pass) x the batch sizes; within a batch size, what the
  user feels decides (`_interval.batch_verdict`);
- 3 (schema 9 on): as 2, and the slow processes of base and head (by GPU ms) are set aside before
  deciding (`measure.set_aside`; `_set_aside.py`), the pipeline measuring both arms again in
  their place after the first round.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from guard.compare._models import METRICS
from guard.config import CalibratedSpread

RULE_VERSION = 3
# Version 1: every look tests each metric of every batch size, so the error level is split this
# many ways per look and batch size. tok/s and end-to-end ms count even where they only inform,
# as they can still decide a regression, and end-to-end ms where it was not measured (a CPU, the
# mix): the split is the rule's, the same whatever the run measured.
METRICS_PER_LOOK = len(METRICS)
# Version 2: GPU ms, and the pass the user feels (end-to-end ms and tok/s: one pass's two figures,
# which move together); alpha is split over these families, not the three figures
FAMILIES_PER_LOOK = 2


def spent(alpha: float, looks: int, look: int) -> float:
    """Alpha spent by the end of look `look` of `looks`: a Pocock-type spending function (Lan and
    DeMets), alpha x ln(1 + (e - 1) x look / looks). It spends more at the first look than an even
    split would (62% of alpha there with 2 looks, 36% with 4, against 50% and 25%), where most
    verdicts are made, and all of alpha by the last."""
    if not 1 <= look <= looks:
        raise ValueError(f"look {look} of {looks}")
    return alpha * math.log(1 + (math.e - 1) * look / looks)


def alpha_per_look(alpha: float, looks: int, batch_sizes: int, metrics: int = METRICS_PER_LOOK, *,
                   look: int = 1, version: int = 1) -> float:
    """The error each one-sided bound of look `look` may make, so that the chance that any bound
    a verdict rests on is wrong stays at most `alpha` (Bonferroni over the looks, the metrics or
    families, and the batch sizes). Version 1: alpha split evenly over `looks` x `metrics` (2
    for a report from before end-to-end ms was decided) x `batch_sizes`. Version 2: the alpha the
    spending function spends at this look, split over FAMILIES_PER_LOOK x `batch_sizes`."""
    if looks < 1 or batch_sizes < 1:
        raise ValueError("needs at least one look and one batch size")
    if version == 1:
        return alpha / (looks * metrics * batch_sizes)
    at_look = spent(alpha, looks, look) - (spent(alpha, looks, look - 1) if look > 1 else 0.0)
    return at_look / (FAMILIES_PER_LOOK * batch_sizes)


def bounds_level(alpha_per_bound: float) -> float:
    """The two-sided level whose tails are each `alpha_per_bound`: its interval holds both bounds."""
    return 1 - 2 * alpha_per_bound


@dataclass(frozen=True)
class Rule:
    gpu_pct: float
    tok_pct: float
    alpha: float
    confidence: float  # of the intervals shown beside the verdict (`Change`), not the decision's
    looks: int = 1  # the looks alpha is spent over
    decided_sizes: int = 1  # the batch sizes (and the mix) alpha is split over
    look: int = 1  # the round being decided, from 1
    end_to_end_pct: float | None = None  # None: end-to-end ms is not decided (a report from before it was)
    # the calibration's spreads, borrowed where the run's agrees with them (compare/_borrow.py)
    spreads: tuple[CalibratedSpread, ...] = ()
    version: int = RULE_VERSION  # which rule (this module's docstring); 1: schema 7's reports

    @property
    def alpha_per_look(self) -> float:
        """The error each one-sided bound of this look may make (`alpha_per_look()`)."""
        metrics = METRICS_PER_LOOK if self.end_to_end_pct is not None else METRICS_PER_LOOK - 1
        return alpha_per_look(self.alpha, self.looks, self.decided_sizes, metrics, look=self.look,
                              version=self.version)

    @property
    def felt_decides(self) -> bool:
        """Within a batch size, a direction any metric decided stands over what another left
        undecided, and a slowdown shown by a metric that does not gate keeps it open."""
        return self.version >= 2

    @property
    def sets_aside(self) -> bool:
        """Slow processes of base and head are left out of each metric's figures before deciding."""
        return self.version >= 3

    @property
    def bounds_confidence(self) -> float:
        return bounds_level(self.alpha_per_look)

    def at_look(self, look: int) -> Rule:
        return replace(self, look=look)
