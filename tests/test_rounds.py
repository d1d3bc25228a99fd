"""Rounds that adapt: `guard run` takes confirmation rounds while a batch size is undecided, up
to measure.max_rounds and while each round fits measure.confirm_budget_s, and the report says
how many it took and why it stopped; the rounds' budget by itself. The pipeline runs in-process,
its processes answered by the stand-in (tests/standin.py) with figures the test chose."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from scipy import stats

from guard.compare import FAMILIES_PER_LOOK, METRICS_PER_LOOK, alpha_per_look, spent
from guard.measure import RepeatResult, RoundsBudget
from tests.conftest import commit_all
from tests.standin import StandIn, run_in_process
from tests.test_pipeline import CONFIG, make_repo

# 2 processes per arm and round, a 20% threshold, a head 1.5 times as slow: with a within-arm sd
# of about 7%, each bound at 0.01 / (4 rounds x 3 metrics x 1 batch size) leaves the threshold
# inside the interval after 1 and 2 rounds (t of about 2 and 6 degrees of freedom) and puts the
# lower bound past it after 3 (the test recomputes all three)
ROUNDS_CONFIG = CONFIG.format(method="none", install="", repeats=2).replace("[1, 2]", "[1]").replace(
    "[measure]", "[measure]\nthreshold_pct = 20.0").replace("max_rounds = 2", "max_rounds = 4")
# each process's step time, by arm and repeat: base's about 1 ms, head's 1.5 times that
SHARES = {"base": [0.91, 1.09, 1.0, 1.045, 0.955, 1.0], "head": [1.09, 0.91, 0.955, 1.0, 1.0, 1.045]}


def _slower_head(tmp_path: Path, config: str) -> Path:
    repo = make_repo(tmp_path, config=config)
    (repo / "note.txt").write_text("every step half as long again\n")
    commit_all(repo, "every step half as long again")
    return repo


def _half_as_long_again() -> StandIn:
    return StandIn(step_ms=lambda p, _bs: (1.5 if p.arm == "head" else 1.0) * SHARES[p.arm][p.repeat % 6])


def _log_bounds(base: list[float], head: list[float], alpha: float) -> tuple[float, float]:
    """Welch's one-sided bounds of the slowdown in percent, each wrong `alpha` of the time."""
    b, h = [math.log(v) for v in base], [math.log(v) for v in head]
    vb, vh = stats.tvar(b) / len(b), stats.tvar(h) / len(h)
    df = (vb + vh) ** 2 / (vb**2 / (len(b) - 1) + vh**2 / (len(h) - 1))
    half = stats.t.ppf(1 - alpha, df) * math.sqrt(vb + vh)
    diff = sum(h) / len(h) - sum(b) / len(b)
    return math.expm1(diff - half) * 100, math.expm1(diff + half) * 100


def test_a_run_that_needs_three_rounds_takes_them_and_stops_decided(tmp_path: Path) -> None:
    standin = _half_as_long_again()
    run = run_in_process(_slower_head(tmp_path, ROUNDS_CONFIG), tmp_path / "out", standin)
    assert run.exit_code == 1  # a regression
    report = run.report
    assert (report.rounds, report.rounds_stopped, report.rule.looks) == (3, "decided", 4), run.text
    assert "confirmation round 2 of at most 4" in run.text and "confirmation round 3 of at most 4" in run.text
    assert "confirmation round 4" not in run.text
    (batch,) = report.batch_sizes
    assert batch.verdict == "regression" and batch.look == 3
    assert [a.repeats for a in batch.arms] == [6, 6]
    # the bounds again from the processes' own figures, and at the first two rounds' processes alone
    # the third of the 4 looks the budget holds spends its share of alpha, over 2 families x 1 batch size
    def each(look: int) -> float:
        return (spent(0.01, 4, look) - (spent(0.01, 4, look - 1) if look > 1 else 0.0)) / (FAMILIES_PER_LOOK * 1)

    assert batch.alpha_per_look == pytest.approx(each(3))
    figures = {arm: [run.result(arm, r)["runs"][0]["gpu_ms_per_step"] for r in range(6)] for arm in ("base", "head")}
    low, high = _log_bounds(figures["base"], figures["head"], each(3))
    assert batch.gpu_ms_bounds is not None
    assert batch.gpu_ms_bounds.ci_low_pct == pytest.approx(low, rel=1e-6) and low > 20
    assert batch.gpu_ms_bounds.ci_high_pct == pytest.approx(high, rel=1e-6)
    for look, processes in ((1, 2), (2, 4)):
        low, high = _log_bounds(figures["base"][:processes], figures["head"][:processes], each(look))
        assert low < 20 < high  # undecided then: the round after it was needed
    # the reference process, then 2 arms x 2 repeats x 3 rounds, each round base's and head's alone
    assert len(standin.asked) == 13
    assert [(p.arm, p.repeat) for p in standin.asked[5:9]] == [("base", 2), ("head", 2), ("head", 3), ("base", 3)]
    assert report.confirm_s is not None and report.confirm_s >= 0 and report.confirm_budget_s == 180
    assert ("2 more in each of 2 confirmation rounds for batch size 1 (until every batch size was decided)"
            in run.comment)


def test_a_round_that_would_not_fit_the_budget_is_not_run(tmp_path: Path) -> None:
    """A budget under one round's processes: the first round stands, undecided, and says why."""
    standin = _half_as_long_again()
    run = run_in_process(_slower_head(tmp_path, ROUNDS_CONFIG + "confirm_budget_s = 0\n"), tmp_path / "out", standin)
    assert run.exit_code == 4, run.text  # undecided
    report = run.report
    assert (report.rounds, report.rounds_stopped) == (1, "budget"), run.text
    assert report.verdict in ("at_threshold", "inconclusive")
    assert report.confirm_s is None and report.confirm_budget_s == 0
    assert len(standin.asked) == 5  # the reference process and the first round's 4
    assert "(stopped at the time budget)" in run.comment


def _process(seconds: float | None) -> RepeatResult:
    return RepeatResult(arm="base", repeat=0, environment={}, runs=[], process_s=seconds)


def test_a_round_fits_where_the_last_rounds_process_times_say_it_does() -> None:
    budget = RoundsBudget(budget_s=100.0)
    budget.measured([_process(3.0), _process(5.0)], confirmation=False)  # the first round: not paid for
    assert (budget.rounds, budget.confirm_s, budget.estimate_s(10)) == (1, 0.0, 40.0)
    assert budget.fits(25) and not budget.fits(26)
    budget.measured([_process(2.0), _process(2.0), _process(None)], confirmation=True)
    assert (budget.rounds, budget.confirm_s, budget.left_s()) == (2, 4.0, 96.0)
    assert budget.estimate_s(48) == 96.0 and budget.fits(48) and not budget.fits(49)


def test_alpha_is_spent_over_the_looks_and_split_over_families_and_batch_sizes() -> None:
    # rule 2: the first of 4 looks spends alpha x ln(1 + (e - 1) / 4), over 2 families x 3 batch sizes
    first = alpha_per_look(0.01, 4, 3, look=1, version=2)
    assert first == pytest.approx(0.01 * math.log(1 + (math.e - 1) / 4) / (FAMILIES_PER_LOOK * 3))
    every = [alpha_per_look(0.01, 4, 3, look=k, version=2) for k in range(1, 5)]
    assert sum(every) * FAMILIES_PER_LOOK * 3 == pytest.approx(0.01)  # all of alpha by the last look, no more
    assert every == sorted(every, reverse=True)  # the first look spends the most
    # rule 1 (schema 7's reports): 4 rounds x the metrics x 3 batch sizes (the mix counts as one)
    assert alpha_per_look(0.01, 4, 3) == pytest.approx(0.01 / (4 * METRICS_PER_LOOK * 3))
    from guard.config import parse_config
    config = parse_config({"measure": {"max_rounds": 3}})
    assert config.measure.looks == 3
    assert parse_config({"measure": {"max_rounds": 3, "confirm": False}}).measure.looks == 1


def test_the_looks_are_the_ones_the_budget_holds_at_the_first_rounds_process_times() -> None:
    budget = RoundsBudget(budget_s=180.0)
    budget.measured([_process(10.0), _process(14.0)], confirmation=False)  # 12 s a process
    assert budget.looks_that_fit(10, 4) == 2  # one round of 10 processes (120 s) fits 180 s, two do not
    assert budget.looks_that_fit(5, 4) == 4 and budget.looks_that_fit(5, 2) == 2  # never past max_rounds
    assert budget.looks_that_fit(20, 4) == 1  # 240 s: no confirmation round, all of alpha at the first look
    assert RoundsBudget(budget_s=0.0).looks_that_fit(10, 4) == 1


def test_a_round_that_could_not_decide_anything_is_not_run(tmp_path: Path) -> None:
    """An unchanged commit whose processes spread about 30% against a 1% threshold: telling 1%
    from none would take thousands of processes per arm, more than the rule counts, so no
    confirmation round runs; the first round stands, undecided, and says why."""
    config = CONFIG.format(method="none", install="", repeats=3).replace("[1, 2]", "[1]").replace(
        "max_rounds = 2", "max_rounds = 4")
    repo = make_repo(tmp_path, config=config)
    (repo / "note.txt").write_text("nothing that matters\n")
    commit_all(repo, "a note")
    spread = [0.7, 1.3, 1.0, 1.25, 0.75, 1.05]
    standin = StandIn(step_ms=lambda p, _bs: spread[p.number % len(spread)])
    run = run_in_process(repo, tmp_path / "out", standin)
    report = run.report
    (batch,) = report.batch_sizes
    assert batch.undecided and batch.repeats_to_decide is None, run.text
    assert (report.rounds, report.rounds_stopped) == (1, "futile"), run.text
    assert len(standin.asked) == 7  # the reference process and the first round's 6
    assert "(stopped where the rounds left could not measure what would decide it)" in run.comment
    # on a CPU the step time is tok/s's own: a calibration of tok/s alone would not decide it, so none is asked
    assert "guard calibrate" not in run.comment
