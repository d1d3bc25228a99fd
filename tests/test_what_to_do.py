"""The comment's "What to do" line, made from the report's facts: a regression names the command
that measures the same two commits again, an undecided run the processes that would decide it,
a pass asks nothing, and a commit that is not a plain sha goes into no command."""

from __future__ import annotations

from pathlib import Path

from guard.report import render_comment
from tests.report_fixtures import committed, remeasured

DEMO = Path(__file__).resolve().parents[1] / "docs" / "examples" / "cpu-demo" / "report.json"


def _todo(comment: str) -> list[str]:
    return [line for line in comment.splitlines() if line.startswith("**What to do:**")]


def test_a_regression_says_how_to_measure_the_same_commits_again() -> None:
    report = committed(DEMO)
    assert report.verdict == "regression"
    base, head = report.arm(report.base).sha[:12], report.arm(report.head).sha[:12]
    (line,) = _todo(render_comment(report))
    assert line.endswith(f"`guard run --repo . --base {base} --head {head}`.")


def test_a_gain_asks_nothing_and_an_undecided_run_says_what_would_decide_it() -> None:
    report = committed(DEMO)
    faster = remeasured(report, 0.5)
    assert faster.verdict == "improvement" and _todo(render_comment(faster)) == []
    # at the CPU demo's spread and a 1% threshold: +1% leaves a batch size past 200 processes per
    # arm, +5% both within reach (32 and 12)
    for factor, within_reach in ((1.01, False), (1.05, True)):
        near = remeasured(report, factor)
        assert near.verdict in ("at_threshold", "inconclusive"), near.verdict
        (line,) = _todo(render_comment(near))
        needed = [b.repeats_to_decide for b in near.decided() if b.undecided]
        assert (None not in needed) == within_reach, needed
        if within_reach:
            assert f"about {max(needed)} processes per arm decide it" in line and f"--repeats {max(needed)}`" in line
        else:
            assert "over 200 processes per arm" in line and "quieter runner" in line


def test_a_forged_commit_goes_into_no_command() -> None:
    report = committed(DEMO)
    arms = [a.model_copy(update={"sha": "abc`; rm -rf ~ #"}) if a.name == report.head else a for a in report.arms]
    assert _todo(render_comment(report.model_copy(update={"arms": arms}))) == []
