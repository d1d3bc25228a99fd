"""One rank of the reference engine's parallel tests (tests/test_engine_parallel.py), started
once per rank by tests/gloo_ranks.py: it decodes every case and writes what it saw as JSON.

Usage: python engine_ranks.py OUT_DIR
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from guard.engine import RefEngine

SPEC = {"layers": 2, "d_model": 64, "n_heads": 4, "ffn": 96, "shared_ffn": 40, "vocab": 512, "max_len": 64,
        "prompt_len": 8}
MOE = {"moe_experts": 4, "moe_top_k": 2, "moe_ffn": 48}
STEPS = 10
# (name, engine options, batch size)
CASES: list[tuple[str, dict[str, Any], int]] = [
    ("tp", {}, 3),
    ("tp_moe", MOE, 3),
    ("tp_moe_exact", MOE | {"moe_dispatch": "exact"}, 2),
    ("ep", MOE | {"parallel": "ep"}, 3),  # 3 rows over 2 ranks: one padding token
    ("ep_one_row", MOE | {"parallel": "ep"}, 1),
    ("tp_serialized", {"serialize_comm": True}, 3),
    ("ep_serialized", MOE | {"parallel": "ep", "serialize_comm": True}, 3),
    ("eager_rank", {"eager_rank": 1}, 2),
]


def decode(engine: RefEngine, batch_size: int) -> dict[str, Any]:
    engine.setup(batch_size)
    tokens = [engine.step().tolist() for _ in range(STEPS)]
    assert engine.state is not None
    return {"tokens": tokens, "k_cache": engine.state.k_cache[-1].tolist(), "described": engine.describe()}


def op_order(options: dict[str, Any], batch_size: int) -> list[str]:
    """The CPU ops of one decode step, in the order they started: matmuls named by their
    weight's width, collectives by name."""
    from torch.profiler import ProfilerActivity, profile

    engine = RefEngine(device="cpu", **SPEC, **options)
    engine.setup(batch_size)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        engine.step()
    names = []
    for event in sorted(prof.events(), key=lambda e: e.time_range.start):
        if event.name == "aten::mm" and len(event.input_shapes) == 2:
            names.append(f"mm:{event.input_shapes[1][-1]}")
        elif event.name.startswith("c10d::") and "barrier" not in event.name:
            names.append(event.name)
    return names


def main(out_dir: Path) -> int:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    found: dict[str, Any] = {"world_size": dist.get_world_size()}
    for name, options, batch_size in CASES:
        found[name] = decode(RefEngine(device="cpu", **SPEC, **options), batch_size)
    for name, options in (("tp", {}), ("ep", MOE | {"parallel": "ep"})):
        found[f"order_{name}"] = op_order(options, 1)
        found[f"order_{name}_serialized"] = op_order(options | {"serialize_comm": True}, 1)
    dist.barrier()
    (out_dir / f"rank{rank}.json").write_text(json.dumps(found))
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(Path(sys.argv[1])))
