"""A complete workload for regression-guard, for an engine with CUDA-graph decode.

Put a file like this in your engine's repository (the default place is
bench/guard_workload.py) and point `[workload] entry` at its `make` function.
The harness calls make(**options) once per process, then for each batch size
setup(batch_size) and warmup + timed calls of step(tokens).
"""

from __future__ import annotations

import torch


class TinyGreedyDecoder:
    """Greedy decode with a static KV-free state, captured as one CUDA graph per batch size."""

    def __init__(self, vocab: int = 4096, width: int = 512, seed: int = 0) -> None:
        self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        gen = torch.Generator().manual_seed(seed)  # fixed weights: same tokens in every arm
        self.embed = torch.randn(vocab, width, generator=gen).to(self.device)
        self.proj = (torch.randn(width, width, generator=gen) / width**0.5).to(self.device)
        self.head = (torch.randn(width, vocab, generator=gen) / width**0.5).to(self.device)
        self.graph: torch.cuda.CUDAGraph | None = None

    def _decode(self) -> None:
        hidden = torch.tanh(self.embed.index_select(0, self.token) @ self.proj)
        self.token.copy_((hidden @ self.head).argmax(-1))

    def setup(self, batch_size: int) -> None:
        # A fixed prompt: here one start token per sequence, different per row.
        self.token = torch.arange(batch_size, device=self.device)
        self.graph = None
        if self.device.type == "cuda":
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                self._decode()  # warm up before capture
            torch.cuda.current_stream().wait_stream(side)
            self.token.copy_(torch.arange(batch_size, device=self.device))
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                self._decode()

    def step(self, tokens: torch.Tensor | None = None) -> torch.Tensor:
        # Teacher forcing: the harness passes this step's input ids (on self.device), the same
        # in every process, so that a near-tie in one process's argmax cannot change the next
        # step's work. None: decode from the last output, as a free-running loop does.
        if tokens is not None:
            self.token.copy_(tokens)
        if self.graph is not None:
            self.graph.replay()
        else:
            self._decode()
        return self.token  # the batch's next-token ids; the harness copies them to the host

    def describe(self) -> dict[str, object]:
        return {"engine": "tiny-greedy", "graph": self.graph is not None}


def make(**options: int) -> TinyGreedyDecoder:
    return TinyGreedyDecoder(**options)
