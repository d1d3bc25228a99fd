"""guard/harness/run.py as a real subprocess: its result JSON, and how it reports failures."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
HARNESS = REPO_ROOT / "guard" / "harness" / "run.py"
STEPS = 8
WARMUP = 3


def run_harness(tmp_path: Path, spec: dict[str, Any], name: str = "run") -> tuple[int, dict[str, Any], str]:
    spec_path = tmp_path / f"{name}.spec.json"
    out_path = tmp_path / f"{name}.json"
    spec_path.write_text(json.dumps(spec))
    proc = subprocess.run(
        [sys.executable, str(HARNESS), str(spec_path), str(out_path)],
        cwd=tmp_path,  # not the repo: imports must come from spec["root"]
        capture_output=True,
        text=True,
        timeout=120,
    )
    result = json.loads(out_path.read_text()) if out_path.exists() else {}
    return proc.returncode, result, proc.stderr


def engine_spec(**over: Any) -> dict[str, Any]:
    spec = {
        "entry": "guard.engine:make",
        "root": str(REPO_ROOT),
        "options": {"layers": 2, "max_len": 128},
        "batch_sizes": [1, 2],
        "steps": STEPS,
        "warmup_steps": WARMUP,
        "arm": "base",
        "repeat": 0,
    }
    return spec | over


def expected_sha(tokens: list[list[int]]) -> str:
    """sha256 over every id as int64 little endian, step by step, row by row."""
    return hashlib.sha256(np.asarray(tokens, dtype="<i8").tobytes()).hexdigest()


@pytest.fixture(scope="module")
def engine_runs(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[int, dict[str, Any], str]]:
    tmp = tmp_path_factory.mktemp("harness")
    return [run_harness(tmp, engine_spec(repeat=i), name=f"run{i}") for i in range(2)]


@pytest.mark.slow
def test_engine_run_succeeds(engine_runs: list[tuple[int, dict[str, Any], str]]) -> None:
    for rc, result, stderr in engine_runs:
        assert rc == 0, stderr
        assert "error" not in result
        assert result["arm"] == "base"
        assert [r["batch_size"] for r in result["runs"]] == [1, 2]
        assert result["environment"]["torch"]  # torch was importable and reported


@pytest.mark.slow
def test_engine_run_records_every_step(engine_runs: list[tuple[int, dict[str, Any], str]]) -> None:
    _, result, _ = engine_runs[0]
    for run in result["runs"]:
        bs = run["batch_size"]
        assert run["steps"] == STEPS
        assert run["warmup_steps"] == WARMUP
        tokens = run["tokens"]
        assert len(tokens) == WARMUP + STEPS  # warmup included
        assert all(len(row) == bs for row in tokens)
        assert all(isinstance(t, int) and 0 <= t < 8192 for row in tokens for t in row)  # vocab 8192
        assert run["sha256"] == expected_sha(tokens)


@pytest.mark.slow
def test_engine_run_timings(engine_runs: list[tuple[int, dict[str, Any], str]]) -> None:
    _, result, _ = engine_runs[0]
    for run in result["runs"]:
        bs = run["batch_size"]
        assert run["timer"] == "perf_counter"  # no GPU here
        assert len(run["step_ms"]) == STEPS
        assert all(ms > 0 for ms in run["step_ms"])
        # a CPU's steps are its end-to-end pass's: the figure is their mean, the median beside it
        assert run["gpu_ms_per_step"] == pytest.approx(sum(run["step_ms"]) / STEPS, rel=1e-12)
        assert run["gpu_ms_median_per_step"] == pytest.approx(float(np.median(run["step_ms"])), rel=1e-12)
        assert run["wall_s"] > 0
        assert run["end_to_end_pass_ms"] == [pytest.approx(run["wall_s"] * 1e3, rel=1e-12)]  # one pass
        assert run["tok_per_s"] == pytest.approx(bs * STEPS / run["wall_s"], rel=1e-12)
        # the wall clock covers every timed step
        assert run["wall_s"] * 1e3 == pytest.approx(sum(run["step_ms"]), rel=1e-9)
        assert run["setup_s"] >= 0
        assert run["workload"]["layers"] == 2
        assert run["workload"]["device"] == "cpu"


@pytest.mark.slow
def test_engine_is_deterministic_across_processes(engine_runs: list[tuple[int, dict[str, Any], str]]) -> None:
    (_, first, _), (_, second, _) = engine_runs
    assert first["pid"] != second["pid"]
    for a, b in zip(first["runs"], second["runs"]):
        assert a["tokens"] == b["tokens"]
        assert a["sha256"] == b["sha256"]
    # and the tokens are not trivially constant
    assert len({t for row in first["runs"][1]["tokens"] for t in row}) > 1


@pytest.mark.slow
def test_engine_prompts_are_per_row(engine_runs: list[tuple[int, dict[str, Any], str]]) -> None:
    _, result, _ = engine_runs[0]
    runs = {r["batch_size"]: r for r in result["runs"]}
    assert [row[0] for row in runs[2]["tokens"]] == [row[0] for row in runs[1]["tokens"]]
    assert runs[1]["sha256"] != runs[2]["sha256"]


# -- failures: exit code 3 and an "error" naming the problem ------------------------------


def file_spec(tmp_path: Path, source: str | None, entry: str = "wl.py:make", **over: Any) -> dict[str, Any]:
    if source is not None:
        (tmp_path / "wl.py").write_text(textwrap.dedent(source))
    spec = {
        "entry": entry,
        "root": str(tmp_path),
        "options": {},
        "batch_sizes": [1, 2],
        "steps": 2,
        "warmup_steps": 1,
        "arm": "head",
        "repeat": 0,
    }
    return spec | over


GOOD_CLASS = """
class W:
    def setup(self, batch_size):
        self.batch = batch_size
    def step(self):
        return [1] * self.batch
"""


def check_failure(tmp_path: Path, spec: dict[str, Any]) -> dict[str, Any]:
    rc, result, stderr = run_harness(tmp_path, spec)
    assert rc == 3, stderr
    assert "error" in result
    assert "runs" not in result
    error = result["error"]
    assert set(error) >= {"stage", "type", "message", "traceback"}
    assert error["message"] in stderr  # also logged for the run's log file
    return error


def test_missing_entry_file(tmp_path: Path) -> None:
    error = check_failure(tmp_path, file_spec(tmp_path, None, entry="nowhere.py:make"))
    assert error["stage"] == "load"
    assert "nowhere.py" in error["message"]
    assert "not found" in error["message"]


def test_missing_function(tmp_path: Path) -> None:
    error = check_failure(tmp_path, file_spec(tmp_path, GOOD_CLASS + "\ndef make():\n    return W()\n",
                                              entry="wl.py:build"))
    assert error["stage"] == "load"
    assert "build" in error["message"]
    assert "not a callable" in error["message"]


def test_object_without_step(tmp_path: Path) -> None:
    source = """
    class NoStep:
        def setup(self, batch_size):
            pass

    def make():
        return NoStep()
    """
    error = check_failure(tmp_path, file_spec(tmp_path, source))
    assert error["stage"] == "make"
    assert "step()" in error["message"]


def test_step_returns_wrong_number_of_ids(tmp_path: Path) -> None:
    source = """
    class Short:
        def setup(self, batch_size):
            self.batch = batch_size
        def step(self):
            return [5]  # always one id, whatever the batch size

    def make():
        return Short()
    """
    error = check_failure(tmp_path, file_spec(tmp_path, source))
    # batch size 1 is fine; batch size 2 is where it breaks
    assert error["stage"] == "batch size 2"
    assert "2 token ids" in error["message"]
    assert error["type"] == "WorkloadError"


def test_setup_raising(tmp_path: Path) -> None:
    source = """
    class Broken:
        def setup(self, batch_size):
            raise RuntimeError(f"cannot allocate for batch {batch_size}")
        def step(self):
            return [0]

    def make():
        return Broken()
    """
    error = check_failure(tmp_path, file_spec(tmp_path, source))
    assert error["stage"] == "batch size 1"
    assert error["type"] == "RuntimeError"
    assert error["message"] == "cannot allocate for batch 1"
    assert "cannot allocate" in error["traceback"]


def test_file_workload_with_options_and_tensor_output(tmp_path: Path) -> None:
    source = """
    import torch

    class Counter:
        def __init__(self, start):
            self.start = start
        def setup(self, batch_size):
            self.next = torch.arange(batch_size) + self.start
        def step(self):
            out = self.next.clone()
            self.next += 1
            return out

    def make(start):
        return Counter(start)
    """
    rc, result, stderr = run_harness(tmp_path, file_spec(tmp_path, source, options={"start": 100}))
    assert rc == 0, stderr
    runs = {r["batch_size"]: r for r in result["runs"]}
    # 1 warmup + 2 timed steps, counting up from `start` per row
    assert runs[1]["tokens"] == [[100], [101], [102]]
    assert runs[2]["tokens"] == [[100, 101], [101, 102], [102, 103]]
    assert runs[2]["sha256"] == expected_sha([[100, 101], [101, 102], [102, 103]])


def test_file_workload_with_dataclass_and_future_annotations(tmp_path: Path) -> None:
    source = """
    from __future__ import annotations

    from dataclasses import dataclass, field


    @dataclass
    class W:
        batch: int = 0
        history: list[int] = field(default_factory=list)

        def setup(self, batch_size: int) -> None:
            self.batch = batch_size

        def step(self) -> list[int]:
            return [3] * self.batch


    def make() -> W:
        return W()
    """
    rc, result, stderr = run_harness(tmp_path, file_spec(tmp_path, source))
    assert rc == 0, result.get("error", stderr)
    assert [r["batch_size"] for r in result["runs"]] == [1, 2]


@pytest.mark.slow
def test_no_warmup_records_the_first_generated_token(
    tmp_path: Path, engine_runs: list[tuple[int, dict[str, Any], str]]
) -> None:
    rc, result, stderr = run_harness(tmp_path, engine_spec(warmup_steps=0, steps=4, batch_sizes=[1]))
    assert rc == 0, stderr
    tokens = result["runs"][0]["tokens"]
    assert len(tokens) == 4
    _, with_warmup, _ = engine_runs[0]
    assert tokens == with_warmup["runs"][0]["tokens"][:4]  # the same first four tokens


def test_hold_covers_twice_the_slow_launches_within_bounds() -> None:
    from guard.harness._timed import HOLD_MAX_US, HOLD_MIN_US, hold_us_for

    assert hold_us_for([10.0] * 20) == HOLD_MIN_US  # fast launches: the floor
    assert hold_us_for([30.0] * 18 + [200.0, 400.0]) == 400.0  # the 90th percentile, doubled
    assert hold_us_for([1e5]) == HOLD_MAX_US
    assert hold_us_for([]) == HOLD_MAX_US


@pytest.mark.filterwarnings("ignore:CUDA is not available")
def test_profiled_pass_writes_a_step_ranged_trace_and_times_its_parts(tmp_path: Path) -> None:
    """The profiled pass itself, on the CPU build: the harness only runs it where steps are
    CUDA-event timed, so the pipeline never does this on a CPU; the pass's code is the same."""
    import gzip

    import torch

    from guard.engine import make
    from guard.harness._profile import profile_batch

    seen: list[str] = []
    workload = make(layers=2, max_len=128)
    trace = tmp_path / "traces" / "base-0-bs2.trace.json.gz"
    out = profile_batch(workload, torch, 2, 2, 3, trace, seen.append)
    assert out == {"trace": str(trace), "profile_steps": 3}
    events = json.loads(gzip.decompress(trace.read_bytes()))["traceEvents"]
    assert sum(1 for e in events if e.get("name") == "guard.step" and e.get("ph") == "X") == 3
    parts = ["setup and warmup", "profiler and steps", "trace export"]
    assert seen == [f"profiled pass: {part}" for part in parts]


def test_a_cpu_the_process_may_not_use_is_a_clear_failure(tmp_path: Path) -> None:
    code, result, _ = run_harness(tmp_path, engine_spec(cpus=[max(os.sched_getaffinity(0)) + 4096]))
    assert code == 3
    assert result["error"]["stage"] == "pin" and "could not pin this process to CPUs" in result["error"]["message"]
