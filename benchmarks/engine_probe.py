"""Profile the reference engine: kernels per decode step, streams, ms per step, per capture mode.

Usage: python benchmarks/engine_probe.py [--steps N] [--json OUT.json]

Needs a CUDA GPU for the graph modes; on a CPU it reports the eager path only.
"""

from __future__ import annotations

import argparse
import collections
import gzip
import tempfile
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from guard.engine import RefEngine  # noqa: E402

MODES = {
    "step graph, bs 1-2 captured (base)": {"capture_mode": "step", "capture_batch_sizes": (1, 2)},
    "layer graphs, padded to 4 (demo head)": {"capture_mode": "layer", "capture_batch_sizes": (4,)},
    "eager": {"capture": False},
}


def kernels_per_step(engine: RefEngine, steps: int, trace_path: Path | None) -> dict[str, object]:
    """Count from the exported Chrome trace, which records each kernel of a graph replay."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            engine.step().tolist()
        torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(raw))
        data = raw.read_bytes()
    if trace_path is not None:
        trace_path.write_bytes(gzip.compress(data))
    events = json.loads(data)["traceEvents"]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    streams = collections.Counter(e.get("args", {}).get("stream") for e in kernels)
    names = [str(e.get("name", "")) for e in events if e.get("cat") != "kernel"]
    launches = sum(1 for name in names if name.startswith(("cudaGraphLaunch", "cuGraphLaunch")))
    # kernels the host launched one by one; a graph's kernels count in kernels_per_step only
    kernel_launches = sum(1 for name in names if name.startswith(("cudaLaunchKernel", "cuLaunchKernel")))
    return {
        "kernels_per_step": len(kernels) / steps,
        "streams": {str(k): v / steps for k, v in sorted(streams.items(), key=str)},
        "graph_launches_per_step": launches / steps,
        "kernel_launches_per_step": kernel_launches / steps,
    }


def time_steps(engine: RefEngine, steps: int) -> dict[str, float]:
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(steps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(steps)]
    wall = time.perf_counter()
    for i in range(steps):
        starts[i].record()
        out = engine.step()
        ends[i].record()
        out.tolist()
    torch.cuda.synchronize()
    wall = time.perf_counter() - wall
    ms = [s.elapsed_time(e) for s, e in zip(starts, ends)]
    return {"gpu_ms_per_step": statistics.median(ms), "wall_ms_per_step": wall / steps * 1e3}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=64)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--traces", type=Path, help="folder for gzipped Chrome traces of bs 1")
    args = parser.parse_args()
    rows = []
    for mode, kwargs in MODES.items():
        engine = RefEngine(max_len=1024, **kwargs)
        for bs in (1, 2):
            engine.setup(bs)
            tokens = [engine.step().tolist() for _ in range(16)]
            row = {"mode": mode, "batch_size": bs, "tokens_head": tokens[:4], "tokens": tokens}
            if torch.cuda.is_available():
                row |= time_steps(engine, args.steps)
                trace = None
                if args.traces and bs == 1 and "eager" not in mode:
                    args.traces.mkdir(parents=True, exist_ok=True)
                    trace = args.traces / f"refengine-{kwargs['capture_mode']}-bs1.json.gz"
                row |= kernels_per_step(engine, 16, trace)
            rows.append(row)
        engine.teardown()
    ref = {r["batch_size"]: r["tokens"] for r in rows if r["mode"].startswith("step")}
    for r in rows:
        r["tokens_match_base"] = r["tokens"] == ref[r["batch_size"]]
        del r["tokens"]
    print(f"torch {torch.__version__}, device {torch.cuda.get_device_name() if torch.cuda.is_available() else 'cpu'}")
    for r in rows:
        print(json.dumps(r))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
