"""The rule as one record (guard/config/_rule.py): what the user feels is held to what the runner
resolves in one place, where the rule is made from the config; a report read back states the
rule its run was made by; and an older report states the rule it was decided by, no more."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from guard.config import MeasureConfig, Rule, Threshold, Thresholds, parse_config
from guard.report import Report, read_report
from tests.conftest import commit_all
from tests.report_fixtures import committed, current_file
from tests.standin import StandIn, run_in_process
from tests.test_pipeline import CONFIG, make_repo

DOCS = Path(__file__).resolve().parents[1] / "docs"


@pytest.mark.parametrize(("measure", "calibrated", "gpu", "tok", "end"), [
    # the config's one threshold is tok/s's too, and end-to-end ms's where the config sets none
    (MeasureConfig(threshold_pct=2.0), None, Threshold(pct=2.0, source="configured"),
     Threshold(pct=2.0, source="configured"), Threshold(pct=2.0, source="configured")),
    (MeasureConfig(threshold_pct=2.0, end_to_end_threshold_pct=5.0), None, Threshold(pct=2.0, source="configured"),
     Threshold(pct=2.0, source="configured"), Threshold(pct=5.0, source="configured")),
    # a thresholds file replaces GPU ms's; what the user feels is held to the larger of the config's
    # threshold and what the file says the runner resolves: none written, the config's
    (MeasureConfig(threshold_pct=2.0), Thresholds(gpu_ms_pct=0.5), Threshold(pct=0.5, source="calibrated"),
     Threshold(pct=2.0, source="configured"), Threshold(pct=2.0, source="configured")),
    (MeasureConfig(threshold_pct=2.0), Thresholds(gpu_ms_pct=0.5, tok_per_s_pct=3.0, end_to_end_ms_pct=4.0),
     Threshold(pct=0.5, source="calibrated"), Threshold(pct=3.0, source="calibrated"),
     Threshold(pct=4.0, source="calibrated")),
    # a runner that resolves less than the config's threshold: the config's
    (MeasureConfig(threshold_pct=2.0), Thresholds(gpu_ms_pct=0.5, tok_per_s_pct=1.5, end_to_end_ms_pct=0.75),
     Threshold(pct=0.5, source="calibrated"), Threshold(pct=2.0, source="configured"),
     Threshold(pct=2.0, source="configured")),
    # end-to-end ms's own threshold in the config stands over the file's
    (MeasureConfig(threshold_pct=2.0, end_to_end_threshold_pct=5.0), Thresholds(gpu_ms_pct=0.5, end_to_end_ms_pct=9.0),
     Threshold(pct=0.5, source="calibrated"), Threshold(pct=2.0, source="configured"),
     Threshold(pct=5.0, source="configured")),
])
def test_what_the_user_feels_is_held_to_what_the_runner_resolves_where_the_rule_is_made(
    measure: MeasureConfig, calibrated: Thresholds | None, gpu: Threshold, tok: Threshold, end: Threshold,
) -> None:
    rule = Rule.of_config(measure, calibrated)
    assert (rule.gpu_ms, rule.tok_per_s, rule.end_to_end_ms) == (gpu, tok, end)


def test_a_report_read_back_states_the_rule_its_run_made_from_its_config(tmp_path: Path) -> None:
    """A run at a thresholds file that wrote GPU ms's threshold alone, at alpha 0.02, failing at
    the threshold: its report, read back (and checked), states that rule, tok/s and end-to-end ms
    held to the config's threshold, spent over the looks the run planned and split over its two
    batch sizes."""
    settings = '[measure]\nthresholds_file = "thr.toml"\nat_threshold = "fail"\nalpha = 0.02'
    config = CONFIG.format(method="none", install="", repeats=3).replace("[measure]", settings)
    repo = make_repo(tmp_path, config=config, files={"thr.toml": "[thresholds]\ngpu_ms_pct = 2.0\n"})
    (repo / "note.txt").write_text("no code change\n")
    commit_all(repo, "a change that cannot matter")
    standin = StandIn(step_ms=lambda p, size: 2.0 * size ** 0.5 * (1 + 0.003 * ((p.number * 7) % 5 - 2)))
    read = read_report(run_in_process(repo, tmp_path / "out", standin).out / "report.json")
    made = Rule.of_config(parse_config({"measure": {"at_threshold": "fail", "alpha": 0.02}}).measure,
                          Thresholds(gpu_ms_pct=2.0))
    assert read.rule == made.model_copy(update={"looks": read.rule.looks, "decided_sizes": 2})


def test_a_report_from_before_end_to_end_ms_was_decided_states_a_rule_that_does_not_decide_it() -> None:
    """Not GPU ms's threshold for it: no threshold, alpha split over the 2 metrics it decided."""
    rule = committed(DOCS / "examples" / "cpu-demo" / "report.json").rule
    assert rule.end_to_end_ms is None and list(rule.pcts()) == ["gpu_ms", "tok_per_s"]
    assert (rule.version, rule.metrics_per_look) == (1, 2)


@pytest.mark.parametrize("sources", [
    {"gpu_ms": "configured"},  # a metric's source left out
    {"gpu_ms": "gpu_ms_fallback", "tok_per_s": "configured", "end_to_end_ms": "configured"},  # GPU ms's held
])
def test_a_report_whose_threshold_sources_are_not_one_per_metric_is_not_read(sources: dict[str, str]) -> None:
    data = json.loads(current_file(DOCS / "examples" / "h200-demo-b31932f" / "report.json").read_text())
    Report.model_validate(data)  # as it is, it reads
    rule = data["rule"] | {metric: data["rule"][metric] | {"source": source} for metric, source in sources.items()
                           if data["rule"][metric] is not None}
    with pytest.raises(ValidationError, match="source|gpu_ms's threshold"):
        Report.model_validate(data | {"rule": rule})
