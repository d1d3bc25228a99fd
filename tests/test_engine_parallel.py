"""The reference engine on several ranks: two real gloo processes on this CPU decode what one
process decodes, tensor parallel and expert parallel, and the injections take effect."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from guard.engine import RefEngine
from guard.engine.parallel import Shard, check_shard, choose_shard
from tests.engine_ranks import CASES, MOE, SPEC, decode
from tests.gloo_ranks import run_ranks

RANKS_SCRIPT = Path(__file__).with_name("engine_ranks.py")
INJECTIONS = ("parallel", "serialize_comm", "eager_rank")


@pytest.fixture(scope="module")
def ranks(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    out = tmp_path_factory.mktemp("engine-ranks")
    for proc in run_ranks(RANKS_SCRIPT, 2, str(out)):
        assert proc.returncode == 0, proc.stderr
    return [json.loads((out / f"rank{rank}.json").read_text()) for rank in range(2)]


@pytest.mark.slow
@pytest.mark.parametrize("case", [c[0] for c in CASES])
def test_each_rank_decodes_the_tokens_of_one_process(ranks: list[dict[str, Any]], case: str) -> None:
    _, options, batch_size = next(c for c in CASES if c[0] == case)
    whole = decode(RefEngine(device="cpu", **SPEC, **{k: v for k, v in options.items() if k not in INJECTIONS}),
                   batch_size)
    assert ranks[0]["world_size"] == 2
    assert ranks[0][case]["tokens"] == ranks[1][case]["tokens"] == whole["tokens"]
    assert len({tuple(row) for row in whole["tokens"]}) > 1  # it decodes, not a constant
    # each rank holds its half of the heads of the last layer's cache, as the one process computed them
    cache = torch.tensor(whole["k_cache"])
    heads = SPEC["n_heads"] // 2
    for rank in range(2):
        mine = torch.tensor(ranks[rank][case]["k_cache"])
        assert mine.shape[1] == heads
        torch.testing.assert_close(mine, cache[:, rank * heads:(rank + 1) * heads], rtol=1e-5, atol=1e-5)
    assert not torch.equal(torch.tensor(ranks[0][case]["k_cache"]), torch.tensor(ranks[1][case]["k_cache"]))


@pytest.mark.slow
def test_ranks_say_how_they_split(ranks: list[dict[str, Any]]) -> None:
    for rank in range(2):
        described = ranks[rank]["tp"]["described"]
        assert (described["parallel"], described["rank"], described["world_size"]) == ("tp", rank, 2)
        assert ranks[rank]["ep"]["described"]["parallel"] == "ep"
        assert ranks[rank]["tp_serialized"]["described"]["serialize_comm"] is True
    # the graph fallback on one rank: only that rank says it fell out (on a CPU every rank is eager)
    assert [r["eager_rank"]["described"]["eager_injected"] for r in ranks] == [False, True]


def _runs(order: list[str], pattern: list[str]) -> int:
    return sum(order[i:i + len(pattern)] == pattern for i in range(len(order)))


@pytest.mark.slow
@pytest.mark.parametrize("mode, collective", [("tp", "c10d::allreduce_"), ("ep", "c10d::alltoall_base_")])
def test_serialize_comm_starts_the_mlp_collective_only_after_the_shared_expert(
    ranks: list[dict[str, Any]], mode: str, collective: str
) -> None:
    shared = f"mm:{SPEC['shared_ffn']}"  # the shared expert's gate and up projections
    layers = SPEC["layers"]
    for found in ranks:
        overlapped, serialized = found[f"order_{mode}"], found[f"order_{mode}_serialized"]
        # overlapped: the collective is launched, the shared expert computed while it is in flight
        assert _runs(overlapped, [collective, shared, shared]) == layers
        # serialized: the shared expert is done (gate, up, down) before the collective starts
        assert _runs(serialized, [collective, shared]) == 0
        assert _runs(serialized, [shared, shared, f"mm:{SPEC['d_model']}"]) == layers
        after = serialized.index(shared)
        assert collective in serialized[after:]
        assert sorted(overlapped) == sorted(serialized)  # the same ops, in another order


def test_one_process_is_the_whole_model_whatever_the_option() -> None:
    assert choose_shard("tp", 0) is None and choose_shard("auto", 0) is None  # no torch.distributed here
    plain = RefEngine(device="cpu", **SPEC)
    asked = RefEngine(device="cpu", parallel="tp", serialize_comm=True, **SPEC)
    assert asked.decoder.comm is None and "parallel" not in asked.describe()
    assert decode(plain, 2)["tokens"] == decode(asked, 2)["tokens"]
    with pytest.raises(ValueError, match="parallel must be one of auto, none, tp, ep"):
        RefEngine(device="cpu", parallel="pp", **SPEC)


def test_uneven_splits_are_refused_with_what_to_change() -> None:
    from guard.engine.model import ModelSpec

    check_shard(ModelSpec(n_heads=4, ffn=96), Shard("tp", 0, 2))
    with pytest.raises(ValueError, match=r"n_heads \(4\) must divide by the world size \(3\)"):
        check_shard(ModelSpec(n_heads=4, ffn=96), Shard("tp", 0, 3))
    with pytest.raises(ValueError, match=r"moe_experts \(6\) must divide by the world size \(4\)"):
        check_shard(ModelSpec(n_heads=4, ffn=96, moe_experts=6), Shard("ep", 0, 4))
    check_shard(ModelSpec(n_heads=4, ffn=96, **{k: v for k, v in MOE.items() if k != "moe_top_k"}), Shard("ep", 1, 2))
