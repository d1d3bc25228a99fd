"""The harness's profiled pass, on a GPU: a gzipped trace with one range per step."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from guard.measure._disagreements import count_disagreements

REPO_ROOT = Path(__file__).resolve().parents[1]
HARNESS = REPO_ROOT / "guard" / "harness" / "run.py"


def _run_harness(tmp_path: Path, spec: dict[str, object]) -> dict:
    """One harness process on the reference engine; its result, once it exited 0."""
    spec = {"entry": "guard.engine:make", "root": str(REPO_ROOT), "options": {"layers": 2},
            "steps": 8, "warmup_steps": 2, "trace_dir": str(tmp_path / "traces"), **spec}
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    proc = subprocess.run(
        [sys.executable, str(HARNESS), str(tmp_path / "spec.json"), str(tmp_path / "out.json")],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads((tmp_path / "out.json").read_text())


@pytest.mark.gpu
def test_profiled_pass_writes_a_trace_per_batch_size(tmp_path: Path) -> None:
    spec = {"batch_sizes": [1, 3], "arm": "base", "repeat": 0, "profile_steps": 5}
    result = _run_harness(tmp_path, spec)
    for run in result["runs"]:
        assert run["timer"] == "cuda_event"
        # warmup, the end-to-end pass and the GPU-timed pass; the profiled steps are not recorded
        assert len(run["tokens"]) == 2 + 2 * 8
        assert len(run["step_ms"]) == 8
        # the spin covers the host's launch of most steps (a graph replay launches in microseconds)
        assert 50 <= run["hold_us"] <= 5000 and run["unheld_steps"] <= 8 // 2
        # held steps lose the host's launch time, so they are no slower than end-to-end ones
        assert run["gpu_ms_per_step"] <= run["end_to_end_gpu_ms_per_step"] * 1.02
        trace = Path(run["trace"])
        assert trace.name == f"base-0-bs{run['batch_size']}.trace.json.gz"
        events = json.loads(gzip.decompress(trace.read_bytes()))["traceEvents"]
        steps = [e for e in events if e.get("name") == "guard.step" and e.get("cat") == "user_annotation"]
        assert len(steps) == 5
        assert any(e.get("cat") == "kernel" for e in events)


@pytest.mark.gpu
def test_pinned_process_keeps_to_its_cpu_and_times_the_profiled_pass_in_phases(tmp_path: Path) -> None:
    import os

    cpu = max(os.sched_getaffinity(0))
    spec = {"batch_sizes": [1], "arm": "head", "repeat": 1, "profile_steps": 4, "cpus": [cpu]}
    result = _run_harness(tmp_path, spec)
    assert result["environment"]["cpus"] == [cpu]
    timings = result["timings_s"]
    profiled = ["profiled pass: setup and warmup", "profiled pass: profiler and steps", "profiled pass: trace export"]
    for name in ["import", "fingerprint", "engine", "timed passes", *profiled]:
        assert timings[name] > 0, (name, timings)
    (run,) = result["runs"]
    assert run["timer"] == "cuda_event" and Path(run["trace"]).is_file()


@pytest.mark.gpu
def test_forced_gpu_process_reproduces_its_reference_and_times_the_host(tmp_path: Path) -> None:
    """On a GPU the reference covers warmup and both timed passes; forced with it, a float32
    process of the reference engine reproduces every id, graphs and all; and the GPU-timed pass
    records the host's enqueue time of every step."""
    ref_dir, run_dir = tmp_path / "ref", tmp_path / "run"
    ref_dir.mkdir()
    run_dir.mkdir()
    reference = _run_harness(ref_dir, {"batch_sizes": [1, 2], "arm": "base", "repeat": 0, "mode": "reference",
                                       "profile_steps": 4})
    assert reference["accepts_tokens"] is True
    rows = {r["batch_size"]: r["tokens"] for r in reference["runs"]}
    assert all(len(tokens) == 2 + 2 * 8 for tokens in rows.values())
    path = tmp_path / "reference.json"
    path.write_text(json.dumps({"format": "regression-guard reference tokens", "source": "test",
                                "batch_sizes": {str(k): v for k, v in rows.items()}}))
    result = _run_harness(run_dir, {"batch_sizes": [1, 2], "arm": "head", "repeat": 0, "reference": str(path),
                                    "profile_steps": 4})
    for run in result["runs"]:
        assert run["forced"] is True and run["timer"] == "cuda_event"
        assert run["tokens"] == rows[run["batch_size"]]  # every id reproduced
        assert len(run["host_ms"]) == 8 and all(ms > 0 for ms in run["host_ms"])
        assert run["host_ms_per_step"] == pytest.approx(sum(run["host_ms"]) / 8)  # their mean
        assert Path(run["trace"]).is_file()  # the profiled pass ran forced too


@pytest.mark.gpu
def test_bf16_reference_engine_forced_processes_do_the_same_work(tmp_path: Path) -> None:
    """bf16: forced processes may disagree with the reference at near-ties, never by much."""
    options = {"layers": 4, "dtype": "bfloat16"}
    ref_dir = tmp_path / "ref"
    ref_dir.mkdir()
    reference = _run_harness(ref_dir, {"batch_sizes": [1], "arm": "base", "repeat": 0, "mode": "reference",
                                       "options": options})
    path = tmp_path / "reference.json"
    path.write_text(json.dumps({"format": "regression-guard reference tokens", "source": "test",
                                "batch_sizes": {"1": reference["runs"][0]["tokens"]}}))
    for repeat in range(2):
        out = tmp_path / f"run{repeat}"
        out.mkdir()
        (run,) = _run_harness(out, {"batch_sizes": [1], "arm": "head", "repeat": repeat, "options": options,
                                    "reference": str(path)})["runs"]
        assert run["forced"] is True
        count, compared, first = count_disagreements(run["tokens"], reference["runs"][0]["tokens"])
        assert count <= compared * 0.2, first


@pytest.mark.gpu
def test_repeated_gpu_passes_keep_the_compared_ids_and_the_gpu_timed_pass_as_they_were(tmp_path: Path) -> None:
    """With tok/s from 0.5 s of decode and a warmup, a forced process still reports warmup, the
    end-to-end pass and the GPU-timed pass as its ids, every one the reference's; the repeated
    passes add windows, not ids."""
    ref_dir, run_dir = tmp_path / "ref", tmp_path / "run"
    ref_dir.mkdir()
    run_dir.mkdir()
    reference = _run_harness(ref_dir, {"batch_sizes": [1, 2], "arm": "base", "repeat": 0, "mode": "reference"})
    rows = {r["batch_size"]: r["tokens"] for r in reference["runs"]}
    path = tmp_path / "reference.json"
    path.write_text(json.dumps({"format": "regression-guard reference tokens", "source": "test",
                                "batch_sizes": {str(k): v for k, v in rows.items()}}))
    result = _run_harness(run_dir, {"batch_sizes": [1, 2], "arm": "head", "repeat": 0, "reference": str(path),
                                    "tok_per_s_min_s": 0.5, "warmup_max_s": 0.5})
    for run in result["runs"]:
        assert run["timer"] == "cuda_event" and run["timed_passes"] > 1 and run["timed_s"] >= 0.5
        assert run["tokens"] == rows[run["batch_size"]] and run["passes_differing"] == 0
        assert len(run["step_ms"]) == 8  # the GPU-timed pass, once
        # tokens over the summed time of every end-to-end pass; the end-to-end ms, the first one's events' mean
        passes = run["end_to_end_pass_ms"]
        assert len(passes) == run["timed_passes"] and sum(passes) == pytest.approx(run["timed_s"] * 1e3)
        assert run["tok_per_s"] == pytest.approx(run["batch_size"] * 8 * len(passes) / run["timed_s"])
        assert len(run["end_to_end_gpu_ms"]) == 8
        assert run["end_to_end_gpu_ms_per_step"] == pytest.approx(sum(run["end_to_end_gpu_ms"]) / 8)
        assert 0 < run["warmup_s"] <= 0.5 + 0.05 and run["host"]["cpus"]
