"""github-action-benchmark's `customSmallerIsBetter` input: a list of {name, unit, value,
range, extra}. Only the metrics where smaller is better (the step times); tok/s, where
bigger is, would need the tool's `customBiggerIsBetter` list and is left out."""

from __future__ import annotations

from typing import Any

from guard.export._measures import Measure


def to_benchmark_action(found: list[Measure], sha: str) -> list[dict[str, Any]]:
    return [
        {
            "name": f"decode batch size {m.batch_size}: {m.name}",
            "unit": m.unit,
            "value": m.median,
            "range": f"{m.low:.6g} to {m.high:.6g}",
            "extra": f"median of {len(m.values)} processes; commit {sha[:12]}",
        }
        for m in found if m.smaller_is_better
    ]
