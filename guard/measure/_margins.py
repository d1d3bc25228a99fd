"""Which outputs of the reference were confident: its top logit ahead of the runner-up by well
more than the model's dtype rounds.

A head that computes the same function with other kernels, another fusion or another order of
sums changes every logit by a few units in the last place (ulps) of the dtype at the logit's
magnitude, and so chooses another token only where the reference's top two logits were that
close. Measured on a CPU with the reference engine in bf16 (batch size 4, 300 forced steps,
`benchmarks/margin_floor.py`): a split LM head moved outputs whose margin was at most 1 ulp;
RMSNorm in float32 instead of bf16, a rounding change in every layer, moved outputs of at most 3
ulps over 4 layers and 8 over 20; a sign flipped in the rotary embedding, another function,
moved outputs of up to 44 ulps over 4 layers, 101 of 1,200 above 16. The floor is twice the most
rounding moved: 16 ulps at the larger of the two logits' magnitudes, in the logits' dtype.
"""

from __future__ import annotations

import math

from guard.measure._models import LogitsDtype, MarginFloor, MarginMismatch, TopLogits

MARGIN_FLOOR_ULPS = 16.0
_MANTISSA_BITS: dict[str, int] = {"bfloat16": 7, "float16": 10, "float32": 23, "float64": 52}
_MIN_EXPONENT: dict[str, int] = {"bfloat16": -126, "float16": -14, "float32": -126, "float64": -1022}


def ulp(dtype: LogitsDtype, value: float) -> float:
    """The spacing of `dtype`'s numbers at |value| (at the smallest normal's for tiny values)."""
    exponent = math.frexp(value)[1] - 1 if value else _MIN_EXPONENT[dtype]
    return math.ldexp(1.0, max(exponent, _MIN_EXPONENT[dtype]) - _MANTISSA_BITS[dtype])


def margin_ulps(dtype: LogitsDtype, top: float, runner_up: float) -> float:
    """How far the top logit led the runner-up, in ulps of `dtype` at the larger magnitude."""
    return (top - runner_up) / ulp(dtype, max(abs(top), abs(runner_up)))


def floor_for(top: TopLogits) -> MarginFloor:
    return MarginFloor(dtype=top.dtype, ulps=MARGIN_FLOOR_ULPS)


def confident_disagreements(
    tokens: list[list[int]], rows: list[list[int]], top: list[list[tuple[float, float]]], floor: MarginFloor,
) -> tuple[int, int, MarginMismatch | None]:
    """Of the (step, sequence) outputs compared with the reference rows, those whose reference
    margin was above the floor: how many differ, of how many, and the first (step from 1)."""
    count, compared, first = 0, 0, None
    for step, (row, ref, pairs) in enumerate(zip(tokens, rows, top), start=1):
        for sequence, (expected, (best, second)) in enumerate(zip(ref, pairs)):
            margin = margin_ulps(floor.dtype, best, second)
            if margin <= floor.ulps:
                continue
            compared += 1
            found = row[sequence] if sequence < len(row) else -1
            if found != expected:
                count += 1
                if first is None:
                    first = MarginMismatch(step=step, sequence=sequence, expected=expected, found=found,
                                           margin_ulps=margin)
    return count, compared, first
