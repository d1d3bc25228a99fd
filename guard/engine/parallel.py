"""How the reference engine splits over the ranks of torch.distributed, and its collectives.

Tensor parallelism ("tp"): every rank holds its share of the attention heads (their QKV
columns, their rows of the output projection and their KV cache) and of the MLP's hidden
width (of every expert's, with MoE); an all-reduce after attention and one after the MLP sum
the ranks' partial outputs. Expert parallelism ("ep", with MoE): attention as in "tp"; every
rank holds whole experts, a share of them, and the routed tokens go to the rank of their
expert and back in two all-to-alls (dispatch and combine). The embedding, the router, the
shared expert and the LM head are whole on every rank, so every rank computes the same
tokens. Weights are seeded whole and then sliced: every rank holds the numbers one process
would. The shared expert is computed while the MLP's collective is in flight (the overlap an
engine has); `serialize_comm` starts the collective only once it is done (the overlap lost).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from .model import ModelSpec, Weights

PARALLEL_MODES = ("auto", "none", "tp", "ep")


@dataclass(frozen=True)
class Shard:
    """This rank's place: `mode` "tp" or "ep", rank `rank` of `world_size`."""

    mode: str
    rank: int
    world_size: int


def choose_shard(parallel: str, moe_experts: int) -> Shard | None:
    """The shard this process decodes as; None: the whole model, as one process does. "auto"
    is "tp" where torch.distributed has more than one rank, else none."""
    if parallel not in PARALLEL_MODES:
        raise ValueError(f"parallel must be one of {', '.join(PARALLEL_MODES)}, not {parallel!r}")
    dist = torch.distributed
    world = dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1
    if parallel == "none" or world == 1:
        return None
    mode = "tp" if parallel == "auto" else parallel
    if mode == "ep" and not moe_experts:
        raise ValueError("parallel 'ep' splits the experts over the ranks: set moe_experts too")
    return Shard(mode=mode, rank=dist.get_rank(), world_size=world)


def check_shard(spec: ModelSpec, shard: Shard) -> None:
    """Every split must be even: a clear error names what to change."""
    world = shard.world_size
    splits = {"n_heads": spec.n_heads, "ffn": spec.ffn}
    if spec.moe_experts:
        splits |= {"moe_experts": spec.moe_experts} if shard.mode == "ep" else {"moe_ffn": spec.moe_ffn}
    for name, value in splits.items():
        if value % world:
            raise ValueError(f"{name} ({value}) must divide by the world size ({world}) for parallel '{shard.mode}'")


def shard_weights(weights: Weights, spec: ModelSpec, shard: Shard) -> Weights:
    """This rank's slices of the whole model's weights (the replicated ones as they are)."""
    world, rank = shard.world_size, shard.rank

    def part(t: torch.Tensor, dim: int) -> torch.Tensor:
        size = t.shape[dim] // world
        return t.narrow(dim, rank * size, size).contiguous()

    d, heads, hd = spec.d_model, spec.n_heads, spec.head_dim
    layers = []
    for lw in weights.layers:
        mine = dict(lw)
        mine["wqkv"] = part(lw["wqkv"].view(d, 3, heads, hd), 2).view(d, -1)  # columns ordered (q/k/v, head, dim)
        mine["wo"] = part(lw["wo"], 0)
        mine["w_gate"], mine["w_up"], mine["w_down"] = part(lw["w_gate"], 1), part(lw["w_up"], 1), part(lw["w_down"], 0)
        if spec.moe_experts and shard.mode == "ep":
            for name in ("e_gate", "e_up", "e_down"):
                mine[name] = part(lw[name], 0)  # whole experts
        elif spec.moe_experts:
            mine["e_gate"], mine["e_up"] = part(lw["e_gate"], 2), part(lw["e_up"], 2)
            mine["e_down"] = part(lw["e_down"], 1)
        layers.append(mine)
    return Weights(embed=weights.embed, layers=layers, norm_f=weights.norm_f, lm_head=weights.lm_head,
                   rope_cos=weights.rope_cos, rope_sin=weights.rope_sin)


class Pending:
    """A collective in flight; wait() gives its result."""

    def __init__(self, work: Any, result: torch.Tensor) -> None:
        self.work, self.result = work, result

    def wait(self) -> torch.Tensor:
        self.work.wait()  # on a GPU: the current stream waits for the collective's, the host does not
        return self.result


class Comm:
    """The collectives of one shard, on the default process group."""

    def __init__(self, shard: Shard) -> None:
        self.shard = shard

    def all_reduce(self, t: torch.Tensor) -> torch.Tensor:
        torch.distributed.all_reduce(t)
        return t

    def start_all_reduce(self, t: torch.Tensor) -> Pending:
        return Pending(torch.distributed.all_reduce(t, async_op=True), t)

    def start_all_to_all(self, t: torch.Tensor) -> Pending:
        """Slice w of dim 0 goes to rank w; slice w of the result came from rank w."""
        out = torch.empty_like(t)
        return Pending(torch.distributed.all_to_all_single(out, t, async_op=True), out)

    def all_to_all(self, t: torch.Tensor) -> torch.Tensor:
        return self.start_all_to_all(t).wait()

    def all_gather(self, t: torch.Tensor) -> torch.Tensor:
        """Every rank's `t`, concatenated along dim 0 in rank order."""
        parts = [torch.empty_like(t) for _ in range(self.shard.world_size)]
        torch.distributed.all_gather(parts, t)
        return torch.cat(parts)
