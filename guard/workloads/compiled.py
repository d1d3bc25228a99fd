"""A Llama-like decoder written for torch.compile, as a guard workload: `guard.workloads.compiled:make`.

The decode step is one function, `decode_one_token(tokens, pos)`, compiled with
`torch.compile` on a GPU (mode "reduce-overhead" captures it as CUDA graphs) and run
eagerly on a CPU. Weights are seeded on the CPU and then moved, so every process of every
arm decodes with the same numbers.

This file imports only the standard library and torch, and nothing of the guard: it can be
copied into a repository as one file, which validation does before committing changes to it.
"""

from __future__ import annotations

import hashlib
import inspect
import math
import os
from dataclasses import dataclass
from typing import Iterable

import torch
import torch.nn.functional as F
from torch import nn

# How decode is compiled: a torch.compile mode, or "none" for eager. A commit that changes
# this default changes how decode is captured, which is what the guard is there to see.
COMPILE_MODE = os.environ.get("GUARD_COMPILE_MODE", "reduce-overhead")
MODES = ("reduce-overhead", "default", "max-autotune", "max-autotune-no-cudagraphs", "none")
GRAPH_MODES = ("reduce-overhead", "max-autotune")  # the modes that capture CUDA graphs
DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}
PROMPT_SEED = 1234
WARMUP_CALLS = 3  # with CUDA graphs: a warm-up run, the recording, a first replay


# -- shared by both built-in workloads ---------------------------------------------------


def check_options(target: object, options: dict[str, object], entry: str) -> None:
    """A misspelt option is a ValueError naming the options there are, not a TypeError."""
    known = [name for name in inspect.signature(target).parameters if name != "self"]
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise ValueError(f"{entry}: unknown option(s) {', '.join(unknown)}; its options are {', '.join(known)}")


def positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, not {value!r}")
    return value


def parse_dtype(value: object) -> torch.dtype:
    if value not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, not {value!r}")
    return DTYPES[value]  # type: ignore[index]


def parse_mode(value: object) -> str:
    if value not in MODES:
        raise ValueError(
            f"mode must be one of {', '.join(MODES)}, not {value!r} (the default comes from GUARD_COMPILE_MODE)"
        )
    return value  # type: ignore[return-value]


def pick_device(device: object) -> torch.device:
    try:
        chosen = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))  # type: ignore[arg-type]
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"device must name a torch device such as 'cuda' or 'cpu', not {device!r}") from exc
    if chosen.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {device!r} asks for CUDA, which this torch ({torch.__version__}) cannot use")
    if chosen.type == "cpu":
        # One thread: small eager ops gain nothing from more, and spinning worker threads
        # make CPU timings swing when the machine is shared.
        torch.set_num_threads(1)
    return chosen


def seeded_prompt(batch_size: int, prompt_len: int, vocab: int, seed: int) -> torch.Tensor:
    """[batch_size, prompt_len] ids; row i is the same whatever the batch size and process."""
    rows = []
    for row in range(batch_size):
        gen = torch.Generator().manual_seed(PROMPT_SEED + 1_000_003 * seed + row)
        rows.append(torch.randint(vocab, (prompt_len,), generator=gen))
    return torch.stack(rows)


def weights_checksum(named_tensors: Iterable[tuple[str, torch.Tensor]]) -> str:
    """16 hex digits over every tensor's name, shape, dtype and bits. The bits are summed as
    integers (plainly and weighted by position), which is exact on any device in any order."""
    as_int = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
    digest = hashlib.sha256()
    for name, tensor in named_tensors:
        flat = tensor.detach().contiguous().view(-1)
        bits = flat.view(as_int[flat.element_size()]).to(torch.int64)
        weights = torch.arange(bits.numel(), device=bits.device) % 65521 + 1
        sums = torch.stack([bits.sum(), (bits * weights).sum()]).tolist()
        digest.update(f"{name}:{tuple(tensor.shape)}:{tensor.dtype}:{sums};".encode())
    return digest.hexdigest()[:16]


def fill_seeded(module: nn.Module, seed: int) -> None:
    """Every parameter from one seeded generator on the device the parameters are on: norms 1,
    biases 0, embeddings N(0, 1), matrices N(0, 1/fan_in). Logits then have unit scale, so greedy
    picks are rarely near-ties. Drawn in float32 where the parameters live, not on the host
    (whose generator took 2.5 s of a process for 4 layers of 1024 on a 2-core CPU); a device's
    draws are its own, the same in every process on one kind of device."""
    device = next(module.parameters()).device
    gen = torch.Generator(device=device).manual_seed(seed)
    with torch.no_grad():
        for name, param in module.named_parameters():
            if param.ndim == 1:
                param.fill_(0.0 if name.endswith("bias") else 1.0)
            else:
                scale = 1.0 if "embed" in name else 1.0 / math.sqrt(param.shape[-1])
                param.copy_(torch.randn(param.shape, generator=gen, device=device) * scale)


@dataclass(frozen=True)
class DecodeSettings:
    """The options both built-in workloads share, checked: how and where decode runs."""

    prompt_len: int
    seed: int
    dtype: torch.dtype
    device: torch.device
    mode: str
    fullgraph: bool
    compiled: bool  # torch.compile runs (on a CPU only when asked: inductor's C++ backend, no graphs)
    cuda_graphs: bool  # the mode captures CUDA graphs and the device has them


def decode_settings(
    prompt_len: int, max_len: int, seed: int, dtype: object, device: object, mode: str | None, fullgraph: bool,
    compile_on_cpu: bool,
) -> DecodeSettings:
    positive_int("max_len", max_len)
    positive_int("prompt_len", prompt_len)
    if prompt_len >= max_len:
        raise ValueError(f"prompt_len ({prompt_len}) must be less than max_len ({max_len})")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be an integer of 0 or more, not {seed!r}")
    chosen = pick_device(device)
    chosen_mode = parse_mode(mode or COMPILE_MODE)
    compiled = chosen_mode != "none" and (chosen.type == "cuda" or bool(compile_on_cpu))
    return DecodeSettings(
        prompt_len=prompt_len, seed=seed, dtype=parse_dtype(dtype), device=chosen, mode=chosen_mode,
        fullgraph=bool(fullgraph), compiled=compiled,
        cuda_graphs=compiled and chosen.type == "cuda" and chosen_mode in GRAPH_MODES,
    )


def next_input(
    input_ids: torch.Tensor, last: torch.Tensor, tokens: torch.Tensor | None, position: int, max_len: int,
    prompt_len: int, cache: str,
) -> None:
    """Write the next step's input into the static buffer the decode reads: the forced ids, or,
    free-running, the last output. Past the static cache, a message that says what to change."""
    if position >= max_len:
        raise RuntimeError(
            f"decoded past max_len={max_len}: the {cache} holds the {prompt_len}-token prompt and "
            f"{max_len - prompt_len} steps; pass a larger max_len in the workload options"
        )
    if tokens is None:
        input_ids.copy_(last)
        return
    if tuple(tokens.shape) != tuple(input_ids.shape):
        raise ValueError(f"step(tokens): expected {input_ids.shape[0]} ids, got shape {tuple(tokens.shape)}")
    input_ids.copy_(tokens)  # copied, not kept: the caller's tensor is a view of its own


# -- the model -------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelArgs:
    layers: int = 8
    d_model: int = 1024
    n_heads: int = 16
    ffn: int = 2816
    vocab: int = 32000
    max_len: int = 1024
    rope_base: float = 10000.0
    norm_eps: float = 1e-6  # as transformers' Llama, whose parameter order this model shares

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    def check(self) -> None:
        for name in ("layers", "d_model", "n_heads", "ffn", "vocab", "max_len"):
            positive_int(name, getattr(self, name))
        if self.d_model % self.n_heads or self.head_dim % 2:
            raise ValueError(
                f"d_model ({self.d_model}) must be n_heads ({self.n_heads}) times an even head size, "
                "for the rotary embedding"
            )


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x32 = x.float()
        return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)).type_as(x) * self.weight


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x: [batch, seq, heads, head_dim]; cos, sin: [seq, head_dim / 2], in float32."""
    x1, x2 = x.float().chunk(2, dim=-1)
    cos, sin = cos[:, None, :], sin[:, None, :]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1).type_as(x)


class Attention(nn.Module):
    def __init__(self, args: ModelArgs) -> None:
        super().__init__()
        self.n_heads, self.head_dim = args.n_heads, args.head_dim
        self.wqkv = nn.Linear(args.d_model, 3 * args.d_model, bias=False)
        self.wo = nn.Linear(args.d_model, args.d_model, bias=False)
        # [batch, heads, max_len, head_dim], set per batch size by Transformer.use_caches
        self.k_cache: torch.Tensor | None = None
        self.v_cache: torch.Tensor | None = None

    def forward(
        self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, pos: torch.Tensor, mask: torch.Tensor
    ) -> torch.Tensor:
        assert self.k_cache is not None and self.v_cache is not None
        batch, seq, width = x.shape
        q, k, v = self.wqkv(x).view(batch, seq, 3, self.n_heads, self.head_dim).unbind(2)
        q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        self.k_cache.index_copy_(2, pos, k)
        self.v_cache.index_copy_(2, pos, v)
        # Attends over the whole static cache, the positions not yet written masked out.
        y = F.scaled_dot_product_attention(q, self.k_cache, self.v_cache, attn_mask=mask)
        return self.wo(y.transpose(1, 2).reshape(batch, seq, width))


class FeedForward(nn.Module):
    """SwiGLU: w2(silu(w1 x) * w3 x)."""

    def __init__(self, args: ModelArgs) -> None:
        super().__init__()
        self.w1 = nn.Linear(args.d_model, args.ffn, bias=False)
        self.w3 = nn.Linear(args.d_model, args.ffn, bias=False)
        self.w2 = nn.Linear(args.ffn, args.d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    def __init__(self, args: ModelArgs) -> None:
        super().__init__()
        self.attention_norm = RMSNorm(args.d_model, args.norm_eps)
        self.attention = Attention(args)
        self.ffn_norm = RMSNorm(args.d_model, args.norm_eps)
        self.feed_forward = FeedForward(args)

    def forward(
        self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, pos: torch.Tensor, mask: torch.Tensor
    ) -> torch.Tensor:
        x = x + self.attention(self.attention_norm(x), cos, sin, pos, mask)
        return x + self.feed_forward(self.ffn_norm(x))


class Transformer(nn.Module):
    def __init__(self, args: ModelArgs) -> None:
        super().__init__()
        self.args = args
        self.tok_embeddings = nn.Embedding(args.vocab, args.d_model)
        self.layers = nn.ModuleList(Block(args) for _ in range(args.layers))
        self.norm = RMSNorm(args.d_model, args.norm_eps)
        self.output = nn.Linear(args.d_model, args.vocab, bias=False)
        self.rope_cos: torch.Tensor | None = None  # [max_len, head_dim / 2] float32, set by set_rope
        self.rope_sin: torch.Tensor | None = None
        self.positions: torch.Tensor | None = None  # [max_len] int64

    def set_rope(self, device: torch.device) -> None:
        """Rotary tables in float32, computed on the CPU (the same numbers on every device)."""
        args = self.args
        half = args.head_dim // 2
        inv_freq = 1.0 / (args.rope_base ** (torch.arange(half, dtype=torch.float32) / half))
        angles = torch.outer(torch.arange(args.max_len, dtype=torch.float32), inv_freq)
        self.rope_cos, self.rope_sin = angles.cos().to(device), angles.sin().to(device)
        self.positions = torch.arange(args.max_len, device=device)

    def use_caches(self, k_caches: list[torch.Tensor], v_caches: list[torch.Tensor]) -> None:
        for layer, k_cache, v_cache in zip(self.layers, k_caches, v_caches):
            layer.attention.k_cache, layer.attention.v_cache = k_cache, v_cache

    def forward(self, tokens: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        """tokens: [batch, seq] ids written at positions pos ([seq]); returns [batch, seq, vocab] logits."""
        assert self.rope_cos is not None and self.rope_sin is not None and self.positions is not None
        mask = (self.positions[None, :] <= pos[:, None])[None, None]  # [1, 1, seq, max_len]: causal over the cache
        cos, sin = self.rope_cos[pos], self.rope_sin[pos]
        x = self.tok_embeddings(tokens)
        for layer in self.layers:
            x = layer(x, cos, sin, pos, mask)
        return self.output(self.norm(x))


def build_model(args: ModelArgs, seed: int, device: torch.device, dtype: torch.dtype) -> Transformer:
    """Made on the meta device (no throwaway init), then filled from the seed on `device`."""
    with torch.device("meta"):
        model = Transformer(args)
    model.to_empty(device=device)
    fill_seeded(model, seed)
    model.to(dtype=dtype)
    model.set_rope(device)
    return model.eval().requires_grad_(False)


# -- the workload ------------------------------------------------------------------------


@dataclass
class DecodeState:
    """What one batch size's decode steps read and write, allocated once and reused."""

    k_caches: list[torch.Tensor]
    v_caches: list[torch.Tensor]
    input_ids: torch.Tensor  # [batch] the next step's input, copied in before each step
    pos: torch.Tensor  # [1] the position the next step writes at
    last: torch.Tensor  # [batch] the last step's output: the next input when free-running

    @classmethod
    def empty(cls, args: ModelArgs, batch_size: int, device: torch.device, dtype: torch.dtype) -> DecodeState:
        def cache() -> torch.Tensor:
            return torch.zeros(batch_size, args.n_heads, args.max_len, args.head_dim, device=device, dtype=dtype)

        state = cls(
            k_caches=[cache() for _ in range(args.layers)],
            v_caches=[cache() for _ in range(args.layers)],
            input_ids=torch.zeros(batch_size, dtype=torch.int64, device=device),
            pos=torch.zeros(1, dtype=torch.int64, device=device),
            last=torch.zeros(batch_size, dtype=torch.int64, device=device),
        )
        for tensor in state.tensors():
            # Fixed addresses for CUDA graphs, and fixed shapes: a second batch size compiles
            # a second static graph instead of turning the first into a dynamic-shape one.
            torch._dynamo.mark_static_address(tensor)
            torch._dynamo.mark_static(tensor)
        return state

    def tensors(self) -> list[torch.Tensor]:
        return [*self.k_caches, *self.v_caches, self.input_ids, self.pos, self.last]

    def reset(self) -> None:
        for tensor in self.tensors():
            tensor.zero_()


class BuiltinDecode:
    """What both built-in workloads are: decode under checked settings, the last step's logits
    kept for step_logits(), and describe()'s settings, prompt and weights."""

    model: nn.Module

    def __init__(self, settings: DecodeSettings) -> None:
        self.prompt_len, self.seed, self.dtype, self.device = (
            settings.prompt_len, settings.seed, settings.dtype, settings.device)
        self.mode = settings.mode
        self.fullgraph, self.compiled, self.cuda_graphs = settings.fullgraph, settings.compiled, settings.cuda_graphs
        self._checksum: str | None = None
        self._logits: torch.Tensor | None = None  # the last step's

    def step_logits(self) -> torch.Tensor:
        """The logits the last step's ids were chosen from, [batch, vocab] in the model's dtype
        (read before the next step, which may overwrite a graph's output)."""
        if self._logits is None:
            raise RuntimeError("step_logits() before a step")
        return self._logits

    def _described(self, engine: dict[str, object], sizes: dict[str, object]) -> dict[str, object]:
        """describe(): `engine`'s keys, how decode runs, the model's `sizes`, then its prompt and weights."""
        if self._checksum is None:
            self._checksum = weights_checksum(self.model.named_parameters())
        return {
            **engine,
            "torch": torch.__version__,
            "device": str(self.device),
            "dtype": str(self.dtype).removeprefix("torch."),
            "mode": self.mode,
            "compiled": self.compiled,
            "fullgraph": self.fullgraph,
            "cuda_graphs": self.cuda_graphs,
            **sizes,
            "prompt_len": self.prompt_len,
            "seed": self.seed,
            "params": sum(p.numel() for p in self.model.parameters()),
            "weights_checksum": self._checksum,
        }


class CompiledDecode(BuiltinDecode):
    """Greedy decode over a static KV cache, one compiled function per step; the workload protocol."""

    def __init__(
        self,
        layers: int = 8,
        d_model: int = 1024,
        n_heads: int = 16,
        ffn: int = 2816,
        vocab: int = 32000,
        max_len: int = 1024,
        prompt_len: int = 32,
        dtype: str = "bfloat16",
        seed: int = 0,
        mode: str | None = None,
        fullgraph: bool = False,
        device: str | None = None,
        compile_on_cpu: bool = False,
    ) -> None:
        self.args = ModelArgs(layers=layers, d_model=d_model, n_heads=n_heads, ffn=ffn, vocab=vocab, max_len=max_len)
        self.args.check()
        super().__init__(decode_settings(prompt_len, max_len, seed, dtype, device, mode, fullgraph, compile_on_cpu))
        # the settings' mode again, spelled from the constant: the line `guard run` follows from a changed
        # COMPILE_MODE to torch.compile's mode (validation's mode-default; tests/test_workloads.py)
        self.mode = mode or COMPILE_MODE
        self.model = build_model(self.args, seed, self.device, self.dtype)
        self._decode = self._decode_one
        if self.compiled:
            self._decode = torch.compile(self._decode_one, mode=self.mode, fullgraph=self.fullgraph)
        self._states: dict[int, DecodeState] = {}
        self._warmed: set[int] = set()
        self.state: DecodeState | None = None
        self.batch_size = 0
        self.position = 0  # positions of the cache in use, on the host: no sync to check it

    def _decode_one(self, tokens: torch.Tensor, pos: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """decode_one_token: [batch] ids at position pos ([1]) -> [batch] greedy next ids, and the
        [batch, vocab] logits they were chosen from (an output the step computes anyway)."""
        logits = self.model(tokens[:, None], pos)[:, -1]
        return logits.argmax(dim=-1), logits

    @property
    def last(self) -> torch.Tensor:
        """The last output, the next input when free-running: after setup, what prefill predicted."""
        if self.state is None:
            raise RuntimeError("no output before setup(batch_size)")
        return self.state.last

    # -- protocol ---------------------------------------------------------------------

    @torch.no_grad()
    def setup(self, batch_size: int) -> None:
        positive_int("batch_size", batch_size)
        if batch_size not in self._states:
            self._states[batch_size] = DecodeState.empty(self.args, batch_size, self.device, self.dtype)
        self.state = self._states[batch_size]
        self.batch_size = batch_size
        self.model.use_caches(self.state.k_caches, self.state.v_caches)
        if self.compiled and batch_size not in self._warmed:
            for _ in range(WARMUP_CALLS):  # compiles, and with CUDA graphs records them
                self._call_decode(self.state)
            self._warmed.add(batch_size)
        self._prefill(self.state)

    @torch.no_grad()
    def step(self, tokens: torch.Tensor | None = None) -> torch.Tensor:
        state = self.state
        if state is None:
            raise RuntimeError("step() before setup(batch_size)")
        next_input(state.input_ids, state.last, tokens, self.position, self.args.max_len, self.prompt_len,
                   "static KV cache")
        ids, self._logits = self._call_decode(state)
        state.last.copy_(ids)
        state.pos.add_(1)
        self.position += 1
        return state.last

    def describe(self) -> dict[str, object]:
        args = self.args
        return self._described({"engine": "guard.workloads.compiled", "model": "llama-like"}, {
            "layers": args.layers, "d_model": args.d_model, "n_heads": args.n_heads, "ffn": args.ffn,
            "vocab": args.vocab, "max_len": args.max_len,
        })

    def teardown(self) -> None:
        self._states.clear()
        self._warmed.clear()
        self.state = None
        self._logits = None
        for layer in self.model.layers:
            layer.attention.k_cache = layer.attention.v_cache = None
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            torch.cuda.empty_cache()

    # -- internals --------------------------------------------------------------------

    def _call_decode(self, state: DecodeState) -> tuple[torch.Tensor, torch.Tensor]:
        if self.cuda_graphs:
            torch.compiler.cudagraph_mark_step_begin()  # the last step's graph outputs may be overwritten
        return self._decode(state.input_ids, state.pos)

    def _prefill(self, state: DecodeState) -> None:
        """The fixed prompt in one eager forward; leaves the token it predicts as the last output."""
        state.reset()
        prompt = seeded_prompt(self.batch_size, self.prompt_len, self.args.vocab, self.seed).to(self.device)
        logits = self.model(prompt, torch.arange(self.prompt_len, device=self.device))
        state.last.copy_(logits[:, -1].argmax(dim=-1))
        state.pos.fill_(self.prompt_len)
        self.position = self.prompt_len


def make(**options: object) -> CompiledDecode:
    """Entry point of the workload protocol: `guard.workloads.compiled:make`."""
    check_options(CompiledDecode, options, "guard.workloads.compiled")
    return CompiledDecode(**options)  # type: ignore[arg-type]
