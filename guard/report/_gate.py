"""What a report sets on the pull request: a success, a failure, an error, or undecided for a
run that decided nothing: a slowdown shown at the threshold (`measure.at_threshold`), or nothing
shown and nothing ruled out. An undecided run is never green: it holds the merge until more
processes or a quieter runner decide it."""

from __future__ import annotations

from typing import Literal

from guard.report._schema import Report

Gate = Literal["success", "undecided", "failure", "error"]

_GATE: dict[str, Gate] = {
    "pass": "success",
    "improvement": "success",
    # a slowdown is shown (its lower bound is above 0), its size against the threshold is not:
    # undecided, or failing where the config says so
    "at_threshold": "undecided",
    # no slowdown shown, and none ruled out: undecided too; the comment says what would decide it
    "inconclusive": "undecided",
    "regression": "failure",
    "invalid": "error",
}


def gate(report: Report) -> Gate:
    if report.verdict == "at_threshold" and report.rule.at_threshold == "fail":
        return "failure"
    return _GATE[report.verdict]
