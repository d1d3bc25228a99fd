"""The reference engine: same tokens whatever the capture, graphs and streams on a GPU."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from guard.engine import RefEngine

SMALL = {"layers": 2, "max_len": 96}


def decode(engine: RefEngine, batch_size: int, steps: int) -> list[list[int]]:
    engine.setup(batch_size)
    return [engine.step().tolist() for _ in range(steps)]


def test_padding_and_capture_mode_do_not_change_tokens_on_cpu() -> None:
    plain = decode(RefEngine(device="cpu", **SMALL), 2, 12)
    padded = decode(RefEngine(device="cpu", capture_mode="layer", capture_batch_sizes=(4,), **SMALL), 2, 12)
    assert plain == padded
    alone = decode(RefEngine(device="cpu", **SMALL), 1, 12)
    assert [row[0] for row in plain] == [row[0] for row in alone]  # prompts are per row
    assert len({tuple(r) for r in plain}) > 1  # it really generates, not a constant


def test_engine_is_deterministic_across_instances() -> None:
    assert decode(RefEngine(device="cpu", **SMALL), 1, 10) == decode(RefEngine(device="cpu", **SMALL), 1, 10)


def test_running_past_max_len_is_a_clear_error() -> None:
    engine = RefEngine(device="cpu", layers=1, max_len=40, prompt_len=32)
    engine.setup(1)
    for _ in range(8):
        engine.step()
    with pytest.raises(RuntimeError, match="max_len"):
        engine.step()


def test_long_kv_layers_keep_tokens_and_lengthen_only_their_caches_on_cpu() -> None:
    plain = RefEngine(device="cpu", **SMALL)
    longer = RefEngine(device="cpu", long_kv_layers=1, long_kv_len=160, **SMALL)
    assert decode(plain, 2, 12) == decode(longer, 2, 12)
    assert longer.state is not None
    assert [c.shape[2] for c in longer.state.k_cache] == [160, 96]
    assert longer.describe()["long_kv_layers"] == 1
    with pytest.raises(ValueError, match="long_kv_layers"):
        RefEngine(device="cpu", long_kv_layers=3, **SMALL)


def test_forcing_follows_the_given_ids_and_reproduces_its_own_on_cpu() -> None:
    free = decode(RefEngine(device="cpu", **SMALL), 2, 10)
    engine = RefEngine(device="cpu", capture_batch_sizes=(4,), **SMALL)  # padded: forced rows are the real ones
    engine.setup(2)
    forced = [engine.step(None if i == 0 else torch.tensor(free[i - 1])).tolist() for i in range(10)]
    assert forced == free
    engine.setup(2)
    other = [engine.step(torch.tensor([(t + 1) % 8192 for t in free[i]])).tolist() for i in range(10)]
    assert other != free[1:] + [free[-1]]  # other inputs, other outputs


def test_bf16_runs_and_is_deterministic_on_cpu() -> None:
    engine = RefEngine(device="cpu", dtype="bfloat16", **SMALL)
    tokens = decode(engine, 1, 10)
    assert engine.describe()["dtype"] == "bfloat16"
    assert engine.weights.lm_head.dtype == torch.bfloat16
    assert tokens == decode(RefEngine(device="cpu", dtype="bfloat16", **SMALL), 1, 10)


def test_bad_capture_mode() -> None:
    with pytest.raises(ValueError, match="capture_mode"):
        RefEngine(device="cpu", capture_mode="whole", **SMALL)


def test_setup_again_at_one_batch_size_starts_each_pass_from_the_same_state_on_cpu() -> None:
    engine = RefEngine(device="cpu", layers=2, max_len=48, prompt_len=32)
    first = decode(engine, 2, 16)  # up to max_len: a pass that did not start over would run past it
    cache = engine.state.k_cache[0] if engine.state else None
    assert decode(engine, 2, 16) == first
    assert engine.state is not None and engine.state.k_cache[0] is cache  # the same state, copied back
    # forced passes too, and another batch size in between is set up afresh
    engine.setup(2)
    forced = [engine.step(None if i == 0 else torch.tensor(first[i - 1])).tolist() for i in range(16)]
    assert forced == first
    assert decode(engine, 1, 16) == decode(RefEngine(device="cpu", layers=2, max_len=48, prompt_len=32), 1, 16)
    assert decode(engine, 2, 16) == first


@pytest.mark.gpu
def test_setup_again_at_one_batch_size_keeps_its_graphs_on_gpu() -> None:
    engine = RefEngine(layers=4)
    first = decode(engine, 2, 24)
    graphs = list(engine.graphs)
    assert decode(engine, 2, 24) == first
    assert engine.graphs == graphs  # replayed again, not captured again


@pytest.mark.gpu
@pytest.mark.parametrize("mode,sizes", [("step", (1, 2)), ("layer", (4,))])
def test_graph_replay_matches_eager_on_gpu(mode: str, sizes: tuple[int, ...]) -> None:
    eager = decode(RefEngine(capture=False, layers=4), 2, 24)
    engine = RefEngine(capture_mode=mode, capture_batch_sizes=sizes, layers=4)
    graphed = decode(engine, 2, 24)
    assert engine.graphs, "a captured batch size must replay graphs"
    assert len(engine.graphs) == (1 if mode == "step" else 4 + 2)
    assert graphed == eager


@pytest.mark.gpu
def test_default_engine_graph_has_about_1000_kernels_on_several_streams(tmp_path: Path) -> None:
    from torch.profiler import ProfilerActivity, profile

    engine = RefEngine()
    engine.setup(1)
    for _ in range(4):
        engine.step().tolist()
    steps = 8
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            engine.step().tolist()
        torch.cuda.synchronize()
    trace = tmp_path / "trace.json"
    prof.export_chrome_trace(str(trace))
    events = json.loads(trace.read_text())["traceEvents"]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    launches = [e for e in events if e.get("name") == "cudaGraphLaunch"]
    assert len(launches) == steps
    assert 800 <= len(kernels) / steps <= 1300
    assert len({e["args"]["stream"] for e in kernels}) > 1


@pytest.mark.gpu
@pytest.mark.slow
def test_demo_on_gpu_times_with_cuda_events(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "guard", "demo", "--out", str(out), "--workdir", str(tmp_path / "w"),
         "--steps", "32", "--warmup-steps", "4", "--repeats", "3"],
        capture_output=True, text=True, timeout=900,
    )
    report = json.loads((out / "report.json").read_text())
    assert report["environment"]["gpu"], report["environment"]
    assert all(a["timer"] == "cuda_event" for b in report["batch_sizes"] for a in b["arms"])
    # the demo's workload is forced: the agreement with the reference, not a hash, says like for like
    for batch in report["batch_sizes"]:
        agreement = batch["agreement"]
        assert agreement["unforced"] == [], agreement
        assert not any(a["output_changed"] for a in agreement["arms"]), agreement
    assert report["verdict"] == "regression" and proc.returncode == 1


def test_idle_injection_keeps_tokens_and_waits_at_least_as_long(monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    plain = RefEngine(device="cpu", **SMALL)
    injected = RefEngine(device="cpu", idle_us=2000, **SMALL)
    assert injected.split and not plain.split
    assert decode(plain, 2, 6) == decode(injected, 2, 6)
    injected.setup(1)
    started = time.perf_counter()
    injected.step()
    assert time.perf_counter() - started >= 0.002  # the spin is a floor, whatever the machine
    monkeypatch.setenv("REFENGINE_IDLE_US", "35")
    assert RefEngine(device="cpu", **SMALL).idle_us == 35.0
    with pytest.raises(ValueError, match="idle_us"):
        RefEngine(device="cpu", idle_us=-1, **SMALL)


@pytest.mark.gpu
def test_split_step_is_two_graphs_with_the_same_tokens() -> None:
    eager = decode(RefEngine(capture=False, layers=4), 2, 16)
    split = RefEngine(split=True, layers=4)
    injected = RefEngine(idle_us=20, layers=4)
    assert decode(split, 2, 16) == eager
    assert decode(injected, 2, 16) == eager
    assert decode(RefEngine(long_kv_layers=2, layers=4), 2, 16) == eager
    assert len(split.graphs) == 2 and split.idle_us == 0  # two graphs; the wait between them is a no-op
    assert len(injected.graphs) == 2 and injected.idle_after == 0


def test_a_split_head_decodes_what_one_gemm_does_on_cpu() -> None:
    """Split along d_model and summed with index_add_, the head computes the same logits (up
    to rounding): in float32 the same greedy tokens come out."""
    split = decode(RefEngine(device="cpu", head_splits=4, **SMALL), 2, 12)
    assert split == decode(RefEngine(device="cpu", **SMALL), 2, 12)
    with pytest.raises(ValueError, match="head_splits"):
        RefEngine(device="cpu", head_splits=3, **SMALL)
