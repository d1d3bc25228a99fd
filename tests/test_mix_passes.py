"""The mix pass's settling warmup and its profiled pass: the warmup as the fixed sizes have
it, the profiled pass after every timed pass, its trace checked and analysed by the guard."""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import pytest
import torch

from guard.engine import RefEngine
from guard.harness import draw_schedule, pass_lengths
from guard.harness._mix_passes import profile_mix
from guard.measure import ArmTarget, HarnessSpec, make_reference
from guard.measure._models import RepeatResult
from guard.measure._reference import forced_spec
from guard.measure._runner import RunFailed, _check_traces, run_interleaved
from guard.sandbox import choose_box

REPO_ROOT = Path(__file__).resolve().parents[1]
MIX = {1: 0.4, 2: 0.25, 3: 0.15, 6: 0.1, 9: 0.1}
ENGINE = {"layers": 1, "max_len": 160, "capture_batch_sizes": [1, 2, 4, 8], "fallback": False}


def test_a_longer_profiled_pass_extends_the_schedule_and_changes_none_of_its_timed_steps() -> None:
    assert pass_lengths(4, 10, 0) == pass_lengths(4, 10, 20) == [4, 10, 10]
    assert pass_lengths(4, 10, 26) == [4, 10, 10, 6]
    short = draw_schedule(pass_lengths(4, 10, 8), seed=3, mix=MIX)
    longer = draw_schedule(pass_lengths(4, 10, 64), seed=3, mix=MIX)
    assert len(longer) == 4 + 64 and longer[:24] == short


@pytest.mark.slow
def test_the_mix_settles_then_decodes_its_schedule_from_setup_again(tmp_path: Path) -> None:
    """In real harness processes: with warmup_max_s the mix pass warms up first, and its timed
    steps still decode the reference's outputs exactly, so the warmup left nothing behind."""
    spec = HarnessSpec(entry="guard.engine:make", options=ENGINE, batch_sizes=[1], steps=12, warmup_steps=2,
                       tok_per_s_min_s=0, warmup_max_s=0.3, profile_steps=0, batch_mix=MIX, batch_mix_seed=2)
    target = ArmTarget(box=choose_box(), name="head", python=Path(sys.executable), worktree=REPO_ROOT)
    outcome = make_reference(target, spec, tmp_path / "runs", 300, "base test")
    assert outcome.error is None and outcome.tokens is not None and outcome.path is not None
    results = run_interleaved([target], forced_spec(spec, outcome.tokens, outcome.path), 2, tmp_path / "runs", 300,
                              reference=outcome.tokens)
    assert results["head"].error is None, results["head"].error
    for repeat in results["head"].repeats:
        mix = repeat.mix
        assert mix is not None
        assert mix.warmup_s >= 0.3 or mix.warmup_settled is True  # ran to its limit, or settled sooner
        assert mix.warmup_settled is not None
        assert mix.disagreements == 0 and mix.compared == sum(len(r) for r in outcome.tokens.mix or [])
        assert [len(r) for r in mix.tokens[1:]] == spec.mix_schedule()[: spec.warmup_steps + spec.steps]
    unsettled = spec.model_copy(update={"warmup_max_s": 0.0})
    again = run_interleaved([target], forced_spec(unsettled, outcome.tokens, outcome.path), 1, tmp_path / "again",
                            300, reference=outcome.tokens)
    quiet = again["head"].repeats[0].mix
    assert quiet is not None and quiet.warmup_s == 0 and quiet.warmup_settled is None
    assert quiet.tokens == results["head"].repeats[0].mix.tokens  # type: ignore[union-attr]


@pytest.mark.filterwarnings("ignore:CUDA is not available")
def test_the_profiled_pass_of_the_mix_writes_one_step_range_per_schedule_step(tmp_path: Path) -> None:
    schedule = draw_schedule(pass_lengths(2, 6, 0), seed=1, mix=MIX)
    engine = RefEngine(device="cpu", **ENGINE)  # type: ignore[arg-type]
    trace = tmp_path / "traces" / "head-0-mix.trace.json.gz"
    phases: list[str] = []
    answer = profile_mix(engine, torch, schedule, 2, 5, trace, phases.append)
    assert answer == {"trace": str(trace), "profile_steps": 5}
    assert phases == ["profiled pass: setup and warmup", "profiled pass: profiler and steps",
                      "profiled pass: trace export"]
    events = json.loads(gzip.decompress(trace.read_bytes()))["traceEvents"]
    assert sum(e.get("name") == "guard.step" for e in events) == 5
    # it decoded the schedule's steps after the warmup, each as wide as its batch: the engine's
    # last step is the fifth after the warmup
    assert engine.positions_used == engine.prompt_len + 1 + 2 + 5
    assert engine.step_info()["padded_to"] >= schedule[2 + 4]


def test_a_mix_trace_outside_the_traces_folder_fails_its_process(tmp_path: Path) -> None:
    traces = tmp_path / "traces"
    traces.mkdir()
    outside = tmp_path / "elsewhere.trace.json.gz"
    outside.write_bytes(b"")
    inside = traces / "head-0-mix.trace.json.gz"
    inside.write_bytes(b"")
    mix = {"max_batch_size": 9, "steps": 1, "warmup_steps": 0, "timer": "cuda_event", "setup_s": 0.0,
           "tok_per_s": 1.0, "step_ms": [1.0], "tokens": [[0] * 9, [0]]}
    base = {"arm": "head", "repeat": 0, "environment": {}, "runs": []}
    _check_traces(RepeatResult.model_validate(base | {"mix": mix | {"trace": str(inside)}}), traces, tmp_path / "s")
    with pytest.raises(RunFailed, match="not a file the process wrote"):
        _check_traces(RepeatResult.model_validate(base | {"mix": mix | {"trace": str(outside)}}), traces,
                      tmp_path / "s")
