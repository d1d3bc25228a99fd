"""`guard record`: one commit built and measured alone, as a run measures each arm, its
figures written as record.json, Bencher Metric Format and pyperf's JSON."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pyperf
import pytest

from guard.cli import main
from guard.pipeline import RECORDED_ARM, record_commit
from guard.record import Record
from tests.conftest import commit_all, git
from tests.standin import Process, StandIn
from tests.test_pipeline import make_repo


def _ms(process: Process, batch_size: int) -> float:
    """Each process its own step time: 2 ms per step at batch size 1, 3 at 2, 1% more per repeat."""
    return (1.0 + batch_size) * (1 + 0.01 * process.repeat)


def test_a_record_measures_the_commit_alone_with_the_runs_settings_and_writes_its_figures(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, repeats=3)
    sha = git(repo, "rev-parse", "HEAD")
    standin, lines = StandIn(step_ms=_ms), []
    out = tmp_path / "out"
    record = record_commit(repo, "HEAD", None, out, progress=lines.append, harness=standin)

    # one arm, its `measure.repeats` processes, each given the config's workload as a run gives it
    measured = [p for p in standin.asked if p.mode == "measure"]
    assert {p.arm for p in standin.asked} == {RECORDED_ARM} and [p.repeat for p in measured] == [0, 1, 2]
    assert all((p.spec["batch_sizes"], p.spec["steps"], p.spec["warmup_steps"]) == ([1, 2], 12, 2) for p in measured)
    assert record.arm.sha == sha and record.arm.status == "ok" and record.arm.repeats == 3
    assert f"config: guard.toml of the commit {sha[:12]}" in lines

    # the figures as written, each the stand-in's per-process figure
    expected = {size: [(1.0 + size) * (1 + 0.01 * r) for r in range(3)] for size in (1, 2)}
    assert Record.model_validate_json((out / "record.json").read_text()) == record
    assert [b.batch_size for b in record.batch_sizes] == [1, 2]
    for batch in record.batch_sizes:
        assert batch.stats.gpu_ms_per_step.values == pytest.approx(expected[batch.batch_size])
    bmf = json.loads((out / "bmf.json").read_text())
    assert set(bmf) == {"decode/batch-size-1", "decode/batch-size-2"}
    for size, values in expected.items():
        step = bmf[f"decode/batch-size-{size}"]["cpu-ms-per-step"]
        assert step == pytest.approx({"value": statistics.median(values), "lower_value": min(values),
                                      "upper_value": max(values)})
        tok = bmf[f"decode/batch-size-{size}"]["tok-per-s"]
        assert tok["value"] == pytest.approx(statistics.median(size * 1000 / v for v in values))
    # pyperf's own reader takes the file: a run per process, its value in seconds
    suite = pyperf.BenchmarkSuite.load(str(out / "pyperf.json"))
    bench = suite.get_benchmark("decode/batch-size-2/cpu-ms-per-step")
    assert bench.get_values() == pytest.approx(tuple(v / 1000 for v in expected[2]))
    assert suite.get_metadata()["commit_id"] == sha


def test_the_config_is_the_commits_own(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, repeats=2)
    config = (repo / "guard.toml").read_text()
    (repo / "guard.toml").write_text(config.replace("steps = 12", "steps = 20"))
    commit_all(repo, "more timed steps")
    standin = StandIn()
    record = record_commit(repo, "feature", None, tmp_path / "out", harness=standin)
    assert record.workload.steps == 20 and {p.spec["steps"] for p in standin.asked if p.mode == "measure"} == {20}
    main_sha = git(repo, "rev-parse", "main")
    older = record_commit(repo, "main", None, tmp_path / "out-main", harness=StandIn())
    assert older.arm.sha == main_sha and older.workload.steps == 12


def test_a_commit_that_does_not_build_is_recorded_without_figures_and_exits_3(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = make_repo(tmp_path, method="venv", install="sh build.sh", repeats=2,
                     files={"build.sh": "echo compiler exploded: marker-5521 >&2\nexit 4\n"})
    out = tmp_path / "out"
    out.mkdir()
    (out / "bmf.json").write_text("{}")  # an earlier record's figures: they must not stand beside this one
    assert main(["record", "--repo", str(repo), "--out", str(out), "--cache-dir", str(tmp_path / "cache")]) == 3
    record = Record.model_validate_json((out / "record.json").read_text())
    assert record.arm.status == "build_failed" and "marker-5521" in record.arm.log_tail
    assert record.batch_sizes == [] and not record.measured
    assert not (out / "bmf.json").exists() and not (out / "pyperf.json").exists()
    err = capsys.readouterr().err
    assert "was not measured (build failed: " in err and "Traceback" not in err


def test_a_bad_commit_is_one_message_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = make_repo(tmp_path)
    assert main(["record", "--repo", str(repo), "--commit", "no-such-ref", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("guard: error: ") and "no-such-ref" in err and err.count("\n") == 1
