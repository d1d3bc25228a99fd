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
from typing import Any, NamedTuple

from pydantic import BaseModel

from guard.measure._stats import (
    BORROW_CHECK_ALPHA, MOST_REPEATS, PASS_RATE, SPREAD_LIMIT_CONFIDENCE, _pooled_log_variance, f_quantile,
    pct_of_log, spread_upper_limit, t_quantile,
)

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

    rng = np.random.default_rng(20_251_202)
    base, head = rng.standard_normal((2, WELCH_DRAWS, repeats))
    return float(np.quantile(_welch_upper(base, head, 0.5 + confidence / 2), power))


def _welch_upper(base: Any, head: Any, tail: float) -> Any:
    """Each drawn pair's upper bound of head - base (rows of processes): Welch's t at the `tail`
    quantile, on that pair's own Welch degrees of freedom."""
    import numpy as np

    repeats = base.shape[1]
    se2_b, se2_h = base.var(axis=1, ddof=1) / repeats, head.var(axis=1, ddof=1) / repeats
    dof = (se2_b + se2_h) ** 2 / ((se2_b**2 + se2_h**2) / (repeats - 1))
    return head.mean(axis=1) - base.mean(axis=1) + t_quantile(tail, dof) * np.sqrt(se2_b + se2_h)


@functools.lru_cache(maxsize=256)
def borrowed_upper_quantile(repeats: int, confidence: float, power: float, calibrated_dof: int,
                            calibrated_sd: float) -> float:
    """`welch_upper_quantile` for a run that borrows a calibrated spread (compare/_borrow.py):
    the `power` quantile of an unchanged pair's upper bound, in sds of one process, where the
    calibration measured `calibrated_sd` (as a share of the spread's upper limit, the sd the
    figures hold at) on `calibrated_dof` degrees of freedom. Each drawn pair checks its own
    spread against the calibrated one as a run does: the limit pooled with it, Student's t on the
    summed degrees of freedom, where it passes; Welch on its own where not."""
    import numpy as np

    rng = np.random.default_rng(20_251_203)
    base, head = rng.standard_normal((2, WELCH_DRAWS, repeats))
    var_b, var_h = base.var(axis=1, ddof=1), head.var(axis=1, ddof=1)
    diff = head.mean(axis=1) - base.mean(axis=1)
    tail = 0.5 + confidence / 2
    run_dof = 2 * repeats - 2
    run_var = (var_b + var_h) / 2
    limit = calibrated_sd**2 * float(f_quantile(1 - BORROW_CHECK_ALPHA, run_dof, calibrated_dof))
    pooled = (calibrated_dof * 1.0 + run_dof * run_var) / (calibrated_dof + run_dof)  # the limit, in its own sds
    borrowed = diff + float(t_quantile(tail, calibrated_dof + run_dof)) * np.sqrt(2 * pooled / repeats)
    return float(np.quantile(np.where(run_var <= limit, borrowed, _welch_upper(base, head, tail)), power))


class Borrow(NamedTuple):
    """A calibration's own spread, as a run that reads its file borrows it: its degrees of
    freedom, and its sd as a share of the spread's upper limit (the sd the figures hold at)."""

    dof: int
    sd_share: float


def _upper_quantile(repeats: int, confidence: float, borrow: Borrow | None) -> float:
    if borrow is None:
        return welch_upper_quantile(repeats, confidence, PASS_RATE)
    # the share rounded, so that a cached draw serves each calibration's repeats search
    return borrowed_upper_quantile(repeats, confidence, PASS_RATE, borrow.dof, round(borrow.sd_share, 4))


def _repeats_to_pass(variance: float, margin: float, confidence: float, most: int,
                     borrow: Borrow | None = None) -> int | None:
    """The fewest repeats per arm, up to `most`, whose upper bound falls under `margin` PASS_RATE
    of the time at `variance` (the quantile falls as the repeats grow: bisect)."""
    counts = range(2, most + 1)
    sd = math.sqrt(variance)
    first = bisect.bisect_left(counts, True, key=lambda n: sd * _upper_quantile(n, confidence, borrow) <= margin)
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
    # the smallest threshold an unchanged commit passes at `repeats`: borrowing this spread, as a
    # run that reads the thresholds file does, where `borrowed`; on its own processes alone where not
    supported_pct: float
    needed: list[RepeatsNeeded] = []  # repeats per arm for each threshold asked about
    borrowed: bool = False
    # the smallest threshold on the run's own processes alone (no spread borrowed); None: not borrowed
    alone_pct: float | None = None


def runner_noise(
    kept_by_side: list[list[float]], repeats: int, confidence: float, thresholds_pct: list[float],
    borrowed: bool = False,
) -> RunnerNoise:
    """The noise of an A/A's processes, each side's in run order with its slow ones left out.
    `borrowed`: the thresholds and repeats are those of a run that borrows this spread."""
    sides = [values for values in kept_by_side if len(values) >= 2]
    dof = sum(len(values) - 1 for values in sides)
    if dof < 1:
        raise ValueError("needs at least two processes on a side")
    variance = _pooled_log_variance(sides)
    limit = spread_upper_limit(math.sqrt(variance), dof, SPREAD_LIMIT_CONFIDENCE) ** 2
    borrow = Borrow(dof, math.sqrt(variance / limit)) if borrowed and limit > 0 else None
    # at 2 processes a side the rule's quantile runs to thousands of sds: capped, as relative_change caps
    alone = pct_of_log(math.sqrt(limit) * welch_upper_quantile(repeats, confidence, PASS_RATE))
    return RunnerNoise(
        processes=sum(len(values) for values in sides),
        degrees_of_freedom=dof,
        sd_pct=math.sqrt(variance) * 100,
        sd_limit_pct=math.sqrt(limit) * 100,
        repeats=repeats,
        supported_pct=pct_of_log(math.sqrt(limit) * _upper_quantile(repeats, confidence, borrow)) if borrow else alone,
        needed=[
            RepeatsNeeded(threshold_pct=t, repeats=_repeats_to_pass(limit, math.log1p(t / 100), confidence,
                                                                   MOST_REPEATS, borrow))
            for t in dict.fromkeys(thresholds_pct)  # each once, in the order asked
        ],
        borrowed=borrow is not None,
        alone_pct=alone if borrow else None,
    )
