"""The profiled passes, after every timed one: a batch size's steps under torch's profiler,
each in a guard.step range, its Chrome trace gzipped where the guard reads it. Their timings
are inflated by the profiler and never used as figures.

Standard library only; torch is the workload's, handed in.
"""

from __future__ import annotations

import gzip
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable

from ._protocol import Spec
from ._workload import Feed, call_step, token_ids, workload_device


def profile_batch(
    workload: Any,
    torch: Any,
    batch_size: int,
    warmup_steps: int,
    steps: int,
    trace_path: Path,
    phase: Callable[[str], None] = lambda name: None,
    reference: list[list[int]] | None = None,
) -> dict[str, Any]:
    """A separate pass under the profiler, after the timed ones: it says where the time went.
    Its timings are inflated by the profiler and never used as figures. `phase(name)` is
    called as each part ends, so that the process's timings show what the pass costs."""
    workload.setup(batch_size)
    feed = Feed(torch, reference, workload_device(workload), batch_size) if reference is not None else None
    for _ in range(warmup_steps):
        token_ids(call_step(workload, feed), batch_size)
    phase("profiled pass: setup and warmup")
    return profiled(torch, range(steps), lambda _: token_ids(call_step(workload, feed), batch_size), trace_path,
                     phase)


def profiled(torch: Any, steps: range, step: Callable[[int], object], trace_path: Path,
              phase: Callable[[str], None]) -> dict[str, Any]:
    """`step(k)` for each k of `steps` under the profiler, each a guard.step range; the trace written."""
    from torch.profiler import ProfilerActivity, profile, record_function

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    with profile(activities=activities) as prof:
        for k in steps:
            with record_function("guard.step"):  # the analysis splits the trace into steps by this range
                step(k)
        if torch.cuda.is_available():
            torch.cuda.synchronize()
    phase("profiled pass: profiler and steps")
    write_trace(prof, trace_path)
    phase("profiled pass: trace export")
    return {"trace": str(trace_path), "profile_steps": len(steps)}


def write_trace(prof: Any, trace_path: Path) -> None:
    """The profiler's Chrome trace, gzipped, at `trace_path`."""
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(raw))
        trace_path.parent.mkdir(parents=True, exist_ok=True)
        with raw.open("rb") as src, gzip.open(trace_path, "wb", compresslevel=3) as dst:
            shutil.copyfileobj(src, dst)



def profiled_steps(spec: Spec, timer: str, peers: Any) -> int:
    """Steps of a pass's profiled run after its timed ones (0: none). On a GPU, profile_steps.
    On a CPU, only for several ranks, whose analysis across ranks reads the host's ops (gloo),
    and no more than the timed steps: a reference holds no more past the warmup there."""
    steps = spec.profile_steps if spec.trace_dir else 0
    if timer == "cuda_event":
        return steps
    return min(steps, spec.steps) if peers.world_size > 1 else 0


def trace_name(spec: Spec, peers: Any, part: str) -> str:
    """A profiled pass's trace file: ARM-REPEAT-PART, each rank's with its rank (ARM-REPEAT-rankR-PART)."""
    rank = f"-rank{peers.rank}" if peers.world_size > 1 else ""
    return f"{spec.arm}-{spec.repeat}{rank}-{part}.trace.json.gz"
