"""Bencher Metric Format: {benchmark: {measure: {value, lower_value, upper_value}}}, which
`bencher run --adapter json` reads. A benchmark per batch size; its measures are the step
time, tok/s and (on a GPU) the host's time per step, each the arm's median with the
fastest and slowest process as its bounds."""

from __future__ import annotations

from typing import Any

from guard.export._measures import Measure, benchmark_name


def to_bmf(found: list[Measure]) -> dict[str, Any]:
    data: dict[str, dict[str, dict[str, float]]] = {}
    for m in found:
        data.setdefault(benchmark_name(m.batch_size), {})[m.slug] = {
            "value": m.median, "lower_value": m.low, "upper_value": m.high,
        }
    return data
