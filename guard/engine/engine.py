"""The reference engine: setup(batch_size) captures and prefills, step() decodes one token.

How decode is captured is set by the two constants below; `guard demo` makes its head
commit by changing them, which is the kind of change the guard exists to catch.
"""

from __future__ import annotations

import os
import time

import torch

from .parallel import Comm, check_shard, choose_shard, shard_weights
from .model import DecodeState, Decoder, ModelSpec, init_weights

# "step": the whole decode step is one CUDA graph per batch size.
# "layer": one graph per layer (piecewise capture), replayed one after another.
CAPTURE_MODE = "step"
# Batch sizes that get their own graph. A smaller batch pads up to the next captured
# size; a larger one runs eagerly.
CAPTURE_BATCH_SIZES = (1, 2)

# Environment overrides, for ablation arms that run one build with another capture.
MODE_ENV = "REFENGINE_CAPTURE_MODE"
SIZES_ENV = "REFENGINE_CAPTURE_BATCH_SIZES"  # e.g. "1,2"
# Injected idle time, for validating the guard: the step is captured as two graphs and the
# host waits this many microseconds between them while the GPU has nothing to run.
IDLE_ENV = "REFENGINE_IDLE_US"
# The capture policy for a batch-size mix: "1" runs a size without a graph eagerly at its own
# shape (the fallback); "0" pads it up to the next captured size
FALLBACK_ENV = "REFENGINE_FALLBACK"
MOE_DISPATCHES = ("auto", "capacity", "exact")
# Injections for validating the guard on several GPUs (parallel.py), each an option or its variable:
# the MLP's collective starts only once the shared expert is computed (its overlap lost) ...
SERIALIZE_COMM_ENV = "REFENGINE_SERIALIZE_COMM"  # "1"
# ... and one rank captures no graph: it decodes eagerly while the others replay theirs
EAGER_RANK_ENV = "REFENGINE_EAGER_RANK"  # a rank, e.g. "1"

PROMPT_SEED = 1234
MAX_PROMPT_ROWS = 64


def _check_spec(spec: ModelSpec, moe_dispatch: str) -> None:
    """ValueError for a model the engine cannot build."""
    if not 0 <= spec.long_kv_layers <= spec.layers:
        raise ValueError(f"long_kv_layers must be between 0 and layers ({spec.layers})")
    if spec.head_splits < 0 or (spec.head_splits and spec.d_model % spec.head_splits):
        raise ValueError(f"head_splits must be 0 or divide d_model ({spec.d_model})")
    if spec.moe_experts < 0 or (spec.moe_experts and not 1 <= spec.moe_top_k <= spec.moe_experts):
        raise ValueError("moe_experts must be 0 or more, and moe_top_k between 1 and moe_experts")
    if moe_dispatch not in MOE_DISPATCHES:
        raise ValueError(f"moe_dispatch must be one of {', '.join(MOE_DISPATCHES)}, not {moe_dispatch!r}")


class RefEngine:
    """Greedy decode over a static KV cache; implements the workload protocol."""

    def __init__(
        self,
        device: str | None = None,
        dtype: str = "float32",
        capture: bool = True,
        prompt_len: int = 32,
        capture_mode: str | None = None,
        capture_batch_sizes: tuple[int, ...] | list[int] | None = None,
        idle_us: float | None = None,
        split: bool | None = None,
        fallback: bool | None = None,
        moe_dispatch: str = "auto",
        parallel: str = "auto",
        serialize_comm: bool | None = None,
        eager_rank: int | None = None,
        **spec_fields: int,
    ) -> None:
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        if self.device.type == "cpu":
            # One thread: small eager ops gain nothing from more, and spinning worker
            # threads make CPU timings swing wildly when the machine is shared.
            torch.set_num_threads(1)
        self.dtype = getattr(torch, dtype)
        self.spec = ModelSpec(**spec_fields)
        _check_spec(self.spec, moe_dispatch)
        self.moe_dispatch = moe_dispatch
        # The settings capture reads stay in __init__, each from its option, its variable or its
        # constant: the cause finder follows a changed default or constant to the attribute it sets
        fallback_env = os.environ.get(FALLBACK_ENV)
        # None: the fixed-size policy of old (smaller batches pad up); True or False: a capture
        # policy for a batch-size mix, every graph masking its padding rows
        self.fallback = fallback if fallback is not None else (fallback_env == "1" if fallback_env else None)
        self.prompt_len = prompt_len
        self.capture_mode = capture_mode or os.environ.get(MODE_ENV) or CAPTURE_MODE
        if self.capture_mode not in ("step", "layer"):
            raise ValueError(f"capture_mode must be 'step' or 'layer', not {self.capture_mode!r}")
        sizes_env = os.environ.get(SIZES_ENV)
        env_sizes = tuple(int(s) for s in sizes_env.split(",")) if sizes_env else None
        self.capture_batch_sizes = tuple(sorted(capture_batch_sizes or env_sizes or CAPTURE_BATCH_SIZES))
        self.use_graphs = capture and self.device.type == "cuda"
        self.idle_us = float(idle_us if idle_us is not None else os.environ.get(IDLE_ENV, 0.0))
        if self.idle_us < 0:
            raise ValueError(f"idle_us must be 0 or more, not {self.idle_us}")
        # Split the step in two (two graphs) when idle is injected; `split` alone gives the
        # same structure without the wait, the fair baseline for an injected arm.
        self.split = bool(split) if split is not None else self.idle_us > 0
        self.idle_after: int | None = None  # index of the graph after which the host waits
        if prompt_len < 1 or prompt_len >= self.spec.max_len:
            raise ValueError(f"prompt_len must be between 1 and max_len-1 ({self.spec.max_len - 1})")

        # "auto": tensor parallel over the ranks of torch.distributed where it has more than one
        self.shard = choose_shard(parallel, self.spec.moe_experts)
        if self.shard is not None:
            check_shard(self.spec, self.shard)
        self.rank = self.shard.rank if self.shard is not None else 0
        env_serial = os.environ.get(SERIALIZE_COMM_ENV)
        self.serialize_comm = bool(serialize_comm) if serialize_comm is not None else env_serial == "1"
        env_eager = os.environ.get(EAGER_RANK_ENV)
        self.eager_rank = eager_rank if eager_rank is not None else (int(env_eager) if env_eager else None)
        if self.eager_rank is not None and self.eager_rank == self.rank:
            self.use_graphs = False  # this rank falls out of its graphs
        self._build_decoder()

    def _build_decoder(self) -> None:
        """The seeded weights (this rank's shard of them), the decoder over them and the prompts;
        no batch size set up yet."""
        self.weights = init_weights(self.spec, self.device, self.dtype)
        if self.shard is not None:
            self.weights = shard_weights(self.weights, self.spec, self.shard)
        side = torch.cuda.Stream(self.device) if self.device.type == "cuda" else None
        comm = Comm(self.shard) if self.shard is not None else None
        self.decoder = Decoder(self.spec, self.weights, side, comm, self.serialize_comm)
        gen = torch.Generator().manual_seed(PROMPT_SEED)
        self.prompts = torch.randint(self.spec.vocab, (MAX_PROMPT_ROWS, self.prompt_len), generator=gen)

        self.batch = 0
        self.run_batch = 0
        self.active = torch.zeros(1, dtype=torch.int64, device=self.device)  # rows a padded graph is for
        self._info: dict[str, object] = {}
        self._forget_batch()
        if self.spec.moe_experts:
            self.decoder.loads = torch.zeros(self.spec.moe_experts, dtype=torch.int64, device=self.device)

    # -- protocol ---------------------------------------------------------------------

    def setup(self, batch_size: int) -> None:
        if batch_size < 1 or batch_size > MAX_PROMPT_ROWS:
            raise ValueError(f"batch_size must be between 1 and {MAX_PROMPT_ROWS}")
        if self.state is not None and batch_size == self.batch and self._prefilled:
            # another pass at this batch size: the graphs stay, the prefilled state is copied back
            for tensor, saved in zip(self._tensors(), self._prefilled):
                tensor.copy_(saved)
            self.positions_used = self.prompt_len
            return
        self.teardown()
        self.batch = batch_size
        self.run_batch = self._padded(batch_size)
        if self.fallback and batch_size not in self.capture_batch_sizes:
            self.run_batch = batch_size  # the fallback: a size without a graph of its own runs eagerly
        self.state = DecodeState.empty(self.spec, self.run_batch, self.device, self.dtype, self.decoder.heads)
        if self.use_graphs and self.fallback is not None:
            # a capture policy: every captured size up to this one, for a mix's smaller steps, on
            # views of the first rows, their padding rows masked (real rows that sit the step out)
            for size in self.capture_batch_sizes:
                if size <= self.run_batch:
                    self.graphs_by_size[size] = self._capture(self.state.rows(size, self.active))
                    self.graph_logits[size] = self._captured_logits()
            self.graphs = self.graphs_by_size.get(self.run_batch, [])
        elif self.use_graphs and self.run_batch in self.capture_batch_sizes:
            self.graphs_by_size[self.run_batch] = self.graphs = self._capture(self.state)
            self.graph_logits[self.run_batch] = self._captured_logits()
        self._prefill()
        self._prefilled = [tensor.clone() for tensor in self._tensors()]

    def step(self, tokens: torch.Tensor | None = None) -> torch.Tensor:
        """One decode step. `tokens`: this step's input ids (teacher forcing), written into the
        static input the graphs read; None decodes from the engine's own last output."""
        assert self.state is not None, "call setup(batch_size) first"
        if self.positions_used >= self.spec.max_len:
            raise RuntimeError(
                f"decoded past max_len={self.spec.max_len}; pass a larger max_len in the workload options"
            )
        rows = self.batch if tokens is None else len(tokens)
        if not 1 <= rows <= self.batch:
            raise ValueError(f"step() got {rows} input ids; the engine is set up for at most {self.batch}")
        if tokens is not None:
            self.state.token[:rows].copy_(tokens)
        size, captured = self._policy(rows)
        if self.fallback and rows not in self.capture_batch_sizes:
            size, captured = rows, False  # the fallback: a size without a graph of its own runs eagerly
        graphs = self.graphs_by_size.get(size, []) if captured else []
        if graphs and self.fallback is not None:
            self.active.fill_(rows)
        if graphs:
            for index, graph in enumerate(graphs):
                graph.replay()
                if index == self.idle_after:
                    self._wait_idle()
        else:
            self._eager(rows, size, captured)
        self.positions_used += 1
        self._info = {"path": "graph" if graphs else "eager", "padded_to": size}
        logits = self.graph_logits[size] if graphs else self.decoder.last_logits
        self._logits = logits[:rows] if logits is not None else None
        return self.state.token[:rows]

    def step_logits(self) -> torch.Tensor:
        """The logits the last step's ids were chosen from, [rows, vocab] in the model's dtype
        (the workload protocol's optional method; the guard reads each row's top two)."""
        if self._logits is None:
            raise RuntimeError("step_logits() before a step")
        return self._logits

    def step_info(self) -> dict[str, object]:
        """What the last step did: its path, the rows it computed and, with MoE, the tokens each
        expert got over the layers (real rows only; a host copy)."""
        info = dict(self._info)
        if self.decoder.loads is not None:
            info["expert_tokens"] = self.decoder.loads.tolist()
        return info

    def _policy(self, rows: int) -> tuple[int, bool]:
        """(rows to compute, whether that is a captured size) for a step of `rows` real rows:
        `capture_eligible(shape) ? replay_graph : run_eager`. The set-up size is what setup()
        chose. Under a capture policy a smaller one gets its own graph or pads up to the next
        captured size; past the largest no graph holds it, and it runs eagerly at its shape, as
        engines do past their largest capture. The fallback (in setup() and step()) runs every
        size without a graph of its own eagerly instead. Without a policy a smaller size runs
        eagerly at its shape."""
        if rows == self.batch:
            return self.run_batch, self.run_batch in self.capture_batch_sizes
        if self.fallback is None:
            return rows, False  # the fixed-size policy has one graph, the set-up size's
        if rows in self.capture_batch_sizes:
            return rows, True
        bigger = [size for size in self.capture_batch_sizes if rows < size <= self.run_batch]
        return (min(bigger), True) if bigger else (rows, False)

    def _eager(self, rows: int, size: int, captured: bool) -> None:
        """The step without graphs: the set-up state as it is, or a view of its first rows;
        a captured size is computed as its graph would be (padded, experts to capacity)."""
        state = self.state
        assert state is not None
        if self.spec.moe_experts:
            self.decoder.dispatch = self.moe_dispatch if self.moe_dispatch != "auto" else (
                "capacity" if captured else "exact")
        if size == self.run_batch and rows == self.batch:
            view = state
        else:
            if size > rows:
                self.active.fill_(rows)
            view = state.rows(size, self.active if size > rows else None)
        if self.split:
            outputs = self._first_half(view)
            self._wait_idle()
            self._second_half(view, *outputs)
        else:
            self.decoder.step(view)

    def teardown(self) -> None:
        self._forget_batch()
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            torch.cuda.empty_cache()

    def describe(self) -> dict[str, object]:
        return {
            "engine": "reference",
            "device": str(self.device),
            "dtype": str(self.dtype).removeprefix("torch."),
            "layers": self.spec.layers,
            "d_model": self.spec.d_model,
            "vocab": self.spec.vocab,
            "max_len": self.spec.max_len,
            "long_kv_layers": self.spec.long_kv_layers,
            "head_splits": self.spec.head_splits,
            "capture_mode": self.capture_mode if self.graphs_by_size else "eager",
            "graphs_per_step": len(self.graphs),
            "captured_sizes": sorted(self.graphs_by_size),
            "idle_us": self.idle_us,
            "capture_batch_sizes": list(self.capture_batch_sizes),
            "run_batch": self.run_batch,
            "fallback": self.fallback,
            "moe_experts": self.spec.moe_experts,
            "moe_top_k": self.spec.moe_top_k if self.spec.moe_experts else None,
            "moe_dispatch": self.moe_dispatch if self.spec.moe_experts else None,
            **self._parallel_described(),
        }

    def _parallel_described(self) -> dict[str, object]:
        """The ranks' split and the injections, where there are any (one process: nothing)."""
        found: dict[str, object] = {}
        if self.shard is not None:
            found |= {"parallel": self.shard.mode, "rank": self.rank, "world_size": self.shard.world_size,
                      "serialize_comm": self.serialize_comm}
        if self.eager_rank is not None:
            found["eager_injected"] = self.eager_rank == self.rank  # differs between the ranks
        return found

    # -- internals --------------------------------------------------------------------

    def _forget_batch(self) -> None:
        """No batch size set up: no state, no graphs."""
        self.state: DecodeState | None = None
        self.graphs: list[torch.cuda.CUDAGraph] = []  # the set-up batch size's
        self.graphs_by_size: dict[int, list[torch.cuda.CUDAGraph]] = {}  # every captured size up to it
        self.graph_logits: dict[int, torch.Tensor] = {}  # each captured size's logits, where its graph writes them
        self._logits: torch.Tensor | None = None  # the last step's, its real rows
        self._keep_alive: list[object] = []  # static tensors of the graphs' pieces
        self._prefilled: list[torch.Tensor] = []  # the state as the prefill left it, for a repeated setup
        self.positions_used = 0

    def _tensors(self) -> list[torch.Tensor]:
        """Every tensor a decode step reads and writes."""
        state = self.state
        assert state is not None
        return [state.token, state.pos, *state.k_cache, *state.v_cache]

    def _padded(self, batch_size: int) -> int:
        for size in self.capture_batch_sizes:
            if size >= batch_size:
                return size
        return batch_size

    def _prefill(self) -> None:
        """Feed the fixed prompt one token at a time; leaves the first generated token."""
        state = self.state
        assert state is not None
        state.reset()
        self.decoder.dispatch = "capacity"  # one prefill for every dispatch, so they decode from one state
        prompt = self.prompts[: self.run_batch].to(self.device)
        for t in range(self.prompt_len):
            state.token.copy_(prompt[:, t])
            self.decoder.step(state)
        self.positions_used = self.prompt_len

    def _first_half(self, state: DecodeState) -> tuple[torch.Tensor, ...]:
        x, cos, sin, mask = self.decoder.embed(state)
        for i in range(self.spec.layers // 2):
            x = self.decoder.layer(i, x, cos, sin, mask, state)
        return x, cos, sin, mask

    def _second_half(
        self, state: DecodeState, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, mask: torch.Tensor
    ) -> None:
        for i in range(self.spec.layers // 2, self.spec.layers):
            x = self.decoder.layer(i, x, cos, sin, mask, state)
        self.decoder.head(x, state)

    def _wait_idle(self) -> None:
        """Hold the host, with the GPU drained, so the GPU sits idle for idle_us."""
        if not self.idle_us:
            return
        if self.device.type == "cuda":
            torch.cuda.current_stream().synchronize()
        deadline = time.perf_counter() + self.idle_us / 1e6
        while time.perf_counter() < deadline:
            pass

    def _captured_logits(self) -> torch.Tensor:
        """The logits tensor the graph just captured writes on every replay (kept alive with it)."""
        logits = self.decoder.last_logits
        assert logits is not None
        self._keep_alive.append(logits)
        return logits

    def _capture(self, state: DecodeState) -> list[torch.cuda.CUDAGraph]:
        """The graphs of one decode step over `state` (the set-up state, or a view of its first rows)."""
        # A graph reads its tensors by address: a view's own row ids must outlive the view, or
        # the allocator hands their memory to the next tensor and the replay reads that instead.
        self._keep_alive.append(state)
        self.decoder.dispatch = "capacity"  # a graph replays static shapes: experts padded to capacity
        # Warm up on a side stream first, as torch requires before capture.
        warm = torch.cuda.Stream(self.device)
        warm.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(warm):
            for _ in range(2):
                self.decoder.step(state)
        torch.cuda.current_stream().wait_stream(warm)
        torch.cuda.synchronize(self.device)
        state.reset()

        if self.capture_mode == "step" and self.split:
            self.idle_after = 0
            return self._capture_pieces(
                [lambda: self._first_half(state), lambda outs: self._second_half(state, *outs)]
            )
        if self.capture_mode == "step":
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                self.decoder.step(state)
            return [graph]

        graphs: list[torch.cuda.CUDAGraph] = []
        pool = None

        def piece(fn):  # type: ignore[no-untyped-def]
            nonlocal pool
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=pool):
                out = fn()
            pool = graph.pool()
            graphs.append(graph)
            return out

        x, cos, sin, mask = piece(lambda: self.decoder.embed(state))
        for i in range(self.spec.layers):
            x = piece(lambda i=i, x=x: self.decoder.layer(i, x, cos, sin, mask, state))
        piece(lambda: self.decoder.head(x, state))
        self._keep_alive.append((cos, sin, mask))  # keep the graphs' static tensors alive
        if self.idle_us:
            self.idle_after = self.spec.layers // 2  # graph 0 is the embedding
        return graphs

    def _capture_pieces(self, pieces: list) -> list[torch.cuda.CUDAGraph]:  # type: ignore[type-arg]
        """Capture each piece as its own graph in one pool; each takes the previous one's outputs."""
        graphs: list[torch.cuda.CUDAGraph] = []
        pool = None
        outputs = None
        for index, fn in enumerate(pieces):
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=pool):
                outputs = fn() if index == 0 else fn(outputs)
            pool = graph.pool()
            graphs.append(graph)
            if index == 0:
                self._keep_alive.append(outputs)  # keep the graphs' static tensors alive
        return graphs


def make(**options: object) -> RefEngine:
    """Entry point of the workload protocol: `guard.engine:make`."""
    return RefEngine(**options)  # type: ignore[arg-type]
