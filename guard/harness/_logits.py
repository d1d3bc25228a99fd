"""A step's top two logits per sequence, from the workload's optional step_logits(), for the
reference process: the guard reads from them how confident each of the reference's outputs was.

Imports nothing: the harness hands in the tensor. Runs in the arm's environment.
"""

from __future__ import annotations

from typing import Any


def top_two(logits: Any, batch_size: int) -> tuple[list[list[float]], str]:
    """([top, runner-up] per sequence, the logits' dtype) of a [batch_size, vocab] tensor; a
    ValueError that says what the method must return otherwise."""
    shape = tuple(getattr(logits, "shape", ()))
    if len(shape) != 2 or shape[0] != batch_size or shape[1] < 2 or not getattr(logits, "is_floating_point",
                                                                                 lambda: False)():
        raise ValueError(f"step_logits() must return a float tensor of [{batch_size}, vocab] logits (one row per "
                         f"sequence, at least two columns), got {type(logits).__name__} of shape {list(shape)}")
    values = logits.detach().topk(2, dim=-1).values.float().cpu().tolist()  # exact: float32 holds every bf16/fp16
    return values, str(logits.dtype).removeprefix("torch.")


class StepLogits:
    """The top two logits of each step a reference pass decodes, a fixed size's or the mix's,
    where the workload has step_logits(); `error`: what a malformed return raises."""

    def __init__(self, workload: Any, error: type[Exception] = ValueError) -> None:
        self.method = getattr(workload, "step_logits", None)
        self.error = error
        self.top: list[list[list[float]]] = []
        self.dtypes: set[str] = set()

    def record(self, batch_size: int) -> None:
        """After a step of `batch_size` rows: its rows' top two logits."""
        if not callable(self.method):
            return
        try:
            pairs, dtype = top_two(self.method(), batch_size)
        except ValueError as exc:
            raise self.error(str(exc)) from None
        self.top.append(pairs)
        self.dtypes.add(dtype)

    def fields(self) -> dict[str, Any]:
        """The pass's `top_logits` and `logits_dtype` for its result; none without step_logits()."""
        if not callable(self.method):
            return {}
        return {"top_logits": self.top,
                "logits_dtype": next(iter(self.dtypes)) if len(self.dtypes) == 1 else sorted(self.dtypes)}
