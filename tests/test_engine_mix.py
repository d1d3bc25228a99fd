"""The reference engine under a batch-size mix: its capture policy (fallback or padding), MoE
layers with either dispatch, and what step_info() says of each step."""

from __future__ import annotations

import pytest
import torch

from guard.engine import RefEngine

SMALL = {"layers": 2, "max_len": 96}
MOE = {"moe_experts": 4, "moe_top_k": 2, "moe_ffn": 32}
SCHEDULE = [3, 1, 6, 9, 2, 4, 5, 9, 1, 7, 3, 8]
CAPTURED = (1, 2, 4, 8)


def mix_decode(engine: RefEngine, inputs: list[list[int]] | None = None) -> tuple[list[list[int]], list[dict]]:
    """setup(9), a lead step of every row, then SCHEDULE; each active row decodes from its own
    last output, or from `inputs` (forced)."""
    engine.setup(max(SCHEDULE))
    out = [engine.step().tolist()]
    infos = [engine.step_info()]
    last = list(out[0])
    for k, size in enumerate(SCHEDULE):
        ids = inputs[k] if inputs is not None else last[:size]
        row = engine.step(torch.tensor(ids)).tolist()
        last[:size] = row
        out.append(row)
        infos.append(engine.step_info())
    return out, infos


def inputs_of(rows: list[list[int]]) -> list[list[int]]:
    """The ids each step decoded from, by the rule the harness forces with."""
    last, inputs = list(rows[0]), []
    for size, row in zip(SCHEDULE, rows[1:]):
        inputs.append(last[:size])
        last[:size] = row
    return inputs


def test_padding_rows_sit_the_step_out_on_cpu() -> None:
    """Padded up to a captured size, the rows past the step's batch are real sequences that do
    not step: their cache and token stay as they were, so padding changes no later output."""
    fallback = RefEngine(device="cpu", capture_batch_sizes=CAPTURED, fallback=True, **SMALL)
    padded = RefEngine(device="cpu", capture_batch_sizes=CAPTURED, fallback=False, **SMALL)
    exact_rows, exact_info = mix_decode(fallback)
    padded_rows, padded_info = mix_decode(padded, inputs_of(exact_rows))
    assert padded_rows == exact_rows
    assert fallback.state is not None and padded.state is not None
    for ours, theirs in zip(fallback.state.k_cache + fallback.state.v_cache,
                            padded.state.k_cache + padded.state.v_cache):
        assert torch.allclose(ours, theirs, atol=1e-5)
    assert [i["padded_to"] for i in exact_info[1:]] == SCHEDULE
    # the next captured size up; 9, the set-up size, has none and runs as it is
    assert [i["padded_to"] for i in padded_info[1:]] == [next((c for c in CAPTURED if c >= s), s) for s in SCHEDULE]
    assert {i["path"] for i in exact_info + padded_info} == {"eager"}  # no graph on a CPU
    assert len({tuple(r) for r in exact_rows}) > 3  # it really decodes


def test_fallback_comes_from_the_option_or_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REFENGINE_FALLBACK", "1")
    assert RefEngine(device="cpu", **SMALL).fallback is True
    assert RefEngine(device="cpu", fallback=False, **SMALL).fallback is False
    monkeypatch.delenv("REFENGINE_FALLBACK")
    engine = RefEngine(device="cpu", **SMALL)
    assert engine.fallback is None and engine.describe()["fallback"] is None
    engine.setup(2)
    with pytest.raises(ValueError, match="at most 2"):
        engine.step(torch.tensor([1, 2, 3]))


def test_the_two_moe_dispatches_compute_the_same_tokens_and_loads_on_cpu() -> None:
    free, _ = mix_decode(RefEngine(device="cpu", moe_dispatch="exact", **SMALL, **MOE))
    inputs = inputs_of(free)
    capacity_rows, capacity_info = mix_decode(RefEngine(device="cpu", moe_dispatch="capacity", **SMALL, **MOE), inputs)
    exact_rows, exact_info = mix_decode(RefEngine(device="cpu", moe_dispatch="exact", **SMALL, **MOE), inputs)
    assert capacity_rows == exact_rows == free
    assert [i["expert_tokens"] for i in capacity_info] == [i["expert_tokens"] for i in exact_info]
    for size, info in zip([max(SCHEDULE), *SCHEDULE], exact_info):
        loads = info["expert_tokens"]
        assert len(loads) == 4 and sum(loads) == size * 2 * 2  # tokens x top-k x layers
    assert free != mix_decode(RefEngine(device="cpu", **SMALL))[0]  # the experts are really in the model


def test_padded_moe_counts_only_real_rows_on_cpu() -> None:
    plain = RefEngine(device="cpu", capture_batch_sizes=CAPTURED, fallback=True, **SMALL, **MOE)
    rows, infos = mix_decode(plain)
    padded = RefEngine(device="cpu", capture_batch_sizes=CAPTURED, fallback=False, **SMALL, **MOE)
    padded_rows, padded_infos = mix_decode(padded, inputs_of(rows))
    assert padded_rows == rows
    assert [i["expert_tokens"] for i in padded_infos] == [i["expert_tokens"] for i in infos]
    described = padded.describe()
    assert described["moe_experts"] == 4 and described["moe_top_k"] == 2 and described["fallback"] is False


def test_a_dense_model_is_unchanged_by_the_moe_options_default() -> None:
    engine = RefEngine(device="cpu", **SMALL)
    assert "router" not in engine.weights.layers[0]
    assert engine.step_info() == {}  # nothing stepped yet
    with pytest.raises(ValueError, match="moe_top_k"):
        RefEngine(device="cpu", moe_experts=2, moe_top_k=3, **SMALL)
    with pytest.raises(ValueError, match="moe_dispatch"):
        RefEngine(device="cpu", moe_dispatch="sorted", **SMALL)


@pytest.mark.gpu
@pytest.mark.parametrize("fallback", [True, False])
def test_captured_sizes_replay_graphs_and_others_follow_the_policy_on_gpu(fallback: bool) -> None:
    eager_rows, _ = mix_decode(RefEngine(capture=False, **SMALL, **MOE))
    engine = RefEngine(capture_batch_sizes=CAPTURED, fallback=fallback, **SMALL, **MOE)
    rows, infos = mix_decode(engine, inputs_of(eager_rows))
    assert rows == eager_rows
    for size, info in zip(SCHEDULE, infos[1:]):
        if size in CAPTURED:
            assert info == info | {"path": "graph", "padded_to": size}
        elif fallback or size > max(CAPTURED):
            assert info["path"] == "eager" and info["padded_to"] == size
        else:
            assert info["path"] == "graph" and info["padded_to"] == next(c for c in CAPTURED if c >= size)
        assert sum(info["expert_tokens"]) == size * 2 * 2


@pytest.mark.gpu
def test_an_eager_exact_moe_step_never_waits_for_the_host_on_gpu() -> None:
    """The exact dispatch keeps the GPU fed: a host sync in it would make eager steps look slow
    for the wrong reason (the GPU idle while the host catches up), not for their work."""
    engine = RefEngine(capture=False, moe_dispatch="exact", **SMALL, **MOE)
    engine.setup(6)
    engine.step()
    ids = torch.tensor([1, 2, 3], device=engine.device)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        engine.step(ids)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert engine.step_info()["path"] == "eager" and engine.step_info()["padded_to"] == 3
