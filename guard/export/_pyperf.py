"""pyperf's JSON suite format (format version 1.0), which `pyperf show`, `pyperf stats` and
`pyperf compare_to` read: a benchmark per batch size and time metric, a run per process
whose one value is that process's time per step, in seconds. Export base and head
to two files and `pyperf compare_to base.json head.json` compares them. tok/s is left out:
pyperf's values are times, sizes or counts."""

from __future__ import annotations

import re
from typing import Any

from guard.export._measures import Measure, Source, benchmark_name

FORMAT_VERSION = "1.0"
_UNPRINTABLE = re.compile(r"[^ -~]")


def to_pyperf(source: Source, found: list[Measure]) -> dict[str, Any]:
    benchmarks = []
    for m in found:
        if m.unit != "ms":
            continue
        benchmarks.append({
            "metadata": {
                "name": f"{benchmark_name(m.batch_size)}/{m.slug}", "unit": "second", "loops": 1,
                "description": f"{m.name}, each process's time per step over its timed steps",
                "batch_size": m.batch_size,
            },
            "runs": [{"values": [ms / 1000]} for ms in m.values],
        })
    return {"version": FORMAT_VERSION, "metadata": _suite_metadata(source), "benchmarks": benchmarks}


def _suite_metadata(source: Source) -> dict[str, Any]:
    """What the numbers were measured on, as pyperf keeps it: strings on one line, none empty."""
    env = source.environment
    metadata: dict[str, Any] = {
        "commit_id": source.sha,  # a full hex sha: a report is checked when read, a record made by git
        "timer": "CUDA events" if source.gpu_timed else "wall clock",
        "steps": source.steps,
        "warmup_steps": source.warmup_steps,
    }
    for key, value in (("gpu", env.gpu), ("gpu_driver", env.driver), ("torch_version", env.torch),
                       ("cuda_version", env.cuda), ("hostname", env.hostname)):
        clean = _UNPRINTABLE.sub("?", value or "").strip()[:200]
        if clean:
            metadata[key] = clean
    return metadata
