"""spread() and relative_change(), checked against figures computed here with numpy/scipy."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy import stats

from guard.measure import detectable_change_pct, relative_change, repeats_to_decide, repeats_to_rule_out, spread


def welch_expected(before: list[float], after: list[float], confidence: float) -> dict[str, float]:
    """The Welch t interval of mean(log after) - mean(log before), as percent changes."""
    lb, la = np.log(np.asarray(before)), np.log(np.asarray(after))
    diff = la.mean() - lb.mean()
    vb = lb.var(ddof=1) / lb.size
    va = la.var(ddof=1) / la.size
    df = (va + vb) ** 2 / (va**2 / (la.size - 1) + vb**2 / (lb.size - 1))
    half = stats.t.ppf((1 + confidence) / 2, df) * math.sqrt(va + vb)
    return {
        "pct": (math.exp(diff) - 1) * 100,
        "lo": (math.exp(diff - half) - 1) * 100,
        "hi": (math.exp(diff + half) - 1) * 100,
        "df": df,
    }


BEFORE = [10.2, 10.0, 10.5, 9.9, 10.1]
AFTER = [10.9, 10.6, 10.8, 11.2, 10.7]


# -- spread ------------------------------------------------------------------------------


def test_spread_odd_count() -> None:
    s = spread([4.0, 1.0, 3.0])
    assert s.median == 3.0
    assert s.min == 1.0
    assert s.max == 4.0
    assert s.values == [4.0, 1.0, 3.0]  # kept in the order given
    assert s.spread_pct == pytest.approx((4 - 1) / 3 * 100)


def test_spread_even_count_uses_middle_mean() -> None:
    s = spread([3.0, 1.0, 2.0, 10.0])
    assert s.median == 2.5
    assert (s.min, s.max) == (1.0, 10.0)
    assert s.spread_pct == pytest.approx(360.0)  # (10 - 1) / 2.5


def test_spread_of_equal_values_is_zero() -> None:
    s = spread([7.5, 7.5, 7.5])
    assert (s.median, s.min, s.max) == (7.5, 7.5, 7.5)
    assert s.spread_pct == 0.0


def test_spread_copies_its_input() -> None:
    values = [1.0, 2.0]
    s = spread(values)
    values.append(99.0)
    assert s.values == [1.0, 2.0]


# -- relative_change ---------------------------------------------------------------------


def test_point_estimate_is_ratio_of_geometric_means() -> None:
    change = relative_change(BEFORE, AFTER)
    expected = (np.exp(np.mean(np.log(AFTER)) - np.mean(np.log(BEFORE))) - 1) * 100
    assert change.pct == pytest.approx(expected, rel=1e-12)
    # a ratio of geometric means is not the ratio of arithmetic means
    assert change.pct != pytest.approx((np.mean(AFTER) / np.mean(BEFORE) - 1) * 100, rel=1e-6)


@pytest.mark.parametrize("confidence", [0.95, 0.90, 0.99])
def test_interval_is_welch_t_interval_on_logs(confidence: float) -> None:
    change = relative_change(BEFORE, AFTER, confidence)
    exp = welch_expected(BEFORE, AFTER, confidence)
    assert change.confidence == confidence
    assert change.ci_low_pct == pytest.approx(exp["lo"], rel=1e-9)
    assert change.ci_high_pct == pytest.approx(exp["hi"], rel=1e-9)
    # asymmetric around the point estimate (it is symmetric in log space)
    assert change.ci_high_pct - change.pct > change.pct - change.ci_low_pct


def test_interval_uses_welch_df_not_pooled_df() -> None:
    # very different variances and sizes: Welch df is far from n_a + n_b - 2
    before = [100.0, 101.0, 99.0, 100.5, 99.5, 100.2, 99.8, 100.1]
    after = [90.0, 130.0, 110.0]
    exp = welch_expected(before, after, 0.95)
    assert exp["df"] < 3  # well below the pooled 9
    change = relative_change(before, after, 0.95)
    assert change.ci_low_pct == pytest.approx(exp["lo"], rel=1e-9)
    assert change.ci_high_pct == pytest.approx(exp["hi"], rel=1e-9)


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (BEFORE, AFTER),
        ([5.0, 5.5, 4.8], [5.1, 5.2, 5.05, 4.9, 5.3, 5.0]),
        ([100.0, 101.0, 99.0, 100.5], [90.0, 130.0, 110.0]),
    ],
)
def test_p_value_matches_scipy_welch_ttest(before: list[float], after: list[float]) -> None:
    change = relative_change(before, after)
    expected = stats.ttest_ind(np.log(after), np.log(before), equal_var=False).pvalue
    assert change.p_value == pytest.approx(float(expected), rel=1e-9)


def test_identical_inputs_give_zero_change() -> None:
    change = relative_change(BEFORE, list(BEFORE))
    assert change.pct == 0.0
    assert change.p_value == pytest.approx(1.0)
    assert change.ci_low_pct < 0 < change.ci_high_pct
    # symmetric in log space around zero
    assert math.log1p(change.ci_low_pct / 100) == pytest.approx(-math.log1p(change.ci_high_pct / 100))


def test_constant_sides_with_different_values() -> None:
    change = relative_change([2.0, 2.0, 2.0], [3.0, 3.0, 3.0])
    assert change.pct == pytest.approx(50.0)
    assert change.ci_low_pct == pytest.approx(50.0)
    assert change.ci_high_pct == pytest.approx(50.0)
    assert change.p_value == 0.0
    assert all(math.isfinite(v) for v in (change.pct, change.ci_low_pct, change.ci_high_pct, change.p_value))


def test_constant_sides_with_equal_values() -> None:
    change = relative_change([4.0, 4.0], [4.0, 4.0, 4.0])
    assert change.pct == 0.0
    assert (change.ci_low_pct, change.ci_high_pct) == (0.0, 0.0)
    assert change.p_value == 1.0


def test_one_constant_side_uses_the_other_sides_df() -> None:
    before = [2.0, 2.0, 2.0, 2.0]
    after = [2.2, 2.3, 2.1, 2.25]
    change = relative_change(before, after)
    la = np.log(after)
    diff = la.mean() - math.log(2.0)
    se = math.sqrt(la.var(ddof=1) / la.size)
    half = stats.t.ppf(0.975, la.size - 1) * se  # Welch df collapses to n_after - 1
    assert change.ci_low_pct == pytest.approx((math.exp(diff - half) - 1) * 100, rel=1e-9)
    assert change.ci_high_pct == pytest.approx((math.exp(diff + half) - 1) * 100, rel=1e-9)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # scipy notes the constant side
        expected_p = float(stats.ttest_ind(la, np.log(before), equal_var=False).pvalue)
    assert change.p_value == pytest.approx(expected_p, rel=1e-9)


@pytest.mark.parametrize(
    ("before", "after"),
    [([1.0], [1.0, 2.0]), ([1.0, 2.0], [1.0]), ([], [1.0, 2.0]), ([1.0, 2.0], [])],
)
def test_fewer_than_two_values_is_an_error(before: list[float], after: list[float]) -> None:
    with pytest.raises(ValueError, match="at least two"):
        relative_change(before, after)


@pytest.mark.parametrize(
    ("before", "after"),
    [([1.0, 0.0], [1.0, 2.0]), ([1.0, 2.0], [-1.0, 2.0]), ([0.0, 0.0], [0.0, 0.0])],
)
def test_non_positive_values_are_an_error(before: list[float], after: list[float]) -> None:
    with pytest.raises(ValueError, match="positive"):
        relative_change(before, after)


def _pass_rate(sigma: float, n: int, threshold_pct: float, trials: int, seed: int) -> float:
    """How often two arms of n repeats with no true change pass, by relative_change's own interval."""
    rng = np.random.default_rng(seed)
    passed = 0
    for _ in range(trials):
        before, after = np.exp(rng.normal(0.0, sigma, n)), np.exp(rng.normal(0.0, sigma, n))
        passed += relative_change(list(before), list(after)).ci_high_pct < threshold_pct
    return passed / trials


def test_repeats_to_rule_out_gives_the_pass_rate_it_promises() -> None:
    sigma = 0.01  # 1% between repeats, as tok/s on a shared host
    rng = np.random.default_rng(7)
    sample = [list(np.exp(rng.normal(0.0, sigma, 400))), list(np.exp(rng.normal(0.0, sigma, 400)))]
    n = repeats_to_rule_out(sample, 1.0)
    assert n is not None and 10 <= n <= 30  # (t + t) x sigma x sqrt(2 / n) <= 1%: about 2 x 1.7 x 1.41 squared
    assert _pass_rate(sigma, n, 1.0, 2000, seed=1) >= 0.93
    assert _pass_rate(sigma, n // 3, 1.0, 2000, seed=2) < 0.8  # far fewer repeats pass far less often


def test_repeats_to_rule_out_ignores_each_arms_own_level_and_gives_up_past_most() -> None:
    steady = [[1.0, 1.001, 0.999], [2.0, 2.002, 1.998]]  # two arms 2x apart, each 0.1% noisy
    assert repeats_to_rule_out(steady, 1.0) == 2
    assert repeats_to_rule_out([[1.0, 1.5, 0.7], [1.1, 0.6, 1.4]], 1.0, most=50) is None
    with pytest.raises(ValueError):
        repeats_to_rule_out([[1.0]], 1.0)


def test_repeats_to_decide_tells_a_change_from_the_threshold_as_often_as_it_promises() -> None:
    sigma = 0.0005  # 0.05% between repeats (sd), about GPU time per step on the H200
    rng = np.random.default_rng(11)
    sample = [list(np.exp(rng.normal(0.0, sigma, 400))), list(np.exp(rng.normal(0.0, sigma, 400)))]
    n = repeats_to_decide(sample, 0.45, 0.5)
    assert n is not None and 20 <= n <= 35  # (t + t) x sigma x sqrt(2 / n) <= 0.05 points: about 26

    def decided(repeats: int, seed: int) -> float:
        rng = np.random.default_rng(seed)
        shift = np.log1p(0.0045)
        hits = 0
        for _ in range(2000):
            before, after = np.exp(rng.normal(0.0, sigma, repeats)), np.exp(rng.normal(shift, sigma, repeats))
            hits += relative_change(list(before), list(after)).ci_high_pct < 0.5
        return hits / 2000

    assert decided(n, seed=3) >= 0.93
    assert decided(max(2, n // 4), seed=4) < 0.8
    # the farther from the threshold, the fewer; at the threshold itself, never
    assert repeats_to_decide(sample, 0.3, 0.5) < n  # type: ignore[operator]
    assert repeats_to_decide(sample, 0.5, 0.5) is None


def test_detectable_change_falls_under_a_threshold_at_the_repeats_that_rule_it_out() -> None:
    """The two questions share one margin: the repeats repeats_to_rule_out names are the first
    at which the detectable change fits under the threshold."""
    by_arm = [[100.0, 103.0, 98.0, 101.5, 99.0], [97.0, 102.0, 100.5, 99.5, 101.0]]
    needed = repeats_to_rule_out(by_arm, 1.0)
    assert needed is not None and needed > 5
    assert detectable_change_pct(by_arm, needed) <= 1.0 < detectable_change_pct(by_arm, needed - 1)
    logs = [np.log(v) for v in by_arm]
    variance = (np.var(logs[0], ddof=1) + np.var(logs[1], ddof=1)) / 2
    t = stats.t.ppf(0.975, 8) + stats.t.ppf(0.95, 8)
    assert detectable_change_pct(by_arm, 5) == pytest.approx(np.expm1(t * np.sqrt(2 * variance / 5)) * 100)


def test_the_distributions_are_scipy_stats_own_without_importing_it() -> None:
    """scipy.special's functions give scipy.stats' quantiles and tails bit for bit (a second of
    every guard process was its import), and the Clopper-Pearson bounds as beta quantiles agree
    with scipy.stats' root-finding to its own precision."""
    import subprocess
    import sys

    from guard.measure._stats import chi2_quantile, f_quantile, rate_interval, t_quantile, t_upper_tail

    rng = np.random.default_rng(7)
    q = np.concatenate([rng.uniform(0, 1, 400), [1e-9, 0.005, 0.025, 0.05, 0.5, 0.8, 0.95, 0.975, 0.9995]])
    x = rng.uniform(-8, 8, 100)
    for df in [1, 2, 3, 5, 8, 17, 30, 120, *rng.uniform(1.0, 300.0, 8)]:
        assert np.array_equal(t_quantile(q, df), stats.t.ppf(q, df))
        assert np.array_equal(t_upper_tail(x, df), stats.t.sf(x, df))
        assert np.array_equal(chi2_quantile(q, df), stats.chi2.ppf(q, df))
        for dfd in (1, 4, 9.5, 60):
            assert np.array_equal(f_quantile(q, df, dfd), stats.f.ppf(q, df, dfd))
    for trials in (1, 2, 3, 5, 8, 13, 20):
        for count in range(trials + 1):
            ci = stats.binomtest(count, trials).proportion_ci(0.95, method="exact")
            assert rate_interval(count, trials, 0.95) == pytest.approx((ci.low, ci.high), abs=1e-11)
    # a run's decision imports no scipy.stats
    code = ("import sys; from guard.measure import relative_change, rate_interval; relative_change([1, 1.1], "
            "[1.2, 1.3]); rate_interval(1, 4); print('scipy.stats' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "False\n"
