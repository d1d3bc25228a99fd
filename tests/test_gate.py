"""What a report sets on the pull request: an undecided run (a slowdown at the threshold, or
nothing shown and nothing ruled out) is never green: exit 4, a pending status, a Check Run that
holds a required check; measure.at_threshold = "fail" makes at_threshold a regression's failure."""

from __future__ import annotations

import json

import pytest

from guard._errors import ConfigError
from guard._errors import EXIT_UNDECIDED
from guard.cli import GATE_EXIT
from guard.config import GuardConfig
from guard.publish import status_state
from guard.report import gate
from guard.service._post import conclusion as check_conclusion
from tests.report_fixtures import committed, remeasured, ruled
from tests.test_comment_shape import H200_DEMO


@pytest.mark.parametrize("setting, expected, state, conclusion, code", [
    ("neutral", "undecided", "pending", "action_required", 4),
    ("fail", "failure", "failure", "failure", 1),
])
def test_at_threshold_is_neutral_or_failing_as_configured(setting: str, expected: str, state: str, conclusion: str,
                                                          code: int) -> None:
    config = GuardConfig.model_validate({"measure": {"at_threshold": setting}})
    # +1% against a 1% threshold, head's repeats moved by 0.3%: a slowdown shown, not told from 1%
    report = remeasured(committed(H200_DEMO / "report.json"), 1.01, jitter=0.003)
    assert report.verdict == "at_threshold"
    low = min(b.gpu_ms_bounds.ci_low_pct for b in report.batch_sizes  # type: ignore[union-attr]
              if b.verdict == "at_threshold")
    assert low > 0
    report = ruled(report, at_threshold=config.measure.at_threshold)
    assert gate(report) == expected
    assert status_state(gate(report)) == state and check_conclusion(gate(report), "action_required") == conclusion
    assert GATE_EXIT[gate(report)] == code
    # the setting is kept in the report, with the rest of the rule
    assert json.loads(report.model_dump_json())["rule"]["at_threshold"] == setting


def test_other_verdicts_keep_their_gate_whatever_the_setting() -> None:
    demo = committed(H200_DEMO / "report.json")
    for setting in ("neutral", "fail"):
        report = ruled(demo, at_threshold=setting)
        assert report.verdict == "regression" and gate(report) == "failure"
        passed = ruled(remeasured(demo, 1.0), at_threshold=setting)
        assert passed.verdict == "pass" and gate(passed) == "success"


def test_a_setting_other_than_neutral_or_fail_is_refused() -> None:
    with pytest.raises((ConfigError, ValueError)):
        GuardConfig.model_validate({"measure": {"at_threshold": "green"}})


@pytest.mark.parametrize("setting", ["neutral", "fail"])
def test_an_inconclusive_run_is_never_green(setting: str) -> None:
    """Nothing shown and nothing ruled out: undecided, exit 4, a pending status and a Check Run
    that is never neutral, whatever measure.at_threshold says (it is about a slowdown shown),
    and the title says it is undecided."""
    from guard.report import render_comment

    report = remeasured(committed(H200_DEMO / "report.json"), 1.0, jitter=0.05)
    assert report.verdict == "inconclusive"
    report = ruled(report, at_threshold=setting)
    assert gate(report) == "undecided" and status_state("undecided") == "pending"
    assert GATE_EXIT["undecided"] == EXIT_UNDECIDED == 4
    assert "inconclusive" in render_comment(report).split("\n", 3)[1].lower()


def test_exit_codes_are_distinct_per_gate_and_none_is_the_guards_own_error() -> None:
    """0 pass, 1 regression, 3 invalid, 4 undecided; 2 is left to the guard's own errors."""
    assert GATE_EXIT == {"success": 0, "failure": 1, "error": 3, "undecided": 4}


@pytest.mark.parametrize("undecided", ["action_required", "failure"])
def test_an_undecided_check_run_concludes_as_the_service_is_set_never_neutral(undecided: str) -> None:
    assert check_conclusion("undecided", undecided) == undecided  # type: ignore[arg-type]
    assert {check_conclusion(g, undecided) for g in ("success", "failure", "error")} == {  # type: ignore[arg-type]
        "success", "failure"}
