"""What the comment asks of its reader, made from the report's facts: a regression names the
command that measures the same two commits again; an undecided run says, right under its title,
the processes per arm that would decide it and how to get them; a pass asks nothing, and a
commit that is not a plain sha goes into no command."""

from __future__ import annotations

from pathlib import Path

from guard.report import render_comment, repeats_to_decide
from tests.report_fixtures import committed, remeasured

DOCS = Path(__file__).resolve().parents[1] / "docs"
DEMO = DOCS / "examples" / "cpu-demo" / "report.json"
# an A/A run on an H200 left inconclusive at 3 processes per arm; the same with the compile fill
AA_H200 = DOCS / "measurements" / "compile-cache-aa-h200" / "report.json"
AA_H200_FILLED = DOCS / "measurements" / "compile-cache-aa-h200" / "with-fill-54a677d" / "report.json"


def _todo(comment: str) -> list[str]:
    return [line for line in comment.splitlines() if line.startswith("**What to do:**")]


def _under_title(comment: str) -> str:
    """The line right under the title (the marker, the title, a blank line, then it)."""
    return comment.splitlines()[3]


def test_a_regression_says_how_to_measure_the_same_commits_again() -> None:
    report = committed(DEMO)
    assert report.verdict == "regression"
    base, head = report.arm(report.base).sha[:12], report.arm(report.head).sha[:12]
    (line,) = _todo(render_comment(report))
    assert line.endswith(f"`guard run --repo . --base {base} --head {head}`.")
    assert _under_title(render_comment(report)) == "### What happened"  # nothing between the title and it


def test_a_gain_asks_nothing_and_an_undecided_run_says_what_would_decide_it_under_its_title() -> None:
    report = committed(DEMO)
    faster = remeasured(report, 0.5)
    assert faster.verdict == "improvement" and _todo(render_comment(faster)) == []
    base, head = report.arm(report.base).sha[:12], report.arm(report.head).sha[:12]
    # at the CPU demo's spread and a 1% threshold: +1% leaves a batch size past 200 processes per
    # arm, +5% both within reach (32 and 12)
    for factor, within_reach in ((1.01, False), (1.05, True)):
        near = remeasured(report, factor)
        assert near.verdict in ("at_threshold", "inconclusive"), near.verdict
        comment = render_comment(near)
        assert _todo(comment) == []  # said once, under the title, not again at the end
        needed = [b.repeats_to_decide for b in near.decided() if b.undecided]
        assert (None not in needed) == within_reach, needed
        line = _under_title(comment)
        if within_reach:
            most = max(n for n in needed if n is not None)
            assert repeats_to_decide(near) == most
            assert line == (f"**Needs about {most} processes per arm to decide** (this run: 5): run it on a quieter "
                            f"runner, or comment `/guard run --repeats {most}` where the service runs, or run "
                            f"`guard run --repo . --base {base} --head {head} --repeats {most}`.")
        else:
            assert repeats_to_decide(near) is None
            assert line == ("**Needs more than 200 processes per arm to decide** (this run: 5) at this spread: run it "
                            "on a quieter runner.")


def test_committed_undecided_runs_name_the_processes_that_would_decide_them() -> None:
    """Two A/A runs on an H200, each inconclusive at 3 processes per arm: 35 would decide the
    first; the second needs 4 by its spread, and 5 is the fewest a run may have, so 5 is asked."""
    for path, asked in ((AA_H200, 35), (AA_H200_FILLED, 5)):
        report = committed(path)
        assert report.verdict == "inconclusive"
        assert [b.repeats_to_decide for b in report.decided()] == [35 if asked == 35 else 4]
        assert repeats_to_decide(report) == asked
        line = _under_title(render_comment(report))
        assert line.startswith(f"**Needs about {asked} processes per arm to decide** (this run: 3): ")
        assert f"`/guard run --repeats {asked}`" in line and line.endswith(f" --repeats {asked}`.")


def test_a_forged_commit_goes_into_no_command() -> None:
    report = committed(DEMO)
    arms = [a.model_copy(update={"sha": "abc`; rm -rf ~ #"}) if a.name == report.head else a for a in report.arms]
    forged = report.model_copy(update={"arms": arms})
    assert _todo(render_comment(forged)) == []
    undecided = remeasured(report, 1.05).model_copy(update={"arms": arms})
    line = _under_title(render_comment(undecided))
    assert "rm -rf" not in line and "guard run --repo" not in line and "`/guard run --repeats " in line
