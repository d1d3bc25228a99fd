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

import bisect
import functools
import math

from pydantic import BaseModel

from guard.measure._stats import MOST_REPEATS, PASS_RATE, _pooled_log_variance

# One-sided confidence of the upper limit on the spread.
SPREAD_LIMIT_CONFIDENCE = 0.95
# Unchanged pairs drawn to find where the rule's upper bound falls (`welch_upper_quantile`): the
# quantile's own error is then about 0.5% of it. Drawn from a fixed seed, so a calibration of the
# same processes suggests the same thresholds.
WELCH_DRAWS = 40_000


@functools.lru_cache(maxsize=256)
def welch_upper_quantile(repeats: int, confidence: float, power: float) -> float:
    """The `power` quantile of an unchanged pair's upper bound on the log scale, in sds of one
    process: the bound the rule holds against a threshold (Welch's t at `confidence`, two-sided,
    with each draw's own Welch degrees of freedom), for `repeats` processes per arm. Times the
    spread, it is the smallest threshold an unchanged commit passes `power` of the time. Drawn,
    as the Welch degrees of freedom move with the draw and no closed form holds them."""
    import numpy as np
    from scipy import stats  # here, not at the top: reading a report needs no scipy

    rng = np.random.default_rng(20_251_202)
    base, head = rng.standard_normal((2, WELCH_DRAWS, repeats))
    var_b, var_h = base.var(axis=1, ddof=1) / repeats, head.var(axis=1, ddof=1) / repeats
    dof = (var_b + var_h) ** 2 / ((var_b**2 + var_h**2) / (repeats - 1))
    upper = head.mean(axis=1) - base.mean(axis=1) + stats.t.ppf(0.5 + confidence / 2, dof) * np.sqrt(var_b + var_h)
    return float(np.quantile(upper, power))


def _repeats_to_pass(variance: float, margin: float, confidence: float, most: int) -> int | None:
    """The fewest repeats per arm, up to `most`, whose upper bound falls under `margin` PASS_RATE
    of the time at `variance` (the quantile falls as the repeats grow: bisect)."""
    counts = range(2, most + 1)
    sd = math.sqrt(variance)
    first = bisect.bisect_left(counts, True,
                               key=lambda n: sd * welch_upper_quantile(n, confidence, PASS_RATE) <= margin)
    return counts[first] if first < len(counts) else None


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
        supported_pct=math.expm1(math.sqrt(limit) * welch_upper_quantile(repeats, confidence, PASS_RATE)) * 100,
        needed=[
            RepeatsNeeded(threshold_pct=t, repeats=_repeats_to_pass(limit, math.log1p(t / 100), confidence,
                                                                   MOST_REPEATS))
            for t in dict.fromkeys(thresholds_pct)  # each once, in the order asked
        ],
    )
