"""Rounds that adapt: `guard run` takes confirmation rounds while a batch size is undecided, up
to measure.max_rounds and while each round fits measure.confirm_budget_s, and the report says
how many it took and why it stopped; the rounds' budget by itself."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from scipy import stats

from guard.compare import METRICS_PER_LOOK, alpha_per_look
from guard.measure import RepeatResult, RoundsBudget
from tests.conftest import commit_all, writable_by_all
from tests.test_pipeline import CONFIG, make_repo
from tests.workload_sources import ROUNDS_WORKLOAD

# 2 processes per arm and round, a 20% threshold, a head 1.5 times as slow: with the workload's
# within-arm sd of about 7%, each bound at 0.01 / (4 rounds x 2 metrics x 1 batch size) leaves the
# threshold inside the interval after 1 and 2 rounds (t of about 2 and 6 degrees of freedom) and
# puts the lower bound past it after 3
ROUNDS_CONFIG = CONFIG.format(method="none", install="", repeats=2).replace("[1, 2]", "[1]").replace(
    "[measure]", 'pass_env = ["ROUNDS_COUNTER"]\n[measure]\nthreshold_pct = 20.0').replace(
    "max_rounds = 2", "max_rounds = 4")


def _slower_head(tmp_path: Path, config: str) -> tuple[Path, Path]:
    repo = make_repo(tmp_path, config=config, files={"wl.py": ROUNDS_WORKLOAD})
    (repo / "wl.py").write_text(ROUNDS_WORKLOAD.replace("HEAD_FACTOR = 1.0", "HEAD_FACTOR = 1.5"))
    commit_all(repo, "every step half as long again")
    return repo, writable_by_all(tmp_path / "notes") / "count"


def _run(repo: Path, out: Path, counter: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "guard", "run", "--repo", str(repo), "--head", "feature", "--out", str(out)],
        capture_output=True, text=True, timeout=600, env=os.environ | {"ROUNDS_COUNTER": str(counter)},
    )


def _log_bounds(base: list[float], head: list[float], alpha: float) -> tuple[float, float]:
    """Welch's one-sided bounds of the slowdown in percent, each wrong `alpha` of the time."""
    b, h = [math.log(v) for v in base], [math.log(v) for v in head]
    vb, vh = stats.tvar(b) / len(b), stats.tvar(h) / len(h)
    df = (vb + vh) ** 2 / (vb**2 / (len(b) - 1) + vh**2 / (len(h) - 1))
    half = stats.t.ppf(1 - alpha, df) * math.sqrt(vb + vh)
    diff = sum(h) / len(h) - sum(b) / len(b)
    return math.expm1(diff - half) * 100, math.expm1(diff + half) * 100


@pytest.mark.slow
def test_a_run_that_needs_three_rounds_takes_them_and_stops_decided(tmp_path: Path) -> None:
    repo, counter = _slower_head(tmp_path, ROUNDS_CONFIG)
    out = tmp_path / "out"
    proc = _run(repo, out, counter)
    assert proc.returncode == 1, proc.stderr  # a regression
    report = json.loads((out / "report.json").read_text())
    assert (report["rounds"], report["rounds_stopped"], report["looks"]) == (3, "decided", 4), proc.stderr
    assert "confirmation round 2 of at most 4" in proc.stderr and "confirmation round 3 of at most 4" in proc.stderr
    assert "confirmation round 4" not in proc.stderr
    (batch,) = report["batch_sizes"]
    assert batch["verdict"] == "regression" and batch["look"] == 3
    assert [a["repeats"] for a in batch["arms"]] == [6, 6]
    # the bounds again from the processes' own figures, and at the first two rounds' processes alone
    each = 0.01 / (4 * METRICS_PER_LOOK * 1)  # split over the 4 rounds it might have taken, not the 3 it took
    assert batch["alpha_per_look"] == pytest.approx(each)
    figures = {arm: [json.loads((out / "runs" / f"{arm}-{r}.json").read_text())["runs"][0]["gpu_ms_per_step"]
                     for r in range(6)] for arm in ("base", "head")}
    low, high = _log_bounds(figures["base"], figures["head"], each)
    assert batch["gpu_ms_bounds"]["ci_low_pct"] == pytest.approx(low, rel=1e-6) and low > 20
    assert batch["gpu_ms_bounds"]["ci_high_pct"] == pytest.approx(high, rel=1e-6)
    for processes in (2, 4):
        low, high = _log_bounds(figures["base"][:processes], figures["head"][:processes], each)
        assert low < 20 < high  # undecided then: the round after it was needed
    # the reference process, then 2 arms x 2 repeats x 3 rounds
    assert counter.read_text() == "13"
    assert report["confirm_s"] > 0 and report["confirm_budget_s"] == 180
    comment = (out / "comment.md").read_text()
    assert "2 more in each of 2 confirmation rounds for batch size 1 (until every batch size was decided)" in comment


@pytest.mark.slow
def test_a_round_that_would_not_fit_the_budget_is_not_run(tmp_path: Path) -> None:
    """A budget under one round's processes: the first round stands, undecided, and says why."""
    repo, counter = _slower_head(tmp_path, ROUNDS_CONFIG + "confirm_budget_s = 0.5\n")
    out = tmp_path / "out"
    proc = _run(repo, out, counter)
    assert proc.returncode == 0, proc.stderr
    report = json.loads((out / "report.json").read_text())
    assert (report["rounds"], report["rounds_stopped"]) == (1, "budget"), proc.stderr
    assert report["verdict"] in ("at_threshold", "inconclusive")
    assert "confirm_s" not in report and report["confirm_budget_s"] == 0.5
    assert counter.read_text() == "5"  # the reference process and the first round's 4
    processes = [json.loads((out / "runs" / f"{arm}-{r}.json").read_text()) for arm in ("base", "head")
                 for r in range(2)]
    assert all(p["process_s"] * 4 > 0.5 for p in processes if p.get("process_s"))
    assert "(stopped at the time budget)" in (out / "comment.md").read_text()


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


def test_alpha_is_split_over_the_most_rounds_a_run_may_take() -> None:
    # 4 rounds x the metrics x 3 batch sizes (the mix counts as one)
    assert alpha_per_look(0.01, 4, 3) == pytest.approx(0.01 / (4 * METRICS_PER_LOOK * 3))
    from guard.config import parse_config
    config = parse_config({"measure": {"max_rounds": 3}})
    assert config.measure.looks == 3
    assert parse_config({"measure": {"max_rounds": 3, "confirm": False}}).measure.looks == 1
