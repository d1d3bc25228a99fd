"""Decision rule 3: slow processes of base and head are set aside before deciding, and measured
again in their place after the first round; a report read back sets the same aside again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from guard.cli import main
from guard.measure import SET_ASIDE_SHARE, set_aside
from guard.report import SCHEMA_VERSION
from tests.conftest import commit_all
from tests.standin import Run, StandIn, run_in_process
from tests.test_pipeline import CONFIG, make_repo
from tests.test_rounds import _log_bounds

# an A/A at 5 processes per arm, batch size 1, steps within 0.1% of each other, one round
AA_CONFIG = CONFIG.format(method="none", install="", repeats=5).replace("[1, 2]", "[1]").replace(
    "[measure]", "[measure]\nthreshold_pct = 1.0\nconfirm = false")
SPREAD = [1.0, 1.0006, 0.9995, 1.0003, 0.9998, 1.0001, 0.9997, 1.0004]  # by repeat: the noise of a quiet GPU


def test_an_arm_keeps_its_slow_processes_where_more_than_a_third_are_slow() -> None:
    quiet = [10.0, 10.01, 9.99, 10.005, 9.995]
    one = quiet[:4] + [10.5]  # the 5th, 5% slow: set aside
    assert set_aside({"base": quiet, "head": one}, slower_is_higher=True).keys() == {"head"}
    (position, off_pct), = set_aside({"base": quiet, "head": one}, slower_is_higher=True)["head"]
    assert position == 5 and off_pct == pytest.approx(5.0, abs=0.1)
    # two of five slow is more than a third: that slowness is the arm's, and it keeps them
    two = quiet[:3] + [10.5, 10.6]
    assert 2 > SET_ASIDE_SHARE * 5 and set_aside({"base": quiet, "head": two}, slower_is_higher=True) == {}
    # on the fast side nothing is set aside: interference adds time
    assert set_aside({"base": quiet, "head": quiet[:4] + [9.5]}, slower_is_higher=True) == {}


def _aa_with_one_slow(tmp_path: Path, factor: float) -> tuple[StandIn, Run]:
    repo = make_repo(tmp_path, config=AA_CONFIG)
    (repo / "note.txt").write_text("no code change\n")
    commit_all(repo, "a change that cannot matter")
    # the head's 3rd process (repeat index 2) runs `factor` times as slow; every other is quiet
    standin = StandIn(step_ms=lambda p, _bs: SPREAD[p.repeat % len(SPREAD)]
                      * (factor if (p.arm, p.repeat) == ("head", 2) else 1.0))
    return standin, run_in_process(repo, tmp_path / "out", standin)


def test_a_slow_process_is_set_aside_measured_again_and_the_aa_passes(tmp_path: Path) -> None:
    standin, run = _aa_with_one_slow(tmp_path, 1.05)
    report = run.report
    (batch,) = report.batch_sizes
    assert report.verdict == "pass" and report.schema_version == SCHEMA_VERSION, run.text
    assert [(s.arm, s.repeat, s.metric) for s in batch.set_aside] == [("head", 3, "gpu_ms")]
    # one more process of each arm, numbered after the first round's, in the pattern it left off
    measured = [(p.arm, p.repeat) for p in standin.asked if p.mode == "measure"]
    assert measured[10:] == [("head", 5), ("base", 5)] and len(measured) == 12
    assert "slow processes set aside at batch size 1: 1 more per arm of base and head" in run.text
    # the bounds are Welch's on the 6 base and the 5 head processes that are not slow
    figures = {arm: [run.result(arm, r)["runs"][0]["gpu_ms_per_step"] for r in range(6)] for arm in ("base", "head")}
    kept_head = [v for r, v in enumerate(figures["head"]) if r != 2]
    low, high = _log_bounds(figures["base"], kept_head, batch.alpha_per_look)
    assert batch.gpu_ms_bounds is not None and batch.alpha_per_look is not None
    assert batch.gpu_ms_bounds.ci_low_pct == pytest.approx(low, rel=1e-6)
    assert batch.gpu_ms_bounds.ci_high_pct == pytest.approx(high, rel=1e-6)
    # with the slow one the interval would hold T: the set-aside is what decides this pass
    assert _log_bounds(figures["base"], figures["head"], batch.alpha_per_look)[1] > 1.0 > high


def test_a_report_that_hides_a_set_aside_process_is_refused(tmp_path: Path) -> None:
    _, run = _aa_with_one_slow(tmp_path, 1.05)
    path = run.out / "report.json"
    assert main(["summary", "--report", str(path)]) == 0
    data = json.loads(path.read_text())
    data["batch_sizes"][0]["set_aside"] = []
    (tmp_path / "forged.json").write_text(json.dumps(data))
    assert main(["summary", "--report", str(tmp_path / "forged.json")]) == 2
