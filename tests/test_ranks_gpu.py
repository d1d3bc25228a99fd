"""Several ranks on several GPUs (NCCL): every rank captures its decode graph with its
collectives inside, its profiled pass leaves a trace of its own, and the graph fallback on
one rank shows on that rank alone. Skipped without two GPUs (docs/notebook/multi-gpu.md runs them)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from guard.compare import arm_ranks
from guard.config import Workload
from guard.measure import ArmTarget, HarnessSpec, rank_trace_paths, run_interleaved
from guard.sandbox import choose_box

pytestmark = pytest.mark.gpu

REPO_ROOT = Path(__file__).resolve().parents[1]
OPTIONS = {"layers": 4, "max_len": 256}


def _gpus() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


needs_two = pytest.mark.skipif(_gpus() < 2, reason="needs two GPUs")


def _run(tmp_path: Path, **options: object) -> tuple[Path, object]:
    spec = HarnessSpec.of(Workload(entry="guard.engine:make", options=OPTIONS | options, batch_sizes=[1, 2], steps=32,
                                   warmup_steps=4, tok_per_s_min_s=0.2, warmup_max_s=0.2, profile_steps=8,
                                   world_size=2))
    target = ArmTarget(box=choose_box(), name="head", python=Path(sys.executable), worktree=REPO_ROOT)
    found = run_interleaved([target], spec, 1, tmp_path / "runs", timeout_s=300)["head"]
    assert found.error is None, found.log_tail
    return tmp_path / "runs", found


@needs_two
def test_every_rank_replays_its_graph_and_leaves_its_own_trace(tmp_path: Path) -> None:
    runs, found = _run(tmp_path)
    result = found.repeats[0]  # type: ignore[attr-defined]
    for run in result.runs:
        assert run.timer == "cuda_event" and len(run.ranks) == 2
        assert [r.workload["capture_mode"] for r in run.ranks] == ["step", "step"]
        assert [r.workload["rank"] for r in run.ranks] == [0, 1]
        names = [Path(r.trace).name for r in run.ranks if r.trace]
        assert names == [f"head-0-rank{rank}-bs{run.batch_size}.trace.json.gz" for rank in range(2)]
        assert all((runs / "traces" / name).is_file() for name in names)
        assert run.trace == run.ranks[0].trace
    traces = rank_trace_paths({"head": found})  # type: ignore[dict-item]
    assert sorted(traces["head"]) == [1, 2] and all(len(paths) == 2 for _, paths in traces["head"][1])


@needs_two
def test_the_graph_fallback_on_one_rank_is_named(tmp_path: Path) -> None:
    _, found = _run(tmp_path, eager_rank=1)
    run = found.repeats[0].run_for(2)  # type: ignore[attr-defined]
    assert [r.workload["capture_mode"] for r in run.ranks] == ["step", "eager"]
    ranks = arm_ranks([run])
    assert ranks is not None
    assert ("capture_mode", "eager", "step") in [(p.field, p.value, p.rank0_value) for p in ranks.paths]
