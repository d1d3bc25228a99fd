"""Borrowing the calibrated spread (compare/_borrow.py): the pooled interval against a formula
written out here, the check that refuses a spread the run's own is past, each bound's error rate
and the calibration's smallest threshold checked by simulation, and the thresholds file that
carries the spreads, bad ones refused with one message."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from guard._errors import ConfigError
from guard.compare._borrow import borrowing
from guard.config import CalibratedSpread, Thresholds, load_thresholds, write_thresholds
from guard.measure import BORROW_CHECK_ALPHA, PASS_RATE, relative_change, runner_noise

LEVEL = 0.99875  # a bound's level at alpha 0.01 over 2 rounds, 3 metrics, 2 batch sizes, about


def _spread(sd_pct: float, dof: int, batch_size: int = 1, metric: str = "gpu_ms") -> CalibratedSpread:
    return CalibratedSpread(batch_size=batch_size, metric=metric, sd_pct=sd_pct, degrees_of_freedom=dof)


def _calibrated(rng: np.random.Generator, sigma: float, per_side: int) -> CalibratedSpread:
    sides = [np.log(3.0) + rng.normal(0, sigma, per_side) for _ in range(2)]
    pooled = sum(((x - x.mean()) ** 2).sum() for x in sides) / (2 * per_side - 2)
    return _spread(math.sqrt(pooled) * 100, 2 * per_side - 2)


def _draw(rng: np.random.Generator, sigma: float, n: int) -> list[float]:
    return list(3.0 * np.exp(rng.normal(0.0, sigma, n)))


def test_the_pooled_interval_is_students_t_on_the_summed_degrees_of_freedom() -> None:
    before, after = [1.00, 1.02, 0.99], [1.10, 1.13, 1.08]
    check = borrowing([before, after], "gpu_ms", 1, [_spread(1.5, 8)])
    assert check is not None and check.borrowed
    # the calibrated sd's upper 95% limit is what is pooled in
    upper = 0.015 * math.sqrt(8 / stats.chi2.ppf(0.05, 8))
    assert check.calibrated_limit_pct == pytest.approx(upper * 100)
    logs = [np.log(before), np.log(after)]
    run_ss = sum(((x - x.mean()) ** 2).sum() for x in logs)
    pooled = (8 * upper**2 + run_ss) / (8 + 4)
    half = stats.t.ppf(0.5 + LEVEL / 2, 12) * math.sqrt(pooled * (1 / 3 + 1 / 3))
    diff = logs[1].mean() - logs[0].mean()
    change = relative_change(before, after, LEVEL, prior=check.prior())
    assert change.ci_low_pct == pytest.approx(math.expm1(diff - half) * 100)
    assert change.ci_high_pct == pytest.approx(math.expm1(diff + half) * 100)
    # at 3 processes per arm the run's own interval is far wider: Welch's t on about 4 degrees of freedom
    alone = relative_change(before, after, LEVEL)
    assert alone.ci_high_pct - alone.ci_low_pct > 1.5 * (change.ci_high_pct - change.ci_low_pct)


def test_a_run_noisier_than_its_calibration_does_not_borrow() -> None:
    quiet = [[1.0, 1.001, 0.999], [1.0, 1.0005, 0.9995]]
    noisy = [[1.0, 1.05, 0.95], [1.0, 1.04, 0.97]]
    spreads = [_spread(0.5, 8)]
    limit = 0.5 * math.sqrt(stats.f.ppf(1 - BORROW_CHECK_ALPHA, 4, 8))
    for values, borrowed in ((quiet, True), (noisy, False)):
        check = borrowing(values, "gpu_ms", 1, spreads)
        assert check is not None and check.limit_sd_pct == pytest.approx(limit)
        assert check.borrowed is borrowed and (check.run_sd_pct <= limit) is borrowed
    refused = borrowing(noisy, "gpu_ms", 1, spreads)
    assert refused is not None and refused.prior() is None
    assert relative_change(*noisy, LEVEL, prior=refused.prior()) == relative_change(*noisy, LEVEL)
    # a spread for another metric or batch size is not this one's
    assert borrowing(quiet, "tok_per_s", 1, spreads) is None
    assert borrowing(quiet, "gpu_ms", 2, spreads) is None


@pytest.mark.slow
@pytest.mark.parametrize(("noisier", "most"), [(1.0, 1.0), (1.5, 1.0), (2.0, 3.0)])
def test_each_bound_errs_about_as_often_as_alpha_allows(noisier: float, most: float) -> None:
    """Unchanged pairs of 3 processes per arm, each with its own 5-per-side calibration: the
    lower bound passes zero at most about as often as the level allows, with the runner as steady
    as calibrated or 1.5 times as noisy; at twice as noisy, at most 3 times as often (the
    measured cost of borrowing, tabled in docs/notebook/decision-rule.md)."""
    rng = np.random.default_rng(int(noisier * 10))
    level, trials, sigma = 0.99, 6000, 0.01  # a loose level, so that errors are counted in the tens
    errors = 0
    for _ in range(trials):
        spread = _calibrated(rng, sigma, 5)
        values = [_draw(rng, sigma * noisier, 3), _draw(rng, sigma * noisier, 3)]
        check = borrowing(values, "gpu_ms", 1, [spread])
        assert check is not None
        errors += relative_change(*values, level, prior=check.prior()).ci_low_pct > 0
    allowed = (1 - level) / 2 * trials * most
    assert errors <= allowed + 3 * math.sqrt(allowed)


def test_borrowing_narrows_what_a_steady_runner_can_detect() -> None:
    """At 3 processes per arm and the rule's level, a slowdown of 5 process sds is found far more
    often when the spread is borrowed (where Welch's t on about 4 degrees of freedom is widest)."""
    rng = np.random.default_rng(4)
    sigma, found, found_alone = 0.01, 0, 0
    for _ in range(1500):
        spread = _calibrated(rng, sigma, 5)
        values = [_draw(rng, sigma, 3), [v * math.exp(5 * sigma) for v in _draw(rng, sigma, 3)]]
        check = borrowing(values, "gpu_ms", 1, [spread])
        assert check is not None
        found += relative_change(*values, LEVEL, prior=check.prior()).ci_low_pct > 0
        found_alone += relative_change(*values, LEVEL).ci_low_pct > 0
    assert found > 2 * found_alone, (found, found_alone)


def test_the_calibrations_smallest_threshold_holds_for_a_run_that_borrows() -> None:
    """Calibrate on one A/A of 5 per side, then run a fresh unchanged pair of 3 per arm that
    borrows that spread as a run does: its upper bound falls under the calibration's smallest
    threshold PASS_RATE of the time or more; and that threshold is far below the one the run
    would need on its own processes alone."""
    rng = np.random.default_rng(6)
    sigma, passed, gains = 0.01, [], []
    for _ in range(1500):
        sides = [_draw(rng, sigma, 5), _draw(rng, sigma, 5)]
        noise = runner_noise(sides, 3, LEVEL, [], borrowed=True)
        assert noise.borrowed and noise.alone_pct is not None
        gains.append(noise.alone_pct / noise.supported_pct)
        spread = _spread(noise.sd_pct, noise.degrees_of_freedom)
        values = [_draw(rng, sigma, 3), _draw(rng, sigma, 3)]
        check = borrowing(values, "gpu_ms", 1, [spread])
        passed.append(relative_change(*values, LEVEL, prior=check.prior() if check else None).ci_high_pct
                      < noise.supported_pct)
    assert np.mean(passed) >= PASS_RATE
    assert np.median(gains) > 2


def test_the_thresholds_file_keeps_the_spreads_and_refuses_bad_ones(tmp_path: Path) -> None:
    path = tmp_path / "thr.toml"
    written = Thresholds(gpu_ms_pct=2.0, tok_per_s_pct=6.0, spreads=[
        _spread(0.4123456, 8), _spread(1.9, 8, metric="tok_per_s"), _spread(0.5, 8, batch_size=2)])
    write_thresholds(path, written, "calibrated")
    read = load_thresholds(path)
    assert [(s.batch_size, s.metric, s.degrees_of_freedom) for s in read.spreads] == [
        (1, "gpu_ms", 8), (1, "tok_per_s", 8), (2, "gpu_ms", 8)]
    assert read.spreads[0].sd_pct == pytest.approx(0.4123456, rel=1e-5)
    text = path.read_text()
    for bad, message in (
        (text.replace("degrees_of_freedom = 8", "degrees_of_freedom = 0", 1),
         r"'spread\[1\]\.degrees_of_freedom': Input should be greater than or equal to 1"),
        (text.replace('metric = "tok_per_s"', 'metric = "gpu_ms"'),
         r"batch size 1's gpu_ms spread is given twice"),
        (text.replace("sd_pct = 0.412346", "sd_pct = -1"), r"'spread\[1\]\.sd_pct': Input should be greater than 0"),
        (text.replace('metric = "gpu_ms"', 'metric = "ms"', 1), r"'spread\[1\]\.metric'"),
    ):
        path.write_text(bad)
        with pytest.raises(ConfigError, match=message):
            load_thresholds(path)
    # a file from before spreads were kept still reads, and the run borrows nothing
    path.write_text("[thresholds]\ngpu_ms_pct = 2.0\ntok_per_s_pct = 6.0\n")
    assert load_thresholds(path).spreads == []


# ---- in a report: kept, decided again when read back, and said in the method fold ---------------

REPO_ROOT = Path(__file__).resolve().parents[1]
DEMO = REPO_ROOT / "docs" / "examples" / "h200-demo-b31932f" / "report.json"


def _borrowing_report(factor: float, spreads: list[CalibratedSpread]):  # type: ignore[no-untyped-def]
    """The committed H200 demo's base, head made `factor` times as slow, decided again with `spreads`."""
    from tests.report_fixtures import committed, remeasured

    return remeasured(committed(DEMO), factor, jitter=0.002, spreads=spreads)


def test_a_report_keeps_what_it_borrowed_and_is_decided_again_with_it(tmp_path: Path) -> None:
    from guard.report import UnfoundedReport, read_report, render_comment

    from tests.report_fixtures import committed

    sizes = [b.batch_size for b in committed(DEMO).batch_sizes]
    steady = [_spread(0.2, 8, batch_size=size) for size in sizes]
    report = _borrowing_report(1.004, steady)
    for batch in report.batch_sizes:
        (check,) = batch.borrowed  # GPU ms only: no tok/s spread was calibrated
        assert check.metric == "gpu_ms" and check.borrowed
    path = tmp_path / "report.json"
    path.write_text(report.model_dump_json())
    again = read_report(path)
    assert list(again.rule.spreads) == steady and again.batch_sizes[0].borrowed == report.batch_sizes[0].borrowed
    comment = render_comment(again)
    assert "pool this run's spread with the calibrated one" in comment and "Not borrowed" not in comment
    assert "or Student's t where the calibrated spread was pooled in" in comment

    # a report that says it borrowed where its own numbers do not let it is refused
    data = report.model_dump(mode="json")
    data["rule"]["spreads"] = [dict(s, sd_pct=0.0001) for s in data["rule"]["spreads"]]
    path.write_text(json.dumps(data))
    with pytest.raises(UnfoundedReport, match="states verdicts its own numbers do not give"):
        read_report(path)

    # nor one that says it did not borrow where it did
    data = report.model_dump(mode="json")
    data["batch_sizes"][0]["borrowed"][0]["borrowed"] = False
    path.write_text(json.dumps(data))
    with pytest.raises(UnfoundedReport, match=r"borrowed \['gpu_ms: not borrowed'\], but its numbers give "
                                              r"\['gpu_ms: borrowed'\]"):
        read_report(path)

    # nor one whose printed figures are not the check's own
    data = report.model_dump(mode="json")
    data["batch_sizes"][0]["borrowed"][0]["run_sd_pct"] = 0.01
    path.write_text(json.dumps(data))
    with pytest.raises(UnfoundedReport, match=r"borrowed\[gpu_ms\]\.run_sd_pct 0\.01, but its numbers give"):
        read_report(path)

    # a spread far quieter than the run's own is not borrowed, and the comment says to calibrate again
    refused = _borrowing_report(1.004, [_spread(0.0001, 8, batch_size=size) for size in sizes])
    assert not any(c.borrowed for b in refused.batch_sizes for c in b.borrowed)
    text = render_comment(refused)
    assert "Not borrowed, as this run's spread was past the calibrated one" in text and "calibrate it again" in text
    assert "pool this run's spread" not in text



def test_the_change_shown_pools_the_spread_its_bounds_pooled() -> None:
    """The 95% change beside a borrowing metric's bounds is Student's t on the same pooled spread,
    not Welch's on the run's processes alone; a metric that did not borrow shows Welch's."""
    from tests.report_fixtures import committed

    sizes = [b.batch_size for b in committed(DEMO).batch_sizes]
    report = _borrowing_report(1.004, [_spread(0.2, 8, batch_size=size) for size in sizes])
    for batch in report.batch_sizes:
        arms = {a.arm: a for a in batch.arms}
        check = batch.borrowing("gpu_ms")
        assert check is not None and check.borrowed and batch.borrowing("tok_per_s") is None
        ms = [arms[name].gpu_ms_per_step.values for name in (report.base, report.head)]
        pooled = relative_change(*ms, report.rule.confidence, prior=check.prior())
        assert batch.gpu_ms_change == pooled != relative_change(*ms, report.rule.confidence)
        tok = [arms[name].tok_per_s.values for name in (report.base, report.head)]
        assert batch.tok_per_s_change == relative_change(*tok, report.rule.confidence)
