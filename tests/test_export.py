"""`guard export`, run as a real process on committed H200 reports: pyperf's own reader loads
and compares what it writes; the BMF and github-action-benchmark files hold the report's
figures in the shapes those tools read."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

import pyperf
import pytest

from guard.report import Report
from tests.report_fixtures import committed, explained, remeasured, current_file

REPO_ROOT = Path(__file__).resolve().parents[1]
RICH = current_file(REPO_ROOT / "docs" / "examples" / "h200-demo-b31932f" / "report.json")  # no host times
HOST_TIMED = current_file(REPO_ROOT / "docs" / "validation" / "h200-engines" / "pairs" / "compiled-graph-break"
                          / "report.json")


def _export(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "guard", "export", *args], capture_output=True, text=True,
                          timeout=120, cwd=REPO_ROOT)


def _arm(report: Report, batch_size: int, arm: str):  # noqa: ANN202
    batch = next(b for b in report.batch_sizes if b.batch_size == batch_size)
    return next(a for a in batch.arms if a.arm == arm)


@pytest.mark.slow
def test_pyperf_loads_the_export_and_compares_base_with_head(tmp_path: Path) -> None:
    report = committed(RICH)
    files = {}
    for arm in ("base", "head"):
        files[arm] = tmp_path / f"{arm}.json"
        proc = _export("--format", "pyperf", "--arm", arm, "--out", str(files[arm]), str(RICH))
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout == ""  # written to the file, not printed

    suite = pyperf.BenchmarkSuite.load(str(files["head"]))
    assert suite.get_benchmark_names() == ["decode/batch-size-1/gpu-ms-per-step", "decode/batch-size-2/gpu-ms-per-step"]
    for batch_size in (1, 2):
        bench = suite.get_benchmark(f"decode/batch-size-{batch_size}/gpu-ms-per-step")
        stats = _arm(report, batch_size, report.head).gpu_ms_per_step
        assert bench.get_unit() == "second" and bench.get_nrun() == len(stats.values)
        assert bench.get_values() == pytest.approx([v / 1000 for v in stats.values], rel=1e-12)
        assert bench.median() == pytest.approx(stats.median / 1000, rel=1e-12)
    assert suite.get_metadata()["commit_id"] == report.arm(report.head).sha
    assert suite.get_metadata()["gpu"] == "NVIDIA H200"

    compare = subprocess.run([sys.executable, "-m", "pyperf", "compare_to", str(files["base"]), str(files["head"])],
                             capture_output=True, text=True, timeout=120)
    assert compare.returncode == 0, compare.stderr
    for batch_size in (1, 2):  # pyperf compares means: worked out here from the report's values
        ratio = (statistics.fmean(_arm(report, batch_size, report.head).gpu_ms_per_step.values)
                 / statistics.fmean(_arm(report, batch_size, report.base).gpu_ms_per_step.values))
        assert f"decode/batch-size-{batch_size}/gpu-ms-per-step:" in compare.stdout
        assert f"{ratio:.2f}x slower" in compare.stdout


def test_pyperf_export_carries_host_time_where_the_report_has_it(tmp_path: Path) -> None:
    out = tmp_path / "head.json"
    assert _export("--format", "pyperf", "--out", str(out), str(HOST_TIMED)).returncode == 0
    names = pyperf.BenchmarkSuite.load(str(out)).get_benchmark_names()
    assert "decode/batch-size-1/host-ms-per-step" in names and "decode/batch-size-1/gpu-ms-per-step" in names
    assert not any("tok-per-s" in name for name in names)  # pyperf's values are times, sizes or counts


@pytest.mark.parametrize("path", [RICH, HOST_TIMED])
def test_bmf_holds_each_batch_sizes_measures_with_their_bounds(path: Path) -> None:
    report = committed(path)
    proc = _export("--format", "bmf", str(path))
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert list(data) == [f"decode/batch-size-{b.batch_size}" for b in report.batch_sizes]
    for batch in report.batch_sizes:
        head = _arm(report, batch.batch_size, report.head)
        measures = data[f"decode/batch-size-{batch.batch_size}"]
        expected = {"gpu-ms-per-step": head.gpu_ms_per_step, "tok-per-s": head.tok_per_s}
        if head.host_ms_per_step is not None:
            expected["host-ms-per-step"] = head.host_ms_per_step
        assert set(measures) == set(expected)
        for slug, stats in expected.items():
            metric = measures[slug]
            # BMF: a number `value`, and optional `lower_value` and `upper_value`, nothing else
            assert set(metric) == {"value", "lower_value", "upper_value"}
            assert all(isinstance(v, float) for v in metric.values())
            assert (metric["lower_value"], metric["value"], metric["upper_value"]) == (
                stats.min, stats.median, stats.max)
            assert metric["lower_value"] <= metric["value"] <= metric["upper_value"]


def test_github_action_benchmark_gets_the_smaller_is_better_step_times() -> None:
    report = committed(HOST_TIMED)
    proc = _export("--format", "github-action-benchmark", "--arm", "base", str(HOST_TIMED))
    assert proc.returncode == 0, proc.stderr
    entries = json.loads(proc.stdout)
    assert isinstance(entries, list)
    names = [e["name"] for e in entries]
    assert len(set(names)) == len(names) == 2 * len(report.batch_sizes)  # GPU and host ms per batch size
    for entry in entries:
        assert set(entry) <= {"name", "unit", "value", "range", "extra"} and {"name", "unit", "value"} <= set(entry)
        assert entry["unit"] == "ms" and all(isinstance(entry[k], str) for k in ("name", "unit", "range", "extra"))
    first = _arm(report, report.batch_sizes[0].batch_size, report.base)
    assert entries[0]["name"] == f"decode batch size {report.batch_sizes[0].batch_size}: GPU ms per step"
    assert entries[0]["value"] == first.gpu_ms_per_step.median
    assert report.arm(report.base).sha[:12] in entries[0]["extra"]


def test_an_unfounded_report_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    data = json.loads(RICH.read_text())
    data["verdict"] = "pass"  # its numbers give a regression
    forged = tmp_path / "report.json"
    forged.write_text(json.dumps(data))
    out = tmp_path / "bmf.json"
    proc = _export("--format", "bmf", "--out", str(out), str(forged))
    assert proc.returncode == 2 and "verdicts its own numbers do not give" in proc.stderr
    assert "Traceback" not in proc.stderr and not out.exists()


@pytest.mark.slow
def test_an_arm_without_measurements_is_one_message(tmp_path: Path) -> None:
    report = remeasured(committed(RICH), 1.0)
    failed = explained(report.model_copy(update={
        "verdict": "invalid",
        "arms": [a.model_copy(update={"status": "build_failed"}) if a.name == report.head else a
                 for a in report.arms],
        "batch_sizes": [b.model_copy(update={
            "verdict": "invalid", "gpu_ms_verdict": None, "tok_per_s_verdict": None,
            "gpu_ms_change": None, "tok_per_s_change": None,
            "arms": [a for a in b.arms if a.arm != report.head]}) for b in report.batch_sizes],
    }))
    path = tmp_path / "report.json"
    path.write_text(failed.model_dump_json())
    proc = _export("--format", "bmf", str(path))
    assert proc.returncode == 2, proc.stderr
    assert "holds no measurement of the head arm" in proc.stderr and proc.stdout == ""
    assert _export("--format", "bmf", "--arm", "base", str(path)).returncode == 0


@pytest.mark.parametrize(("args", "message"), [
    (["--format", "csv", str(RICH)], "argument --format: invalid choice: 'csv'"),
    (["--format", "bmf", "--arm", "ablation", str(RICH)], "argument --arm: invalid choice"),
    (["--format", "bmf", str(REPO_ROOT / "no-such-report.json")], "cannot read"),
    (["--format", "bmf", "--out", str(REPO_ROOT), str(RICH)], "is a folder"),
])
def test_bad_input_is_one_clear_message(args: list[str], message: str) -> None:
    proc = _export(*args)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""


def test_the_command_offers_every_format_the_export_stage_writes() -> None:
    from guard.cli import _parser
    from guard.export import FORMATS

    export = _parser()._subparsers._group_actions[0].choices["export"]  # type: ignore[union-attr]
    offered = next(a for a in export._actions if a.dest == "format").choices
    assert list(offered) == list(FORMATS)
