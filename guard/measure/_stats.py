"""Spread of one arm's repeats, the relative change between two arms with its interval, and a
rate's interval."""

from __future__ import annotations

import bisect
import functools
import math
import statistics
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel


class Spread(BaseModel):
    median: float
    min: float
    max: float
    values: list[float]

    @property
    def spread_pct(self) -> float:
        """(max - min) / median, in percent: how far apart the repeats landed."""
        return (self.max - self.min) / self.median * 100 if self.median else 0.0

    @property
    def geometric_mean(self) -> float:
        """The figure `relative_change` compares: its change is head's over base's, less 1."""
        return geometric_mean(self.values)


def geometric_mean(values: list[float]) -> float:
    """exp of the mean of the logarithms; positive values only, as `relative_change` takes."""
    return math.exp(statistics.fmean(math.log(v) for v in values))


def spread(values: list[float]) -> Spread:
    return Spread(median=statistics.median(values), min=min(values), max=max(values), values=list(values))


# The distributions the rule reads, from scipy.special: the functions scipy.stats itself calls
# for these quantiles and tails (the same floats, bit for bit), without importing scipy.stats,
# which took a second of every guard process's start. Imported where called: reading a report
# needs no scipy. Each takes floats or numpy arrays.


# A change past e^700 (a ratio of 1e304) is unbounded for every purpose: a bound that far out
# (2 processes per arm put t on about 1 degree of freedom, whose quantiles run to 1e5 and more)
# is stated as that, not raised as an overflow
MAX_LOG_CHANGE = 700.0


def pct_of_log(change: float) -> float:
    """A change on the log scale as a percent: +0.01 is +1.005%; capped at MAX_LOG_CHANGE."""
    return math.expm1(min(change, MAX_LOG_CHANGE)) * 100


def t_quantile(q: Any, df: Any) -> Any:
    """Student's t at probability `q` on `df` degrees of freedom."""
    from scipy import special

    return special.stdtrit(df, q)


def t_upper_tail(x: Any, df: Any) -> Any:
    """P(T > x) for Student's t on `df` degrees of freedom."""
    from scipy import special

    return special.stdtr(df, -x)


def f_quantile(q: Any, dfn: Any, dfd: Any) -> Any:
    """The F distribution at probability `q`, `dfn` and `dfd` degrees of freedom."""
    from scipy import special

    return special.fdtri(dfn, dfd, q)


def chi2_quantile(q: Any, df: Any) -> Any:
    """The chi-squared distribution at probability `q` on `df` degrees of freedom."""
    from scipy import special

    return 2 * special.gammaincinv(df / 2, q)


# One-sided confidence of the upper limit on a spread: the limit a calibration's thresholds hold
# at (measure/_noise.py), the one a run pools in where it borrows (compare/_borrow.py), and the one
# a stated figure of what a run could see may be made at (`smallest_caught_pct`).
SPREAD_LIMIT_CONFIDENCE = 0.95


def spread_upper_limit(sd: float, dof: float, confidence: float = SPREAD_LIMIT_CONFIDENCE) -> float:
    """The one-sided upper `confidence` limit of a standard deviation `sd` estimated on `dof`
    degrees of freedom: sd x sqrt(dof / chi2_{1 - confidence, dof}). The true sd lies under it
    `confidence` of the time."""
    return sd * math.sqrt(dof / float(chi2_quantile(1 - confidence, dof)))


def variance_lower_factor(dof: int, confidence: float = SPREAD_LIMIT_CONFIDENCE) -> float:
    """How far under its estimate a variance estimated on `dof` degrees of freedom may lie, at its
    one-sided lower `confidence` limit: chi2_{1 - confidence, dof} / dof (1 without any dof)."""
    return float(chi2_quantile(1 - confidence, dof)) / dof if dof >= 1 else 1.0


def rate_interval(count: int, trials: int, confidence: float = 0.95) -> tuple[float, float]:
    """The Clopper-Pearson interval of a rate, count of trials, 0 to 1; (0, 1) without trials:
    its bounds are quantiles of beta distributions."""
    from scipy import special

    if trials == 0:
        return 0.0, 1.0
    tail = (1 - confidence) / 2
    low = 0.0 if count == 0 else float(special.betaincinv(count, trials - count + 1, tail))
    high = 1.0 if count == trials else float(special.betainccinv(count + 1, trials - count, tail))
    return low, high


class Change(BaseModel):
    """after / before - 1, in percent, with a confidence interval and a two-sided p-value.

    Computed on the logarithms (a Welch t-test), so the change is a ratio of geometric
    means and the interval is not symmetric around it.
    """

    pct: float
    ci_low_pct: float
    ci_high_pct: float
    p_value: float
    confidence: float

    def interval(self) -> str:
        """The interval as the comment and the reasons write it: '+0.38% to +0.66%'."""
        return f"{self.ci_low_pct:+.2f}% to {self.ci_high_pct:+.2f}%"


# One-sided level of the check that a run's spread is the calibration's before it borrows it
# (compare/_borrow.py): a run's within-arm variance past the calibrated one's F quantile at this
# level decides on its own processes alone.
BORROW_CHECK_ALPHA = 0.01


@dataclass(frozen=True)
class PriorSpread:
    """A spread measured before the run (a calibration's A/A): the within-side variance of the
    logarithms and its degrees of freedom, pooled with the run's own where it is borrowed."""

    variance: float
    dof: int


def relative_change(
    before: list[float], after: list[float], confidence: float = 0.95, prior: PriorSpread | None = None
) -> Change:
    """`prior`: pool the run's within-arm variance with it, the interval then on their summed
    degrees of freedom (Student's t); without one, each arm's own variance (Welch)."""
    if len(before) < 2 or len(after) < 2:
        raise ValueError("a relative change needs at least two values on each side")
    if min(before) <= 0 or min(after) <= 0:
        raise ValueError("values must be positive")
    log_before = [math.log(v) for v in before]
    log_after = [math.log(v) for v in after]
    diff = statistics.fmean(log_after) - statistics.fmean(log_before)
    var_b = statistics.variance(log_before) / len(before)
    var_a = statistics.variance(log_after) / len(after)
    if prior is not None:
        run_dof = len(before) + len(after) - 2
        pooled = (prior.dof * prior.variance + _pooled_log_variance([before, after]) * run_dof) / (prior.dof + run_dof)
        var_b, var_a = pooled / len(before), pooled / len(after)
    se = math.sqrt(var_a + var_b)
    if se == 0.0:
        p_value = 1.0 if diff == 0 else 0.0
        half = 0.0
    else:
        # Welch-Satterthwaite degrees of freedom, or the pooled ones
        df = (prior.dof + len(before) + len(after) - 2 if prior is not None else
              (var_a + var_b) ** 2 / (var_a**2 / (len(after) - 1) + var_b**2 / (len(before) - 1)))
        half = float(t_quantile(0.5 + confidence / 2, df)) * se
        p_value = float(2 * t_upper_tail(abs(diff) / se, df))
    return Change(
        pct=pct_of_log(diff),
        ci_low_pct=pct_of_log(diff - half),
        ci_high_pct=pct_of_log(diff + half),
        p_value=p_value,
        confidence=confidence,
    )


# repeats_to_rule_out's defaults: an unchanged commit should pass this often, and more
# repeats than MOST_REPEATS per arm are not worth counting.
PASS_RATE = 0.95
MOST_REPEATS = 200


def repeats_to_rule_out(
    by_arm: list[list[float]], threshold_pct: float, confidence: float = 0.95, power: float = PASS_RATE,
    most: int = MOST_REPEATS, prior: PriorSpread | None = None,
) -> int | None:
    """About how many repeats per arm it takes for a commit that changes nothing to pass a
    `threshold_pct` slowdown `power` of the time, at the noise of `by_arm` (the repeats of
    each arm, whose own means are set aside). The interval's upper bound must fall under the
    threshold: that needs (t_confidence + t_power) x the standard error <= log(1 + threshold).
    None when more than `most` would be needed; an estimate, as the spread is itself estimated.
    `prior`: a borrowed spread, pooled in as `relative_change` pools it."""
    return _repeats_for_margin(by_arm, math.log1p(threshold_pct / 100), confidence, power, most, prior)


def repeats_to_decide(
    by_arm: list[list[float]], change_pct: float, threshold_pct: float, confidence: float = 0.95,
    power: float = PASS_RATE, most: int = MOST_REPEATS, prior: PriorSpread | None = None,
) -> int | None:
    """About how many repeats per arm it takes to tell a change of `change_pct` from the
    threshold `power` of the time, were that the true change, at the noise of `by_arm`: the
    interval must leave the threshold out on the change's side. None when more than `most`
    would be needed (a change at the threshold itself can never be told from it)."""
    margin = abs(math.log1p(threshold_pct / 100) - math.log1p(change_pct / 100))
    return _repeats_for_margin(by_arm, margin, confidence, power, most, prior)


def detectable_change_pct(
    by_arm: list[list[float]], repeats: int, confidence: float = 0.95, power: float = PASS_RATE,
    prior: PriorSpread | None = None,
) -> float:
    """The smallest change, in percent, that `repeats` per arm detect `power` of the time at
    the noise of `by_arm`: its interval then leaves zero out. A metric whose detectable
    change is larger than its threshold cannot decide at that threshold."""
    if repeats < 2:
        raise ValueError("needs at least two repeats per arm")
    variance, extra = _with_prior(by_arm, prior)
    return pct_of_log(_margin(variance, repeats, confidence, power, extra))


def smallest_caught_pct(
    by_arm: list[list[float]], repeats: int, threshold_pct: float, confidence: float, power: float = PASS_RATE,
    prior: PriorSpread | None = None, at_spread_limit: float | None = None,
) -> float:
    """The smallest true slowdown, in percent, that `repeats` per arm call a regression `power`
    of the time at the spread of `by_arm`: the lower bound of the two-sided `confidence`
    interval, made as `relative_change` makes it, then lies past `threshold_pct`. What a run
    could see, stated beside its verdict (`caught_pct` in report.json).

    `at_spread_limit`: None states it at the spread of `by_arm` itself, as reports decided by
    rules before the option state it (recomputed to the bit). A run's own spread is more often
    under the true one than over it, so fewer than half of runs state a figure caught `power` of
    the time (0.85 to 0.88 of the time on average; benchmarks/caught_coverage.py). A one-sided
    confidence (SPREAD_LIMIT_CONFIDENCE, 0.95) states it at that upper limit of the spread instead
    (`spread_upper_limit`, on the pooled within-arm degrees of freedom of `by_arm`, plus the
    prior's where one is pooled in): then that share of runs state a figure caught `power` of the
    time or more, to the precision of the drawn shortfall (CAUGHT_DRAWS: 0.945 to 0.952 measured)."""
    variance, extra = _with_prior(by_arm, prior)
    if at_spread_limit is not None:
        variance = spread_upper_limit(math.sqrt(variance), _within_dof(by_arm) + extra, at_spread_limit) ** 2
    return caught_at_spread(variance, repeats, threshold_pct, confidence, power, extra)


def caught_at_spread(
    variance: float, repeats: int, threshold_pct: float, confidence: float, power: float = PASS_RATE,
    extra_dof: int = 0, at_spread_limit: float | None = None,
) -> float:
    """`smallest_caught_pct` at a given within-arm variance of the logarithms: `extra_dof` > 0 for
    a spread known on that many degrees of freedom beyond the run's (the pooled bound); 0 for
    the run's own (Welch's). `at_spread_limit`: state it at that one-sided upper limit of the
    spread (`spread_upper_limit`) on `extra_dof` degrees of freedom (a calibration's own spread on
    its own), or on the run's 2 x (repeats - 1) where `extra_dof` is 0; None: at `variance` itself."""
    if repeats < 2:
        raise ValueError("needs at least two repeats per arm")
    if at_spread_limit is not None:
        variance = spread_upper_limit(math.sqrt(variance), extra_dof or 2 * repeats - 2, at_spread_limit) ** 2
    shortfall = _bound_shortfall(repeats, confidence, power, extra_dof)
    return pct_of_log(math.log1p(threshold_pct / 100) + shortfall * math.sqrt(2 * variance / repeats))


CAUGHT_DRAWS = 20_000  # draws of the bound's pivot: its 5% quantile to about 0.5%


@functools.lru_cache(maxsize=256)
def _bound_shortfall(repeats: int, confidence: float, power: float, extra_dof: int) -> float:
    """How far below the true log change the interval's lower bound falls, in standard errors of
    the difference, at the `power` quantile: the bound is past the truth minus this that often.
    Where a borrowed spread is pooled in (Student's t on known degrees of freedom), the noncentral
    t gives it exactly (its noncentrality at which the bound clears `power` of the time).
    Welch's bound has random degrees of freedom: its pivot is drawn (CAUGHT_DRAWS equal-spread
    pairs, a fixed seed, so a report's figure is made again to the bit), as the run's own bounds
    are made."""
    if extra_dof:
        from scipy import special

        df = 2 * repeats - 2 + extra_dof  # the pooled bound: (d - log(1 + T)) / se is noncentral t
        return float(special.nctdtrinc(df, 1 - power, t_quantile(0.5 + confidence / 2, df)))
    else:
        import numpy as np

        rng = np.random.default_rng([repeats, round(confidence * 1e12), round(power * 1e6)])
        before = rng.standard_normal((CAUGHT_DRAWS, repeats))
        after = rng.standard_normal((CAUGHT_DRAWS, repeats))
        var_b, var_a = before.var(axis=1, ddof=1) / repeats, after.var(axis=1, ddof=1) / repeats
        df = (var_a + var_b) ** 2 / (var_a**2 / (repeats - 1) + var_b**2 / (repeats - 1))
        error = after.mean(axis=1) - before.mean(axis=1)
        low = error - t_quantile(0.5 + confidence / 2, df) * np.sqrt(var_a + var_b)
        # the bound sits this many true standard errors under the truth, or less, `power` of the time
        return float(-np.quantile(low, 1 - power) / math.sqrt(2 / repeats))


def _with_prior(by_arm: list[list[float]], prior: PriorSpread | None) -> tuple[float, int]:
    """The variance a margin is figured at, and the degrees of freedom `prior` adds to it."""
    variance = _pooled_log_variance(by_arm)
    if prior is None:
        return variance, 0
    run_dof = _within_dof(by_arm)
    return (prior.dof * prior.variance + run_dof * variance) / (prior.dof + run_dof), prior.dof


def _within_dof(by_arm: list[list[float]]) -> int:
    """The degrees of freedom of the pooled within-arm variance of `by_arm`."""
    return sum(len(values) - 1 for values in by_arm if len(values) >= 2)


def _repeats_for_margin(
    by_arm: list[list[float]], margin: float, confidence: float, power: float, most: int,
    prior: PriorSpread | None = None,
) -> int | None:
    """The fewest repeats per arm whose interval's half width, plus the power's share, fits
    in `margin` (a distance on the log scale) at the pooled within-arm variance of `by_arm`."""
    variance, extra = _with_prior(by_arm, prior)
    return _fewest_repeats(variance, margin, confidence, power, most, extra)


def _fewest_repeats(
    variance: float, margin: float, confidence: float, power: float, most: int, extra_dof: int = 0
) -> int | None:
    """The fewest repeats per arm, up to `most`, whose `_margin` at `variance` fits in `margin`."""
    counts = range(2, most + 1)

    def fits(n: int) -> bool:
        return _margin(variance, n, confidence, power, extra_dof) <= margin

    # the margin shrinks as n grows (power >= 1/2: both t quantiles fall), so bisect, not scan
    if power < 0.5:
        return next((n for n in counts if fits(n)), None)
    first = bisect.bisect_left(counts, True, key=fits)
    return counts[first] if first < len(counts) else None


def _pooled_log_variance(by_arm: list[list[float]]) -> float:
    """The within-arm variance of the logarithms, pooled over the arms (their means set aside)."""
    logs = [[math.log(v) for v in values] for values in by_arm if len(values) >= 2]
    if not logs or min(min(values) for values in by_arm) <= 0:
        raise ValueError("needs positive values, at least two in an arm")
    dof = sum(len(values) - 1 for values in logs)
    return sum(statistics.variance(values) * (len(values) - 1) for values in logs) / dof


def _margin(variance: float, repeats: int, confidence: float, power: float, extra_dof: int = 0) -> float:
    """(t_confidence + t_power) x the standard error of a difference of means, `repeats` per arm;
    `extra_dof`: a borrowed spread's degrees of freedom, added to the run's."""
    df = 2 * repeats - 2 + extra_dof
    return float(t_quantile(0.5 + confidence / 2, df) + t_quantile(power, df)) * math.sqrt(2 * variance / repeats)
