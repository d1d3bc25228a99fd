"""Weights and the decode step of the reference transformer, written as plain tensor ops.

The step reads and writes only preallocated buffers (token, position, KV cache), so it
can be captured into a CUDA graph and replayed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from .parallel import Comm


@dataclass(frozen=True)
class ModelSpec:
    layers: int = 20
    d_model: int = 256
    n_heads: int = 4
    ffn: int = 768
    shared_ffn: int = 256
    vocab: int = 8192
    max_len: int = 1024
    seed: int = 0
    # The first `long_kv_layers` layers attend over a static KV cache of `long_kv_len`
    # positions instead of max_len, masked as usual: the same kernels, the same tokens, more
    # work in those layers' attention. A knob to make kernels slower by a chosen amount.
    long_kv_layers: int = 0
    long_kv_len: int = 2048
    # The LM head's GEMM split along d_model into this many parts whose partial logits are
    # summed in the model's dtype with atomic adds (index_add_), in an order that varies from
    # run to run on a GPU: the nondeterminism of split-K decode GEMMs, which in bf16 breaks
    # near-ties in the argmax differently from process to process. 0: one GEMM (deterministic).
    head_splits: int = 0
    # MoE: the dense MLP of every layer becomes `moe_experts` routed experts of `moe_ffn` each,
    # `moe_top_k` per token (route -> dispatch -> grouped GEMM -> combine), beside the shared
    # expert; 0: the dense MLP. The router and experts are seeded apart from the dense weights,
    # so a dense model's numbers are the same with or without this option.
    moe_experts: int = 0
    moe_top_k: int = 2
    moe_ffn: int = 384

    def kv_len(self, layer: int) -> int:
        return max(self.long_kv_len, self.max_len) if layer < self.long_kv_layers else self.max_len

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads


@dataclass
class Weights:
    embed: torch.Tensor
    layers: list[dict[str, torch.Tensor]]
    norm_f: torch.Tensor
    lm_head: torch.Tensor
    rope_cos: torch.Tensor
    rope_sin: torch.Tensor


def init_weights(spec: ModelSpec, device: torch.device, dtype: torch.dtype) -> Weights:
    """Seeded on the CPU, then moved, so every device and process gets the same numbers."""
    gen = torch.Generator().manual_seed(spec.seed)

    def rand(*shape: int, fan_in: int) -> torch.Tensor:
        w = torch.randn(*shape, generator=gen, dtype=torch.float32) / math.sqrt(fan_in)
        return w.to(device=device, dtype=dtype)

    d, f, s = spec.d_model, spec.ffn, spec.shared_ffn
    layers = []
    for _ in range(spec.layers):
        layers.append(
            {
                "ln1": torch.ones(d, device=device, dtype=dtype),
                "wqkv": rand(d, 3 * d, fan_in=d),
                "wo": rand(d, d, fan_in=d),
                "ln2": torch.ones(d, device=device, dtype=dtype),
                "w_gate": rand(d, f, fan_in=d),
                "w_up": rand(d, f, fan_in=d),
                "w_down": rand(f, d, fan_in=f),
                "s_gate": rand(d, s, fan_in=d),
                "s_up": rand(d, s, fan_in=d),
                "s_down": rand(s, d, fan_in=s),
            }
        )
    if spec.moe_experts:
        moe_gen = torch.Generator().manual_seed(spec.seed + 1)
        e, m = spec.moe_experts, spec.moe_ffn
        for lw in layers:
            for name, shape, fan_in in (("router", (d, e), d), ("e_gate", (e, d, m), d), ("e_up", (e, d, m), d),
                                        ("e_down", (e, m, d), m)):
                w = torch.randn(*shape, generator=moe_gen, dtype=torch.float32) / math.sqrt(fan_in)
                lw[name] = w.to(device=device, dtype=dtype)
    half = spec.head_dim // 2
    inv_freq = 1.0 / (10000 ** (torch.arange(half, dtype=torch.float32) / half))
    angles = torch.outer(torch.arange(spec.max_len, dtype=torch.float32), inv_freq)
    return Weights(
        embed=rand(spec.vocab, d, fan_in=1),
        layers=layers,
        norm_f=torch.ones(d, device=device, dtype=dtype),
        lm_head=rand(d, spec.vocab, fan_in=d),
        rope_cos=torch.cat([angles.cos(), angles.cos()], dim=-1).to(device=device, dtype=dtype),
        rope_sin=torch.cat([angles.sin(), angles.sin()], dim=-1).to(device=device, dtype=dtype),
    )


@dataclass
class DecodeState:
    """Everything one decode step reads and writes, allocated once per batch size."""

    token: torch.Tensor  # [B] int64: input of the next step, then its output
    pos: torch.Tensor  # [1] int64: position the next token is written at
    k_cache: list[torch.Tensor]  # per layer [B, H, T_layer, hd]
    v_cache: list[torch.Tensor]
    positions: torch.Tensor  # [T_max] int64, for the causal mask (each layer takes its first T_layer)
    # a view of the first rows of a larger batch, of which only the first `active` are this
    # step's (the rest pad a captured size): padding rows keep their cache and token as they were
    active: torch.Tensor | None = None  # [1] int64
    row_ids: torch.Tensor | None = None  # [B] int64

    def rows(self, count: int, active: torch.Tensor | None = None) -> DecodeState:
        """The first `count` rows, sharing this state's buffers; `active` masks the padding rows."""
        return DecodeState(
            token=self.token[:count], pos=self.pos, k_cache=[c[:count] for c in self.k_cache],
            v_cache=[c[:count] for c in self.v_cache], positions=self.positions, active=active,
            row_ids=torch.arange(count, device=self.token.device) if active is not None else None,
        )

    def keep(self) -> torch.Tensor | None:
        """[B] bool: the rows this step is for; None: every row."""
        if self.active is None or self.row_ids is None:
            return None
        return self.row_ids < self.active

    @classmethod
    def empty(
        cls, spec: ModelSpec, batch: int, device: torch.device, dtype: torch.dtype, heads: int | None = None
    ) -> DecodeState:
        """`heads`: the attention heads this process holds (a tensor-parallel rank's share)."""
        def cache(layer: int) -> torch.Tensor:
            return torch.zeros((batch, heads or spec.n_heads, spec.kv_len(layer), spec.head_dim), device=device,
                               dtype=dtype)

        return cls(
            token=torch.zeros(batch, dtype=torch.int64, device=device),
            pos=torch.zeros(1, dtype=torch.int64, device=device),
            k_cache=[cache(i) for i in range(spec.layers)],
            v_cache=[cache(i) for i in range(spec.layers)],
            positions=torch.arange(max([spec.max_len, *(spec.kv_len(i) for i in range(spec.layers))]), device=device),
        )

    def reset(self) -> None:
        self.token.zero_()
        self.pos.zero_()
        for cache in (*self.k_cache, *self.v_cache):
            cache.zero_()


def _rms_norm(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * weight


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos + rotated * sin


class Decoder:
    """The decode step split into pieces (embed, one per layer, head) so that a caller
    can capture the whole step as one graph or each piece as its own."""

    def __init__(
        self, spec: ModelSpec, weights: Weights, side_stream: torch.cuda.Stream | None, comm: Comm | None = None,
        serialize_comm: bool = False,
    ) -> None:
        self.spec = spec
        self.w = weights
        # a rank of a tensor- or expert-parallel model (parallel.py): its share of the heads, and
        # the collectives that join the ranks' shares; None: the whole model in this process
        self.comm = comm
        self.heads = spec.n_heads // (comm.shard.world_size if comm is not None else 1)
        # the MLP's collective starts only once the shared expert is computed: no overlap left
        self.serialize_comm = serialize_comm
        # The shared-expert MLP runs on a second stream, as MoE engines do, so a captured
        # graph holds kernels of more than one stream.
        self.side_stream = side_stream
        # how routed experts are computed: "capacity", every expert padded to a static capacity
        # (what a graph replays: every expert's weights read, E x B rows), or "exact", each token
        # on exactly its top-k experts (B x k rows, each through its routed expert's weights alone)
        self.dispatch = "capacity"
        self.loads: torch.Tensor | None = None  # [E] int64: tokens per expert this step, over the layers
        self.last_logits: torch.Tensor | None = None  # [B, vocab]: the last head's, in a graph's pool when captured

    def moe(self, h: torch.Tensor, lw: dict[str, torch.Tensor], keep: torch.Tensor | None) -> torch.Tensor:
        """Route -> dispatch -> grouped GEMM -> combine. Both dispatches compute each token's
        experts on the same rows and combine its top-k in the same order: the same function."""
        spec = self.spec
        batch, experts, top_k = h.shape[0], spec.moe_experts, spec.moe_top_k
        weight, chosen, onehot = self._route(h, lw, keep)
        expert = chosen.reshape(-1)  # [B * k], token-major
        token = torch.arange(batch * top_k, device=h.device) // top_k  # no host sync: capturable
        if self.dispatch == "capacity":
            # every expert gets `batch` slots (no token is ever dropped: top-k picks distinct experts)
            slot = (onehot.cumsum(0) - 1).gather(1, expert.unsqueeze(1)).squeeze(1)
            grid = torch.zeros(experts, batch, h.shape[1], device=h.device, dtype=h.dtype)
            grid.index_put_((expert, slot), h.index_select(0, token))  # dispatch
            out = torch.nn.functional.silu(grid @ lw["e_gate"]) * (grid @ lw["e_up"])  # grouped GEMM
            out = out @ lw["e_down"]
            picked = out[expert, slot]  # combine
        else:
            # each (token, choice) pair through its own expert's weights, gathered: exactly the routed
            # work, without the host sync that splitting rows by expert would need (a sync leaves
            # the GPU idle while the host catches up, which is not what an exact kernel costs)
            x = h.index_select(0, token).unsqueeze(1)  # [B * k, 1, d]
            gate, up, down = (lw[name].index_select(0, expert) for name in ("e_gate", "e_up", "e_down"))
            picked = ((torch.nn.functional.silu(x @ gate) * (x @ up)) @ down).squeeze(1)
        return (picked * weight.reshape(-1, 1)).view(batch, top_k, -1).sum(1)

    def _route(
        self, h: torch.Tensor, lw: dict[str, torch.Tensor], keep: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Each token's top-k experts and their weights ([B, k] each), and the one-hot of its
        choices ([B * k, E]); the real rows' choices counted into `loads`."""
        batch, experts, top_k = h.shape[0], self.spec.moe_experts, self.spec.moe_top_k
        weight, chosen = (h @ lw["router"]).topk(top_k, dim=-1)  # route: [B, k]
        weight = weight.softmax(-1)
        onehot = torch.nn.functional.one_hot(chosen.reshape(-1), experts)  # [B * k, E]
        real = onehot if keep is None else onehot * keep.unsqueeze(1).expand(batch, top_k).reshape(-1, 1)
        if self.loads is not None:
            self.loads.add_(real.sum(0))
        return weight, chosen, onehot

    def _expert_parallel_moe(
        self, h: torch.Tensor, lw: dict[str, torch.Tensor], keep: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Expert parallelism: every rank routes the whole batch (the router is whole), takes its
        share of the tokens (the batch padded to a multiple of the ranks), dispatches them to the
        ranks of their experts in an all-to-all, computes its own experts over what it received
        (each expert to capacity: a slot per token of every rank), combines in another all-to-all
        and gathers every rank's tokens. (routed output, shared expert's output)."""
        assert self.comm is not None
        spec, world, rank = self.spec, self.comm.shard.world_size, self.comm.shard.rank
        batch, width, experts, top_k = h.shape[0], h.shape[1], spec.moe_experts, spec.moe_top_k
        local = experts // world
        weight, chosen, _ = self._route(h, lw, keep)
        rows = -(-batch // world)  # tokens per rank
        pad = rows * world - batch
        tokens = h
        if pad:  # padding tokens pick distinct experts at weight 0, so no two share a slot
            tokens = torch.cat([h, h.new_zeros(pad, width)])
            chosen = torch.cat([chosen, torch.arange(top_k, device=h.device).expand(pad, top_k)])
            weight = torch.cat([weight, weight.new_zeros(pad, top_k)])
        mine = slice(rank * rows, (rank + 1) * rows)
        expert = chosen[mine].reshape(-1)  # [rows * k]
        token = torch.arange(rows * top_k, device=h.device) // top_k
        grid = torch.zeros(experts, rows, width, device=h.device, dtype=h.dtype)  # token t's slot at any expert: t
        grid.index_put_((expert, token), tokens[mine].index_select(0, token))
        if self.serialize_comm:
            shared = self._shared_mlp(h, lw)
            self._join_side()
            received = self.comm.start_all_to_all(grid).wait()
        else:
            dispatch = self.comm.start_all_to_all(grid)  # slice w (rank w's experts) to rank w
            shared = self._shared_mlp(h, lw)  # while the dispatch is in flight
            received = dispatch.wait()
        x = received.view(world, local, rows, width).transpose(0, 1).reshape(local, world * rows, width)
        out = (torch.nn.functional.silu(x @ lw["e_gate"]) * (x @ lw["e_up"])) @ lw["e_down"]
        back = out.view(local, world, rows, width).transpose(0, 1).contiguous()  # slice w: rank w's tokens
        combined = self.comm.all_to_all(back).view(experts, rows, width)  # every expert's output, rank order
        picked = combined[expert, token]
        routed = (picked * weight[mine].reshape(-1, 1)).view(rows, top_k, -1).sum(1)
        return self.comm.all_gather(routed)[:batch], shared

    def _parallel_mlp(
        self, h: torch.Tensor, lw: dict[str, torch.Tensor], keep: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """A rank's MLP: (routed or dense output summed over the ranks, shared expert's output).
        Tensor parallel: this rank's partial sum, all-reduced while the shared expert is computed
        (with serialize_comm, after it)."""
        assert self.comm is not None
        if self.comm.shard.mode == "ep":
            return self._expert_parallel_moe(h, lw, keep)
        partial = self.moe(h, lw, keep) if self.spec.moe_experts else self._dense(h, lw)
        if self.serialize_comm:
            shared = self._shared_mlp(h, lw)
            self._join_side()  # the collective is queued behind the shared expert
            return self.comm.all_reduce(partial), shared
        pending = self.comm.start_all_reduce(partial)
        shared = self._shared_mlp(h, lw)  # on a GPU: on the side stream, beside the all-reduce
        return pending.wait(), shared

    def _dense(self, h: torch.Tensor, lw: dict[str, torch.Tensor]) -> torch.Tensor:
        return (torch.nn.functional.silu(h @ lw["w_gate"]) * (h @ lw["w_up"])) @ lw["w_down"]

    def _join_side(self) -> None:
        if self.side_stream is not None:
            torch.cuda.current_stream().wait_stream(self.side_stream)

    def embed(self, state: DecodeState) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        if self.loads is not None:
            self.loads.zero_()  # inside the step, so a graph replays it too
        x = self.w.embed.index_select(0, state.token)
        cos = self.w.rope_cos.index_select(0, state.pos).view(1, 1, -1)
        sin = self.w.rope_sin.index_select(0, state.pos).view(1, 1, -1)
        mask = state.positions <= state.pos  # [T]
        return x, cos, sin, mask

    def layer(
        self, i: int, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, mask: torch.Tensor, state: DecodeState
    ) -> torch.Tensor:
        spec, lw = self.spec, self.w.layers[i]
        batch = x.shape[0]
        h = _rms_norm(x, lw["ln1"])
        q, k, v = (h @ lw["wqkv"]).view(batch, 3, self.heads, spec.head_dim).unbind(1)
        q, k = _rotate(q, cos, sin), _rotate(k, cos, sin)
        keep = state.keep()
        if keep is not None:  # padding rows write back what their cache held at this position
            rows = keep.view(batch, 1, 1)
            k = torch.where(rows, k, state.k_cache[i].index_select(2, state.pos).squeeze(2))
            v = torch.where(rows, v, state.v_cache[i].index_select(2, state.pos).squeeze(2))
        state.k_cache[i].index_copy_(2, state.pos, k.unsqueeze(2))
        state.v_cache[i].index_copy_(2, state.pos, v.unsqueeze(2))
        scores = (q.unsqueeze(2) @ state.k_cache[i].transpose(-1, -2)) * (spec.head_dim**-0.5)
        kv_len = state.k_cache[i].shape[2]
        scores = scores.masked_fill(~mask[:kv_len], float("-inf"))
        attn = (scores.softmax(-1) @ state.v_cache[i]).reshape(batch, self.heads * spec.head_dim)
        out = attn @ lw["wo"]
        x = x + (out if self.comm is None else self.comm.all_reduce(out))  # a rank's heads: a partial sum
        h = _rms_norm(x, lw["ln2"])
        if self.comm is not None:
            dense, shared = self._parallel_mlp(h, lw, keep)
            self._join_side()
            return x + dense + shared
        shared = self._shared_mlp(h, lw)
        if spec.moe_experts:
            dense = self.moe(h, lw, keep)
        else:
            dense = self._dense(h, lw)
        self._join_side()
        return x + dense + shared

    def _shared_mlp(self, h: torch.Tensor, lw: dict[str, torch.Tensor]) -> torch.Tensor:
        if self.side_stream is None:
            return (torch.nn.functional.silu(h @ lw["s_gate"]) * (h @ lw["s_up"])) @ lw["s_down"]
        self.side_stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.side_stream):
            return (torch.nn.functional.silu(h @ lw["s_gate"]) * (h @ lw["s_up"])) @ lw["s_down"]

    def head(self, x: torch.Tensor, state: DecodeState) -> None:
        h = _rms_norm(x, self.w.norm_f)
        splits = self.spec.head_splits
        if splits:
            batch, width = h.shape
            parts = h.view(batch, splits, width // splits).transpose(0, 1)  # [splits, B, d / splits]
            partial = parts @ self.w.lm_head.view(splits, width // splits, -1)  # [splits, B, vocab]
            logits = torch.zeros(batch, partial.shape[-1], device=h.device, dtype=h.dtype)
            rows = torch.arange(batch, device=h.device).repeat(splits)
            logits.index_add_(0, rows, partial.reshape(splits * batch, -1))
        else:
            logits = h @ self.w.lm_head
        self.last_logits = logits  # kept, not copied: what step_logits() reads, at no extra kernel
        keep = state.keep()
        chosen = logits.argmax(-1)
        state.token.copy_(chosen if keep is None else torch.where(keep, chosen, state.token))
        state.pos.add_(1)

    def step(self, state: DecodeState) -> None:
        x, cos, sin, mask = self.embed(state)
        for i in range(self.spec.layers):
            x = self.layer(i, x, cos, sin, mask, state)
        self.head(x, state)
