"""Borrowing the calibrated spread: at few processes per arm a run's own estimate of its spread
is itself noisy (2 degrees of freedom per arm at 3 processes), and the rule's t quantile at its
level is then large enough that no useful threshold passes an unchanged commit. The calibration
measured the same runner's spread over more processes; pooling the run's within-arm variance
with it, on their summed degrees of freedom, narrows the bounds.

What is pooled is the calibrated spread's upper limit (SPREAD_LIMIT_CONFIDENCE), not its
estimate: a runner that has become noisier since it was calibrated is the risk of borrowing, and
a run of a few processes cannot see it. At the estimate, a runner 1.5 times as noisy as
calibrated would make each bound wrong about 5 times as often as alpha allows; at the limit,
less often than alpha (simulated: benchmarks/borrowed_spread.py, docs/notebook/decision-rule.md). Where
the run's own variance is past the calibrated one's F quantile at CHECK_ALPHA (one-sided), the
run decides on its own processes alone, as without a calibration, and says so.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel

from guard.config import CalibratedSpread
from guard.measure import SPREAD_LIMIT_CONFIDENCE, PriorSpread
from guard.measure._stats import BORROW_CHECK_ALPHA as CHECK_ALPHA
from guard.measure._stats import _pooled_log_variance, f_quantile, spread_upper_limit

Metric = Literal["gpu_ms", "end_to_end_ms", "tok_per_s"]  # MetricKey, which _models defines after this module


class Borrowing(BaseModel):
    """One metric at one batch size, where a calibrated spread was found for it: the figures
    the check compared, and whether the run pooled the calibrated spread with its own."""

    metric: Metric
    calibrated_sd_pct: float
    calibrated_dof: int
    calibrated_limit_pct: float  # the spread pooled in: the calibrated sd's upper limit
    run_sd_pct: float  # the run's pooled within-arm sd of the logarithms x 100
    run_dof: int
    limit_sd_pct: float  # the run's sd past which the spread is not borrowed (CHECK_ALPHA)
    borrowed: bool

    def prior(self) -> PriorSpread | None:
        return PriorSpread((self.calibrated_limit_pct / 100) ** 2, self.calibrated_dof) if self.borrowed else None


def borrowing(
    values: list[list[float]], metric: Metric, batch_size: int, spreads: Sequence[CalibratedSpread]
) -> Borrowing | None:
    """The check for `metric` at `batch_size` on the arms' `values`; None where the calibration
    has no spread for it (or a report from before spreads were kept)."""
    found = next((s for s in spreads if s.batch_size == batch_size and s.metric == metric), None)
    run_dof = sum(len(v) - 1 for v in values if len(v) >= 2)
    if found is None or run_dof < 1:
        return None
    run_sd = math.sqrt(_pooled_log_variance(values)) * 100
    dof = found.degrees_of_freedom
    limit = found.sd_pct * math.sqrt(float(f_quantile(1 - CHECK_ALPHA, run_dof, dof)))
    upper = spread_upper_limit(found.sd_pct, dof, SPREAD_LIMIT_CONFIDENCE)
    return Borrowing(metric=metric, calibrated_sd_pct=found.sd_pct, calibrated_dof=dof, calibrated_limit_pct=upper,
                     run_sd_pct=run_sd, run_dof=run_dof, limit_sd_pct=limit, borrowed=run_sd <= limit)
