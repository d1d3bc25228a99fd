"""`guard run --repeats N --batch-sizes 1,2 --steps N --threshold-pct X`: values from the
command line in place of the base's config, kept in the report, said in the comment, and
checked when the report is read back."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from guard._errors import ConfigError
from guard.config import ConfigOverrides, GuardConfig, apply_overrides, parse_config
from guard.report import UnfoundedReport, read_report, render_comment
from tests.conftest import git
from tests.test_pipeline import guard_run, make_repo
from tests.report_fixtures import committed

CALIBRATED = """
[workload]
entry = "wl.py:make"
batch_sizes = [1, 2]
steps = 12
warmup_steps = 2
# one timed pass, no timed warmup: what this test checks is not the figures' spread
tok_per_s_min_s = 0
warmup_max_s = 0
[build]
method = "none"
install = ""
[measure]
repeats = 3
allow_few_repeats = true  # the CPU tests' few processes
max_rounds = 2  # the CPU tests' time: one confirmation round at most
thresholds_file = "guard-thresholds.toml"
"""


def test_overrides_replace_the_configs_values_and_a_calibrated_threshold() -> None:
    measure = {"thresholds_file": "guard-thresholds.toml", "repeats": 7, "allow_few_repeats": True}
    config = parse_config({"measure": measure}, source="t")
    tried = apply_overrides(config, ConfigOverrides(repeats=2, batch_sizes=[1, 4], steps=16, threshold_pct=2.5))
    assert (tried.measure.repeats, tried.workload.batch_sizes, tried.workload.steps) == (2, [1, 4], 16)
    assert tried.measure.threshold_pct == 2.5 and tried.measure.thresholds_file is None
    # what was not given stays the config's
    assert apply_overrides(config, ConfigOverrides(steps=3)).measure.thresholds_file == "guard-thresholds.toml"
    assert apply_overrides(config, ConfigOverrides()) == config


@pytest.mark.parametrize(("overrides", "message"), [
    (ConfigOverrides(repeats=1), "--repeats 1: input should be greater than or equal to 2"),
    (ConfigOverrides(repeats=201), "--repeats 201: input should be less than or equal to 200"),
    (ConfigOverrides(batch_sizes=[1, 1]), "--batch-sizes 1,1: batch sizes must not repeat"),
    (ConfigOverrides(batch_sizes=[5000]), "--batch-sizes 5000: every one of the batch sizes must be 4096 or less"),
    (ConfigOverrides(steps=100_001), "--steps 100001: input should be less than or equal to 100000"),
    (ConfigOverrides(repeats=4), "--repeats 4 is under 5 processes per arm, too few for the decision rule to decide "
     "a change near the threshold: add --quick for a quick try (the comment then says the verdict holds for these "
     "settings alone)"),
])
def test_an_override_out_of_the_configs_range_names_its_flag(overrides: ConfigOverrides, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        apply_overrides(GuardConfig(), overrides)
    assert caught.value.message == message


@pytest.mark.parametrize(("flag", "value", "message"), [
    ("--batch-sizes", "1,x", "argument --batch-sizes: expected batch sizes as whole numbers of 1 or more"),
    ("--batch-sizes", "0", "argument --batch-sizes: expected batch sizes as whole numbers of 1 or more"),
    ("--threshold-pct", "100", "argument --threshold-pct: expected a percentage above 0 and below 100"),
    ("--threshold-pct", "nan", "argument --threshold-pct: expected a percentage above 0 and below 100"),
    ("--repeats", "-3", "argument --repeats: expected a whole number of 1 or more"),
    ("--steps", "many", "argument --steps: expected a whole number of 1 or more"),
])
def test_a_bad_flag_is_one_message_before_anything_runs(tmp_path: Path, flag: str, value: str, message: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "guard", "run", "--repo", str(tmp_path), "--out",
                           str(tmp_path / "out"), flag, value], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and message in proc.stderr
    assert proc.stderr.count("error:") == 1 and "Traceback" not in proc.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("value", ["100", "inf", "nan", "-1", "x"])
def test_calibrate_reads_a_threshold_as_run_does(tmp_path: Path, value: str) -> None:
    """One parser for a percentage: `guard calibrate --threshold-pct` gives run's message."""
    proc = subprocess.run([sys.executable, "-m", "guard", "calibrate", "--repo", str(tmp_path), "--out",
                           str(tmp_path / "t.toml"), "--threshold-pct", value], capture_output=True, text=True,
                          timeout=60)
    expected = f"argument --threshold-pct: expected a percentage above 0 and below 100, e.g. 0.5; got {value!r}"
    assert proc.returncode == 2 and expected in proc.stderr
    assert proc.stderr.count("error:") == 1 and "Traceback" not in proc.stderr
    assert not (tmp_path / "t.toml").exists()


def test_quick_allows_few_repeats_with_small_defaults_and_the_comment_says_so() -> None:
    from guard.config._overrides import QUICK_REPEATS, QUICK_STEPS
    from guard.report._override_note import override_note

    quick = apply_overrides(GuardConfig(), ConfigOverrides.quick())
    assert (quick.measure.repeats, quick.workload.steps, quick.measure.allow_few_repeats) == (
        QUICK_REPEATS, QUICK_STEPS, True)
    assert quick.workload.batch_sizes == GuardConfig().workload.batch_sizes  # the config's, unless given
    given = apply_overrides(GuardConfig(), ConfigOverrides.quick(repeats=3, steps=8, batch_sizes=[1]))
    assert (given.measure.repeats, given.workload.steps, given.workload.batch_sizes) == (3, 8, [1])
    report = committed(Path(__file__).resolve().parents[1] / "docs" / "examples" / "h200-demo" / "report.json")
    note = override_note(report.model_copy(update={"overrides": ConfigOverrides.quick()}))
    assert note == ("A quick try (--quick), set on the command line in place of the base's config: 2 processes per "
                    "arm, 32 timed steps. The verdict holds for these settings, not for the configured measurement.")


def test_an_override_out_of_range_stops_the_run_before_a_build(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, repeats=3)
    git(repo, "commit", "--quiet", "--allow-empty", "-m", "head")
    proc = guard_run(repo, tmp_path / "out", "--repeats", "1")
    assert proc.returncode == 2, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last == "guard: error: --repeats 1: input should be greater than or equal to 2"
    assert not (tmp_path / "out" / "report.json").exists()


@pytest.mark.slow
def test_a_quick_try_is_marked_in_the_report_and_said_in_the_comment(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, config=CALIBRATED, files={
        "guard-thresholds.toml": "[thresholds]\ngpu_ms_pct = 50.0\ntok_per_s_pct = 50.0\n"})
    git(repo, "commit", "--quiet", "--allow-empty", "-m", "head")
    out = tmp_path / "out"
    proc = guard_run(repo, out, "--repeats", "2", "--batch-sizes", "2", "--steps", "5", "--threshold-pct", "4")
    assert proc.returncode in (0, 1, 4), proc.stderr  # a verdict, any
    data = json.loads((out / "report.json").read_text())
    assert data["overrides"] == {"repeats": 2, "batch_sizes": [2], "steps": 5, "threshold_pct": 4.0}
    # the run used them: not the config's 3 repeats, batch sizes [1, 2], 12 steps or calibrated 50%
    assert (data["workload"]["repeats"], data["workload"]["batch_sizes"], data["workload"]["steps"]) == (2, [2], 5)
    assert data["rule"]["gpu_ms"]["pct"] == data["rule"]["tok_per_s"]["pct"] == 4.0
    assert [b["batch_size"] for b in data["batch_sizes"]] == [2]
    # 2 processes per round, up to the config's measure.max_rounds (2) rounds
    assert all(len(a["gpu_ms_per_step"]["values"]) in (2, 4) for a in data["batch_sizes"][0]["arms"])
    results = [p for p in (out / "runs").glob("*.json") if re.fullmatch(r"(base|head)-\d+\.json", p.name)]
    assert results and all([run["steps"] for run in json.loads(p.read_text())["runs"]] == [5] for p in results)
    comment = (out / "comment.md").read_text()
    assert ("Set on the command line in place of the base's config: 2 processes per arm, 5 timed steps, "
            "batch size 2, a threshold of 4% for both metrics.") in comment
    assert "overridden on the command line" in proc.stderr

    report = read_report(out / "report.json")  # holds up when read back
    assert report.overrides is not None and report.overrides.repeats == 2
    # a report that says it was overridden to values it did not run with is refused
    forged = dict(data, overrides={"repeats": 9, "threshold_pct": 0.5})
    path = tmp_path / "forged.json"
    path.write_text(json.dumps(forged))
    with pytest.raises(UnfoundedReport, match=r"overrides\.repeats is 9, where 2 is due; "
                                              r"overrides\.threshold_pct is 0\.5, where 4\.0 is due"):
        read_report(path)


def test_the_comment_names_only_the_overrides_given() -> None:
    example = Path(__file__).resolve().parents[1] / "docs" / "examples" / "h200-demo" / "report.json"
    report = committed(example)
    assert report.overrides is None and "Set on the command line" not in render_comment(report)
    given = report.model_copy(update={"overrides": ConfigOverrides(threshold_pct=report.rule.gpu_ms.pct)})
    assert (f"Set on the command line in place of the base's config: a threshold of {report.rule.gpu_ms.pct:g}% for "
            "both metrics. The verdict holds for these settings") in render_comment(given)
