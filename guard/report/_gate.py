"""What a report sets on the pull request: a success, a failure, an error, or neutral for a
slowdown shown at the threshold (`measure.at_threshold`), never a green one."""

from __future__ import annotations

from typing import Literal

from guard.report._schema import Report

Gate = Literal["success", "neutral", "failure", "error"]

_GATE: dict[str, Gate] = {
    "pass": "success",
    "improvement": "success",
    # a slowdown is shown (its lower bound is above 0), its size against the threshold is not:
    # not green; neutral, or failing where the config says so
    "at_threshold": "neutral",
    # no slowdown shown, and none ruled out: the comment says so, and what would decide it
    "inconclusive": "success",
    "regression": "failure",
    "invalid": "error",
}


def gate(report: Report) -> Gate:
    found = _GATE[report.verdict]
    return "failure" if found == "neutral" and report.at_threshold_status == "fail" else found
