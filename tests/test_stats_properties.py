"""Properties of the statistics the verdict rests on, over samples hypothesis draws: any
finite positive figures of 2 or more processes per arm give a verdict and finite-ordered
bounds, never an exception; and the verdict is monotone in the effect: a slower head is never
called faster.

Then every statistics function that takes a sample, calibration's included, over samples of 2
or more processes whose figures span many orders of magnitude, all equal, or tied but for an ulp
or two: none raises, each figure is finite (a change past e^700 is stated as that cap,
`MAX_LOG_CHANGE`), and each keeps a relation it promises (an interval holds its estimate, more
repeats never need more, a wider spread never sees better)."""

from __future__ import annotations

import math
import re

from hypothesis import example, given, settings
from hypothesis import strategies as st

from guard.calibrate import NoiseFloor, _suggest, metric_line, noise_lines, too_noisy_message
from guard.compare import compare
from guard.compare._borrow import borrowing
from guard.compare._models import ArmStats
from guard.compare._set_aside import kept_arm, slow_set_aside
from guard.config import CalibratedSpread
from guard.measure import (
    MOST_REPEATS, SET_ASIDE_SHARE, SLOW_MIN_PCT, SPREAD_LIMIT_CONFIDENCE, PriorSpread, RepeatsNeeded,
    caught_at_spread, detectable_change_pct, find_slow_processes, geometric_mean, rate_interval, relative_change,
    repeats_to_decide, repeats_to_rule_out, runner_noise, set_aside, slow_in, smallest_caught_pct, spread,
)
from guard.measure._noise import borrowed_upper_quantile, welch_upper_quantile
from guard.measure._stats import MAX_LOG_CHANGE, pct_of_log
from tests.rules import rule_at
from tests.test_verdict import arm

# derandomized: the same examples on every machine, so a failure is the code's, not the draw's
PROPERTIES = settings(derandomize=True, max_examples=150, deadline=None)
FIGURE = st.floats(min_value=1e-6, max_value=1e6, allow_nan=False, allow_infinity=False)
SAMPLE = st.lists(FIGURE, min_size=2, max_size=12)
LEVEL = st.floats(min_value=0.5, max_value=1 - 1e-9)
# how slow each verdict is: a slower head never moves down this order
SLOWNESS = {"improvement": 0, "pass": 1, "inconclusive": 2, "at_threshold": 3, "regression": 4}


@PROPERTIES
@given(before=SAMPLE, after=SAMPLE, level=LEVEL)
def test_any_positive_sample_of_two_or_more_gives_ordered_bounds(before: list[float], after: list[float],
                                                                  level: float) -> None:
    change = relative_change(before, after, level)  # 2 per arm put t on about 1 degree of freedom
    assert -100 <= change.ci_low_pct <= change.pct <= change.ci_high_pct
    assert not math.isnan(change.ci_high_pct) and math.isfinite(change.ci_high_pct)
    assert 0 <= change.p_value <= 1
    caught = smallest_caught_pct([before, after], min(len(before), len(after)), 1.0, level)
    assert caught >= 1.0 and math.isfinite(caught)  # T itself where the processes did not vary


@PROPERTIES
@given(base=st.lists(st.floats(min_value=0.5, max_value=2.0), min_size=2, max_size=8),
       noise=st.lists(st.floats(min_value=0.9, max_value=1.1), min_size=2, max_size=8),
       first=st.floats(min_value=0.5, max_value=2.0), more=st.floats(min_value=0.0, max_value=1.0))
def test_a_slower_head_is_never_called_faster(base: list[float], noise: list[float], first: float,
                                              more: float) -> None:
    """The same processes' noise, head's step `first` then `first x (1 + more)` times base's:
    the second verdict is at least as slow as the first, whatever the spread, at every size."""
    n = min(len(base), len(noise))
    base_ms = [10 * b for b in base[:n]]
    verdicts = []
    for factor in (first, first * (1 + more)):
        head_ms = [10 * factor * j for j in noise[:n]]
        decided = compare({"base": arm("base", {1: base_ms}), "head": arm("head", {1: head_ms})}, "base", "head",
                          [1], rule_at(1.0, looks=2))
        verdicts.append(decided.verdict)
    assert SLOWNESS[verdicts[1]] >= SLOWNESS[verdicts[0]], verdicts


# ---- every function that takes a sample ---------------------------------------------------------------------

# what a change past MAX_LOG_CHANGE is stated as: unbounded for every purpose, never raised
CAP_PCT = pct_of_log(MAX_LOG_CHANGE)
FEW = settings(derandomize=True, max_examples=60, deadline=None)
WIDE = st.floats(min_value=1e-300, max_value=1e300, allow_nan=False, allow_infinity=False)
NEAR_ONE = st.floats(min_value=-0.2, max_value=0.2)


def _samples(most: int = 8) -> st.SearchStrategy[list[float]]:
    """2 to `most` positive figures: across 600 orders of magnitude; a level with a spread of up to
    20%; all equal; equal but one, anywhere; or equal but for a few ulps each."""
    size = st.integers(min_value=2, max_value=most)
    return st.one_of(
        st.lists(WIDE, min_size=2, max_size=most),
        st.builds(lambda level, n, other: [level] * n + [other], WIDE, st.integers(min_value=1, max_value=most - 1),
                  WIDE),
        st.builds(lambda level, offs: [level * math.exp(o) for o in offs], FIGURE,
                  st.lists(NEAR_ONE, min_size=2, max_size=most)),
        st.builds(lambda level, n: [level] * n, WIDE, size),
        st.builds(lambda level, ulps: [level * (1 + u * 2.0**-52) for u in ulps], FIGURE,
                  st.lists(st.integers(min_value=0, max_value=3), min_size=2, max_size=most)),
    )


ARMS = _samples()
# the levels the rule's bounds take (shown 95%, the defaults' first look at 1 to 3 batch sizes, a far one):
# few, so that the draws cached per level and repeats serve many examples
LEVELS = st.sampled_from([0.95, 0.9964262598049121, 0.998808753268304, 1 - 1e-6])
PRIORS = st.builds(PriorSpread, st.floats(min_value=1e-12, max_value=1.0), st.integers(min_value=1, max_value=2000))
THRESHOLDS = st.floats(min_value=0.01, max_value=50.0)


def _finite_or_cap(pct: float) -> bool:
    return math.isfinite(pct) and pct <= CAP_PCT


@FEW
@given(before=ARMS, after=ARMS, prior=st.none() | PRIORS, level=LEVELS)
def test_an_interval_holds_its_estimate_and_widens_with_its_level(before: list[float], after: list[float],
                                                                   prior: PriorSpread | None, level: float) -> None:
    narrow = relative_change(before, after, 0.9, prior)
    wide = relative_change(before, after, level, prior)
    for change in (narrow, wide):
        assert -100 <= change.ci_low_pct <= change.pct <= change.ci_high_pct and _finite_or_cap(change.ci_high_pct)
        assert 0 <= change.p_value <= 1
    assert wide.ci_low_pct <= narrow.ci_low_pct and narrow.ci_high_pct <= wide.ci_high_pct


@FEW
@given(values=ARMS)
def test_a_geometric_mean_lies_between_the_extremes(values: list[float]) -> None:
    assert min(values) * (1 - 1e-12) <= geometric_mean(values) <= max(values) * (1 + 1e-12)


@FEW
@given(before=ARMS, after=ARMS, prior=st.none() | PRIORS, level=LEVELS, threshold=THRESHOLDS,
       more=st.floats(min_value=0.0, max_value=10.0))
def test_a_larger_threshold_never_takes_more_repeats_to_rule_out(
        before: list[float], after: list[float], prior: PriorSpread | None, level: float, threshold: float,
        more: float) -> None:
    needed = [repeats_to_rule_out([before, after], t, level, prior=prior) for t in (threshold, threshold + more)]
    assert all(n is None or 2 <= n <= MOST_REPEATS for n in needed)
    assert needed[1] is not None or needed[0] is None, needed  # the smaller threshold no easier
    assert needed[0] is None or needed[1] is None or needed[1] <= needed[0], needed


@FEW
@given(before=ARMS, after=ARMS, prior=st.none() | PRIORS, level=LEVELS, threshold=THRESHOLDS,
       past=st.floats(min_value=0.01, max_value=50.0), further=st.floats(min_value=0.0, max_value=50.0))
def test_a_change_further_from_the_threshold_never_takes_more_repeats_to_decide(
        before: list[float], after: list[float], prior: PriorSpread | None, level: float, threshold: float,
        past: float, further: float) -> None:
    needed = [repeats_to_decide([before, after], threshold + gap, threshold, level, prior=prior)
              for gap in (past, past + further)]
    assert all(n is None or 2 <= n <= MOST_REPEATS for n in needed)
    assert needed[0] is None or (needed[1] is not None and needed[1] <= needed[0]), needed


@FEW
@given(before=ARMS, after=ARMS, prior=st.none() | PRIORS, level=LEVELS, repeats=st.integers(min_value=2, max_value=50))
def test_more_repeats_never_detect_a_larger_change(before: list[float], after: list[float],
                                                   prior: PriorSpread | None, level: float, repeats: int) -> None:
    fewer, more = (detectable_change_pct([before, after], n, level, prior=prior) for n in (repeats, repeats + 1))
    assert 0 <= more <= fewer and _finite_or_cap(fewer)


@FEW
@given(before=_samples(6), after=_samples(6), prior=st.none() | PRIORS, level=LEVELS, threshold=THRESHOLDS)
def test_the_caught_figure_is_past_the_threshold_and_more_so_at_the_spreads_limit(
        before: list[float], after: list[float], prior: PriorSpread | None, level: float, threshold: float) -> None:
    repeats = min(len(before), len(after))  # the draws of Welch's bound are cached per repeats and level: few
    at_spread, at_limit = (smallest_caught_pct([before, after], repeats, threshold, level, prior=prior,
                                               at_spread_limit=limit) for limit in (None, SPREAD_LIMIT_CONFIDENCE))
    assert threshold * (1 - 1e-9) <= at_spread <= at_limit and _finite_or_cap(at_limit)


@FEW
@given(variance=st.floats(min_value=0.0, max_value=1e4), wider=st.floats(min_value=1.0, max_value=1e3),
       repeats=st.integers(min_value=2, max_value=6), level=LEVELS, threshold=THRESHOLDS,
       extra_dof=st.sampled_from([0, 1, 8, 2000]), limit=st.sampled_from([None, SPREAD_LIMIT_CONFIDENCE]))
def test_a_wider_spread_never_catches_a_smaller_slowdown(variance: float, wider: float, repeats: int, level: float,
                                                         threshold: float, extra_dof: int,
                                                         limit: float | None) -> None:
    narrow, wide = (caught_at_spread(v, repeats, threshold, level, extra_dof=extra_dof, at_spread_limit=limit)
                    for v in (variance, variance * wider))
    assert threshold * (1 - 1e-9) <= narrow <= wide and _finite_or_cap(wide)


def _spelled_out(text: str) -> list[str]:
    """Figures of 10,000% or more written out digit by digit (a capped bound read as a number), or
    no figure at all ('inf%')."""
    return re.findall(r"\d{5}[\d.]*%|\b(?:inf|nan)%", text)


@FEW
@given(side_a=_samples(6), side_b=_samples(6), repeats=st.sampled_from([2, 3, 5]), level=LEVELS)
def test_a_runners_noise_is_stated_within_the_cap_and_reads_by_its_order(
        side_a: list[float], side_b: list[float], repeats: int, level: float) -> None:
    """2 processes a side once raised OverflowError here, and spelled 1e306% out in the file."""
    noise = runner_noise([side_a, side_b], repeats, level, [])
    assert noise.sd_pct <= noise.sd_limit_pct and math.isfinite(noise.sd_limit_pct)
    assert 0 <= noise.supported_pct and _finite_or_cap(noise.supported_pct)
    assert math.isfinite(_suggest(noise.supported_pct))
    assert not _spelled_out(metric_line(1, "GPU ms per step", noise))


@settings(derandomize=True, max_examples=15, deadline=None)
@given(side_a=_samples(6), side_b=_samples(6), repeats=st.sampled_from([2, 5]))
def test_a_borrowed_spread_supports_a_threshold_within_the_cap(side_a: list[float], side_b: list[float],
                                                              repeats: int) -> None:
    noise = runner_noise([side_a, side_b], repeats, 0.9964262598049121, [], borrowed=True)
    assert 0 <= noise.supported_pct and _finite_or_cap(noise.supported_pct)
    assert noise.borrowed == (noise.sd_pct > 0)  # a spread of none is not one to pool with
    assert noise.alone_pct is None or _finite_or_cap(noise.alone_pct)


@FEW
@given(side_a=_samples(6), side_b=_samples(6), level=LEVELS)
def test_a_too_noisy_calibration_says_so_by_the_order_of_its_figures(side_a: list[float], side_b: list[float],
                                                                     level: float) -> None:
    """The file's lines and the refusal, made from an A/A of these processes at 2 a side."""
    noise = runner_noise([side_a, side_b], 2, level, []).model_copy(
        update={"needed": [RepeatsNeeded(threshold_pct=1.0, repeats=None)]})
    aa = relative_change(side_a, side_b, level)
    both = sorted(side_a + side_b)
    ranged = (both[-1] - both[0]) / both[len(both) // 2] * 100  # as calibrate states it: inf past 1e306 apart
    floor = NoiseFloor(batch_size=1, gpu_ms_per_step=1.0, gpu_ms_spread_pct=ranged, tok_per_s_spread_pct=ranged,
                       gpu_ms_aa_ci_pct=(aa.ci_low_pct, aa.ci_high_pct),
                       tok_per_s_aa_ci_pct=(aa.ci_low_pct, aa.ci_high_pct), gpu_ms=noise, tok_per_s=noise)
    refusal = too_noisy_message(_suggest(noise.supported_pct), [floor], 2) or ""
    assert not _spelled_out(" ".join(noise_lines(floor)) + refusal)


@settings(derandomize=True, max_examples=20, deadline=None)
@given(repeats=st.integers(min_value=2, max_value=5), levels=st.sets(LEVELS, min_size=2, max_size=2))
def test_an_unchanged_pairs_upper_bound_quantile_grows_with_the_level(repeats: int, levels: set[float]) -> None:
    low, high = sorted(levels)
    welch = [welch_upper_quantile(repeats, level, 0.95) for level in (low, high)]
    borrowed = [borrowed_upper_quantile(repeats, level, 0.95, 8, 0.6) for level in (low, high)]
    for lower, higher in (welch, borrowed):
        assert 0 < lower <= higher and math.isfinite(higher)


@FEW
@given(arms=st.lists(_samples(10), min_size=1, max_size=3), slower_is_higher=st.booleans())
@example(arms=[[1e-300] * 4 + [1e300]], slower_is_higher=True)  # e^1381 off its median: past the cap
def test_a_slow_process_is_on_the_slow_side_and_no_arm_loses_over_a_third(arms: list[list[float]],
                                                                          slower_is_higher: bool) -> None:
    by_arm = {f"arm{i}": values for i, values in enumerate(arms)}
    sign = 1 if slower_is_higher else -1
    # past log(1 + SLOW_MIN_PCT) on the log scale: SLOW_MIN_PCT slower, or 1 - 1 / (1 + SLOW_MIN_PCT) less tok/s
    least = SLOW_MIN_PCT / (1 + SLOW_MIN_PCT / 100) * (1 - 1e-9)
    for name, position, off_pct in slow_in(by_arm, slower_is_higher):
        assert 1 <= position <= len(by_arm[name]) and _finite_or_cap(abs(off_pct))
        assert sign * off_pct > least
    for name, slow in set_aside(by_arm, slower_is_higher).items():
        assert len(slow) <= SET_ASIDE_SHARE * len(by_arm[name])
    found = find_slow_processes({(1, "gpu_ms" if slower_is_higher else "tok_per_s"): by_arm},
                               sum(len(v) for v in arms))
    assert found.rate_low <= found.count / found.processes <= found.rate_high


def _arm_stats(name: str, values: list[float]) -> ArmStats:
    return ArmStats(arm=name, repeats=len(values), gpu_ms_per_step=spread(values),
                    tok_per_s=spread([1 / v for v in values]), timer="cuda", sha256="0" * 64, deterministic=True)


@FEW
@given(base=_samples(10), head=_samples(10))
def test_setting_aside_keeps_every_process_but_the_slow_ones_in_every_figure(base: list[float],
                                                                             head: list[float]) -> None:
    arms = _arm_stats("base", base), _arm_stats("head", head)
    aside = slow_set_aside(*arms, batch_size=1)
    for stats_of in arms:
        gone = {s.repeat for s in aside if s.arm == stats_of.arm}
        kept = kept_arm(stats_of, aside)
        assert len(gone) <= SET_ASIDE_SHARE * stats_of.repeats
        expected = [v for i, v in enumerate(stats_of.gpu_ms_per_step.values, start=1) if i not in gone]
        assert kept.gpu_ms_per_step.values == expected
        assert kept.tok_per_s.values == [1 / v for v in expected]


@FEW
@given(before=ARMS, after=ARMS, sd_pct=st.floats(min_value=1e-6, max_value=99.9),
       dof=st.integers(min_value=1, max_value=2000))
def test_a_calibrated_spread_is_borrowed_exactly_where_the_runs_own_is_not_past_its_limit(
        before: list[float], after: list[float], sd_pct: float, dof: int) -> None:
    spreads = [CalibratedSpread(batch_size=1, metric="gpu_ms", sd_pct=sd_pct, degrees_of_freedom=dof)]
    check = borrowing([before, after], "gpu_ms", 1, spreads)
    assert check is not None
    assert math.isfinite(check.run_sd_pct) and math.isfinite(check.limit_sd_pct)
    assert check.calibrated_sd_pct < check.calibrated_limit_pct and math.isfinite(check.calibrated_limit_pct)
    assert check.borrowed == (check.run_sd_pct <= check.limit_sd_pct)
    prior = check.prior()
    assert prior is None or (prior.variance > 0 and math.isfinite(prior.variance))


@FEW
@given(trials=st.integers(min_value=0, max_value=10_000), share=st.floats(min_value=0.0, max_value=1.0),
       levels=st.sets(st.floats(min_value=0.5, max_value=1 - 1e-9), min_size=2, max_size=2))
def test_a_rates_interval_holds_the_rate_and_widens_with_its_level(trials: int, share: float,
                                                                   levels: set[float]) -> None:
    count = round(share * trials)
    (narrow_low, narrow_high), (wide_low, wide_high) = (rate_interval(count, trials, c) for c in sorted(levels))
    rate = count / trials if trials else 0.5
    assert 0 <= wide_low <= narrow_low <= rate <= narrow_high <= wide_high <= 1
