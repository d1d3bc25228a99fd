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
