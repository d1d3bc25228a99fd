"""What a report sets on the pull request: a slowdown at the threshold is never green."""

from __future__ import annotations

import pytest

from guard._errors import ConfigError
from guard.cli import GATE_EXIT
from guard.config import GuardConfig
from guard.publish import status_state
from guard.report import gate
from guard.service._post import _CONCLUSION
from tests.report_fixtures import committed, remeasured
from tests.test_comment_shape import H200_DEMO


@pytest.mark.parametrize("setting, expected, state, conclusion, code", [
    ("neutral", "neutral", "pending", "neutral", 0),
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
    report = report.model_copy(update={"at_threshold_status": config.measure.at_threshold})
    assert gate(report) == expected
    assert status_state(gate(report)) == state and _CONCLUSION[gate(report)] == conclusion
    assert GATE_EXIT[gate(report)] == code
    # the setting is kept in the report only where it is not the default
    assert ("at_threshold_status" in report.model_dump_json()) == (setting == "fail")


def test_other_verdicts_keep_their_gate_whatever_the_setting() -> None:
    demo = committed(H200_DEMO / "report.json")
    for setting in ("neutral", "fail"):
        report = demo.model_copy(update={"at_threshold_status": setting})
        assert report.verdict == "regression" and gate(report) == "failure"
        passed = remeasured(demo, 1.0).model_copy(update={"at_threshold_status": setting})
        assert passed.verdict == "pass" and gate(passed) == "success"


def test_a_setting_other_than_neutral_or_fail_is_refused() -> None:
    with pytest.raises((ConfigError, ValueError)):
        GuardConfig.model_validate({"measure": {"at_threshold": "green"}})


@pytest.mark.parametrize("setting", ["neutral", "fail"])
def test_an_inconclusive_run_is_never_green(setting: str) -> None:
    """Nothing shown and nothing ruled out: a neutral check and a pending status, whatever
    measure.at_threshold says (it is about a slowdown shown), and the title says it is undecided."""
    from guard.report import render_comment

    report = remeasured(committed(H200_DEMO / "report.json"), 1.0, jitter=0.05)
    assert report.verdict == "inconclusive"
    report = report.model_copy(update={"at_threshold_status": setting})
    assert gate(report) == "neutral" and status_state("neutral") == "pending" and _CONCLUSION["neutral"] == "neutral"
    assert GATE_EXIT["neutral"] == 0
    assert "inconclusive" in render_comment(report).split("\n", 3)[1].lower()
