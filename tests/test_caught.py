"""What a run could see: per metric and batch size, the smallest true slowdown its bounds
would have called a regression 95% of the time, stated in report.json and in one sentence of
the comment, and decided again from the report's numbers like every other figure.

The figure is made from the run's own spread, itself drawn: its coverage is checked over the
draw, stated from each drawn sample and held to the true power of a run at the true spread
(benchmarks/caught_coverage.py prints the same figures, at more draws)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from benchmarks.caught_coverage import THRESHOLD_PCT, coverage, default_level
from guard.measure import PASS_RATE, SPREAD_LIMIT_CONFIDENCE, caught_at_spread, relative_change, smallest_caught_pct
from guard.report import UnfoundedReport, read_report, render_comment
from tests.report_fixtures import committed, current_file, remeasured

RICH = current_file(Path(__file__).parent.parent / "docs" / "examples" / "h200-demo-b31932f" / "report.json")


@pytest.mark.parametrize(("sd", "processes", "level"), [(0.01, 5, 1 - 2 * 0.0025), (0.003, 10, 1 - 2 * 0.001)])
def test_the_stated_figure_is_caught_95_percent_of_the_time_by_the_runs_own_bounds(
        sd: float, processes: int, level: float) -> None:
    """Welch's bounds, as `relative_change` makes them, drawn 3,000 times at the stated slowdown
    and a spread of `sd`: the lower bound clears the 1% threshold 95% of the time (within 3.5
    standard errors of the draw)."""
    rng = np.random.default_rng(11)
    z = rng.standard_normal(processes)
    exact = list(np.exp(sd * (z - z.mean()) / z.std(ddof=1)))  # a sample whose spread is sd, exactly
    caught = smallest_caught_pct([exact, exact], processes, 1.0, level)
    draws = 3000
    hits = sum(relative_change(list(10 * np.exp(rng.normal(0, sd, processes))),
                               list(10 * (1 + caught / 100) * np.exp(rng.normal(0, sd, processes))),
                               level).ci_low_pct > 1.0 for _ in range(draws))
    margin = 3.5 * (PASS_RATE * (1 - PASS_RATE) / draws) ** 0.5
    assert abs(hits / draws - PASS_RATE) < margin, (caught, hits / draws)


# Statements drawn per case, and how far under SPREAD_LIMIT_CONFIDENCE their share may fall by the
# draw alone: a one-sided binomial tolerance, missed by chance once in 10,000 cases.
STATEMENTS = 1500
TOLERANCE = float(stats.norm.isf(1e-4)) * math.sqrt(
    SPREAD_LIMIT_CONFIDENCE * (1 - SPREAD_LIMIT_CONFIDENCE) / STATEMENTS)
LEVEL = default_level()  # the default rule's bounds at one batch size
# n per arm at a spread of 1%, and the spreads of GPU ms (0.1%) and of end-to-end ms (5%) at the
# default 5: the figures scale with the spread, so its few values check the arithmetic, not the law
SIGHT_CASES = pytest.mark.parametrize(("repeats", "sd_pct"), [(2, 1.0), (3, 1.0), (5, 0.1), (5, 1.0), (5, 5.0),
                                                             (8, 1.0)])


@SIGHT_CASES
def test_the_figure_stated_at_the_spread_limit_is_caught_95_percent_of_the_time_in_95_percent_of_runs(
        repeats: int, sd_pct: float) -> None:
    """Unchanged runs at a true sd of `sd_pct` each state X at the upper limit of their own spread
    (`at_spread_limit`); a run at that sd then calls a true slowdown of X a regression PASS_RATE
    of the time or more in SPREAD_LIMIT_CONFIDENCE of them, within the draw's tolerance."""
    found = coverage(STATEMENTS, sd_pct, repeats, LEVEL, SPREAD_LIMIT_CONFIDENCE, seed=48)
    assert found["share"] >= SPREAD_LIMIT_CONFIDENCE - TOLERANCE, found


@pytest.mark.parametrize(("repeats", "sd_pct"), [(2, 1.0), (5, 0.1), (8, 1.0)])
def test_the_figure_stated_at_the_runs_own_spread_is_not(repeats: int, sd_pct: float) -> None:
    """The statement reports to rule 4 make (at the run's own spread, recomputed so to the bit):
    its true power is PASS_RATE or more in fewer than half of runs, 0.85 to 0.88 on average."""
    found = coverage(STATEMENTS, sd_pct, repeats, LEVEL, None, seed=48)
    assert found["share"] < SPREAD_LIMIT_CONFIDENCE - TOLERANCE and found["share"] < 0.5, found
    assert found["mean"] < PASS_RATE, found


def _pooled_coverage(calibrated_dof: int, repeats: int, at_spread_limit: float | None) -> float:
    """The calibration's expectation (`caught_at_spread` on its own spread and degrees of freedom),
    drawn as a calibration's spread is (chi-square on its dof, at a true sd of 1%), held to the
    exact power of a run that pools a spread on 2 x (repeats - 1) + `calibrated_dof` degrees of
    freedom: its lower bound is then noncentral t. The share of statements caught PASS_RATE of the
    time or more."""
    sd = 0.01
    rng = np.random.default_rng([calibrated_dof, repeats])
    variances = sd**2 * rng.chisquare(calibrated_dof, STATEMENTS) / calibrated_dof
    stated = np.array([caught_at_spread(v, repeats, THRESHOLD_PCT, LEVEL, extra_dof=calibrated_dof,
                                        at_spread_limit=at_spread_limit) for v in variances])
    dof = 2 * repeats - 2 + calibrated_dof
    noncentrality = (np.log1p(stated / 100) - math.log1p(THRESHOLD_PCT / 100)) / (sd * math.sqrt(2 / repeats))
    power = stats.nct.sf(stats.t.ppf(0.5 + LEVEL / 2, dof), dof, noncentrality)
    return float(np.mean(power >= PASS_RATE))


@pytest.mark.parametrize(("calibrated_dof", "repeats"), [(4, 2), (8, 5), (18, 3)])
def test_the_calibrations_expectation_at_its_spread_limit_is_caught_as_promised(calibrated_dof: int,
                                                                                repeats: int) -> None:
    assert _pooled_coverage(calibrated_dof, repeats, SPREAD_LIMIT_CONFIDENCE) >= SPREAD_LIMIT_CONFIDENCE - TOLERANCE


@pytest.mark.parametrize(("calibrated_dof", "repeats"), [(4, 2), (8, 5), (18, 3)])
def test_the_calibrations_expectation_at_its_own_spread_is_not(calibrated_dof: int, repeats: int) -> None:
    assert _pooled_coverage(calibrated_dof, repeats, None) < SPREAD_LIMIT_CONFIDENCE - TOLERANCE


def test_the_run_states_what_it_could_see_and_a_forged_figure_is_refused(tmp_path: Path) -> None:
    report = remeasured(committed(RICH), 1.0, jitter=0.003)
    for batch in report.batch_sizes:
        figures = {m: batch.bounds(m) for m in ("gpu_ms", "tok_per_s")}
        assert set(batch.caught_pct) == {"gpu_ms", "tok_per_s"} and None not in figures.values()
        base, head = ([a for a in batch.arms if a.arm == name][0].gpu_ms_per_step.values
                      for name in (report.base, report.head))
        assert batch.alpha_per_look is not None
        # rule 5 states it at the upper 95% limit of the run's spread
        assert batch.caught_pct["gpu_ms"] == pytest.approx(smallest_caught_pct(
            [base, head], len(base), report.rule.gpu_ms.pct, 1 - 2 * batch.alpha_per_look,
            at_spread_limit=SPREAD_LIMIT_CONFIDENCE))
        assert batch.caught_pct["gpu_ms"] > report.rule.gpu_ms.pct
    sentence = next(line for line in render_comment(report).splitlines() if "would have caught" in line)
    first, second = (f"{b.caught_pct['gpu_ms']:.2g}%" for b in report.batch_sizes)
    assert sentence.startswith(f"This run would have caught a slowdown in GPU ms per step of {first} or more at "
                               f"batch size 1 (") and f"and {second} at batch size 2 (" in sentence
    path = tmp_path / "report.json"
    path.write_text(report.model_dump_json())
    assert read_report(path).batch_sizes[0].caught_pct == report.batch_sizes[0].caught_pct
    forged = json.loads(report.model_dump_json())
    forged["batch_sizes"][0]["caught_pct"]["gpu_ms"] = 0.5  # "this run would have seen half a percent"
    path.write_text(json.dumps(forged))
    with pytest.raises(UnfoundedReport, match="caught_pct"):
        read_report(path)


def test_the_calibrations_expectation_stands_beside_what_the_run_saw() -> None:
    """With a calibrated spread of GPU ms at each batch size, the report states what these
    processes would see at that spread, beside what they saw at their own; a run noisier than its
    calibration states a larger figure than the calibration expected."""
    from guard.config import CalibratedSpread
    from guard.measure import caught_at_spread

    sizes = [b.batch_size for b in committed(RICH).batch_sizes]
    spreads = [CalibratedSpread(batch_size=s, metric="gpu_ms", sd_pct=0.05, degrees_of_freedom=20) for s in sizes]
    report = remeasured(committed(RICH), 1.0, jitter=0.003, spreads=spreads)
    for batch in report.batch_sizes:
        (check,) = batch.borrowed
        assert not check.borrowed  # the run's 0.3% is past what a 0.05% calibration allows
        assert batch.alpha_per_look is not None and set(batch.expected_caught_pct) == {"gpu_ms"}
        processes = min(len(a.gpu_ms_per_step.values) for a in batch.arms)
        assert batch.expected_caught_pct["gpu_ms"] == pytest.approx(caught_at_spread(
            (0.05 / 100) ** 2, processes, report.rule.gpu_ms.pct, 1 - 2 * batch.alpha_per_look, extra_dof=20,
            at_spread_limit=SPREAD_LIMIT_CONFIDENCE))
        assert batch.expected_caught_pct["gpu_ms"] < batch.caught_pct["gpu_ms"]
    sentence = next(line for line in render_comment(report).splitlines() if "would have caught" in line)
    expected = report.batch_sizes[0].expected_caught_pct["gpu_ms"]
    assert f"the calibration expected {expected:.2g}%" in sentence
