"""A runner's noise from an A/A (one commit against itself): the pooled within-side spread of
its processes, an upper confidence limit on it, and what that limit lets a run decide.

The spread is the within-side variance of the logarithms, pooled over the sides, of the
processes left once the slow ones (measure/_slow.py) are set aside: a screen by the median
absolute deviation, then the classical estimate, whose degrees of freedom the chi-square
limit needs. The limit, not the estimate, sets the smallest threshold: an A/A of a few
processes can draw a quiet spread by luck, and a threshold from it would then flag unchanged
commits more often than PASS_RATE promises. Slow processes are counted apart (their rate),
as they come in whole processes, not as spread.
"""

from __future__ import annotations

import math

from pydantic import BaseModel

from guard.measure._stats import MOST_REPEATS, PASS_RATE, _fewest_repeats, _margin, _pooled_log_variance

# One-sided confidence of the upper limit on the spread.
SPREAD_LIMIT_CONFIDENCE = 0.95


class RepeatsNeeded(BaseModel):
    threshold_pct: float
    repeats: int | None  # per arm; None: more than MOST_REPEATS


class RunnerNoise(BaseModel):
    """One metric at one batch size: its spread, and the thresholds and repeats it supports.
    Thresholds and repeats hold at the upper limit of the spread, for PASS_RATE of unchanged
    commits, at the run's confidence."""

    processes: int  # those the spread is estimated from (slow ones set aside)
    degrees_of_freedom: int
    sd_pct: float  # pooled within-side standard deviation of the log, x 100: about percent
    sd_limit_pct: float  # its upper limit at SPREAD_LIMIT_CONFIDENCE
    repeats: int  # per arm, the configured measure.repeats
    supported_pct: float  # the smallest threshold an unchanged commit passes at `repeats`
    needed: list[RepeatsNeeded] = []  # repeats per arm for each threshold asked about


def runner_noise(
    kept_by_side: list[list[float]], repeats: int, confidence: float, thresholds_pct: list[float]
) -> RunnerNoise:
    """The noise of an A/A's processes, each side's in run order with its slow ones left out."""
    from scipy import stats  # here, not at the top: reading a report needs no scipy
    sides = [values for values in kept_by_side if len(values) >= 2]
    dof = sum(len(values) - 1 for values in sides)
    if dof < 1:
        raise ValueError("needs at least two processes on a side")
    variance = _pooled_log_variance(sides)
    limit = dof * variance / float(stats.chi2.ppf(1 - SPREAD_LIMIT_CONFIDENCE, dof))
    return RunnerNoise(
        processes=sum(len(values) for values in sides),
        degrees_of_freedom=dof,
        sd_pct=math.sqrt(variance) * 100,
        sd_limit_pct=math.sqrt(limit) * 100,
        repeats=repeats,
        supported_pct=math.expm1(_margin(limit, repeats, confidence, PASS_RATE)) * 100,
        needed=[
            RepeatsNeeded(threshold_pct=t, repeats=_fewest_repeats(limit, math.log1p(t / 100), confidence,
                                                                   PASS_RATE, MOST_REPEATS))
            for t in dict.fromkeys(thresholds_pct)  # each once, in the order asked
        ],
    )
