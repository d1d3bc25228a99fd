"""The reference engine: setup(batch_size) captures and prefills, step() decodes one token.

How decode is captured is set by the two constants below; `guard demo` makes its head
commit by changing them, which is the kind of change the guard exists to catch.
"""

from __future__ import annotations

import os
import time

import torch

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

PROMPT_SEED = 1234
MAX_PROMPT_ROWS = 64


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
        **spec_fields: int,
    ) -> None:
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        if self.device.type == "cpu":
            # One thread: small eager ops gain nothing from more, and spinning worker
            # threads make CPU timings swing wildly when the machine is shared.
            torch.set_num_threads(1)
        self.dtype = getattr(torch, dtype)
        self.spec = ModelSpec(**spec_fields)
        if not 0 <= self.spec.long_kv_layers <= self.spec.layers:
            raise ValueError(f"long_kv_layers must be between 0 and layers ({self.spec.layers})")
        if self.spec.head_splits < 0 or (self.spec.head_splits and self.spec.d_model % self.spec.head_splits):
            raise ValueError(f"head_splits must be 0 or divide d_model ({self.spec.d_model})")
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

        self.weights = init_weights(self.spec, self.device, self.dtype)
        side = torch.cuda.Stream(self.device) if self.device.type == "cuda" else None
        self.decoder = Decoder(self.spec, self.weights, side)
        gen = torch.Generator().manual_seed(PROMPT_SEED)
        self.prompts = torch.randint(self.spec.vocab, (MAX_PROMPT_ROWS, prompt_len), generator=gen)

        self.batch = 0
        self.run_batch = 0
        self.state: DecodeState | None = None
        self.graphs: list[torch.cuda.CUDAGraph] = []
        self.positions_used = 0
        self._prefilled: list[torch.Tensor] = []  # the state as the prefill left it, for a repeated setup

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
        self.state = DecodeState.empty(self.spec, self.run_batch, self.device, self.dtype)
        if self.use_graphs and self.run_batch in self.capture_batch_sizes:
            self._capture()
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
        if tokens is not None:
            self.state.token[: self.batch].copy_(tokens)
        if self.graphs:
            for index, graph in enumerate(self.graphs):
                graph.replay()
                if index == self.idle_after:
                    self._wait_idle()
        elif self.split:
            outputs = self._first_half(self.state)
            self._wait_idle()
            self._second_half(self.state, *outputs)
        else:
            self.decoder.step(self.state)
        self.positions_used += 1
        return self.state.token[: self.batch]

    def teardown(self) -> None:
        self.graphs = []
        self.state = None
        self._prefilled = []
        self.positions_used = 0
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
            "capture_mode": self.capture_mode if self.graphs else "eager",
            "graphs_per_step": len(self.graphs),
            "idle_us": self.idle_us,
            "capture_batch_sizes": list(self.capture_batch_sizes),
            "run_batch": self.run_batch,
        }

    # -- internals --------------------------------------------------------------------

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

    def _capture(self) -> None:
        state = self.state
        assert state is not None
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
            self._capture_pieces(
                [lambda: self._first_half(state), lambda outs: self._second_half(state, *outs)]
            )
            self.idle_after = 0
            return
        if self.capture_mode == "step":
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                self.decoder.step(state)
            self.graphs = [graph]
            return

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
        self._piece_outputs = (cos, sin, mask)  # keep the graphs' static tensors alive
        self.graphs = graphs
        if self.idle_us:
            self.idle_after = self.spec.layers // 2  # graph 0 is the embedding

    def _capture_pieces(self, pieces: list) -> None:  # type: ignore[type-arg]
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
                self._piece_outputs = outputs  # keep the graphs' static tensors alive
        self.graphs = graphs


def make(**options: object) -> RefEngine:
    """Entry point of the workload protocol: `guard.engine:make`."""
    return RefEngine(**options)  # type: ignore[arg-type]
