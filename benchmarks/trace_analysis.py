"""Speed and memory of trace analysis on decode-sized traces, against plain JSON parsing.

Usage: python benchmarks/trace_analysis.py [--steps 200 52] [--repeats 3] [--workdir DIR] [--json OUT]
       [--skip-hta]

For each STEPS, builds a Kineto trace of that many decode steps by repeating the 16 steps of
the H200 fixture `h200-refengine-layer-graphs-bs1.json.gz` (1,073 kernels each) with shifted
timestamps and correlation ids (200 steps: the H200-sized trace, 176 MiB; 52 steps: 48 MB),
then runs, each in a fresh subprocess so that time and peak memory are the whole process's:
  (a) orjson: a process that reads the file and parses it with orjson.loads,
  (b) guard.trace.read_trace of it,
  (c) `python -m guard analyze FILE --json`,
  (d) HolisticTraceAnalysis loading the same trace (installed into a throwaway venv).
Tasks and sizes are interleaved over the repeats, so drift on a shared machine hits all alike.
Not a test: it prints a table and, per trace, the target ratios: (c)'s process time over
(a)'s, at most MAX_TIME_RATIO, and (c)'s peak memory over the file size, under MAX_MEMORY_RATIO.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "tests" / "fixtures" / "traces" / "h200-refengine-layer-graphs-bs1.json.gz"
FIXTURE_STEPS = 16
HTA_VENV = Path(tempfile.gettempdir()) / "guard-bench-hta-venv"
HTA_PACKAGE = "HolisticTraceAnalysis"

# Targets the reader is held to
MAX_TIME_RATIO = 1.5
MAX_MEMORY_RATIO = 2.0


# --- building the trace --------------------------------------------------------------------
# msgspec keeps every value's text as written (Raw), so the copy is Kineto's own spelling.


def _ns(raw: Any) -> int:
    return int(Decimal(bytes(raw).decode()) * 1000)


def _us_text(ns: int) -> bytes:
    """Kineto's layout: microseconds with three decimals, exact."""
    sign, ns = ("-", -ns) if ns < 0 else ("", ns)
    return f"{sign}{ns // 1000}.{ns % 1000:03d}".encode()


def _value(raw: Any) -> Any:
    import msgspec

    return None if raw is None else msgspec.json.decode(raw)


def _steps_of(events: list[dict[str, Any]]) -> tuple[list[int], int]:
    """Template step of each event (-1: written once, outside the repeated steps) and the
    steps' span in ns. A step ends with its cudaStreamSynchronize (the token ids copied to
    the host); GPU and flow events go with the step of the call that launched them."""
    sync_ns = sorted(_ns(e["ts"]) for e in events if _value(e.get("name")) == "cudaStreamSynchronize")
    if len(sync_ns) != FIXTURE_STEPS:
        raise SystemExit(f"expected {FIXTURE_STEPS} cudaStreamSynchronize in {FIXTURE}, found {len(sync_ns)}")

    def host_step(ts_ns: int) -> int:
        return next((i for i, end in enumerate(sync_ns) if ts_ns <= end), FIXTURE_STEPS - 1)

    steps = [-1] * len(events)
    step_of_corr: dict[int, int] = {}
    for i, e in enumerate(events):
        if _value(e.get("ph")) == "X" and _value(e.get("cat")) in ("cuda_runtime", "cpu_op"):
            steps[i] = host_step(_ns(e["ts"]))
            corr = _value(e["args"]).get("correlation")
            if corr is not None:
                step_of_corr[corr] = steps[i]
    for i, e in enumerate(events):
        cat = _value(e.get("cat"))
        if cat in ("kernel", "gpu_memcpy", "gpu_memset"):
            steps[i] = step_of_corr.get(_value(e["args"]).get("correlation"), -1)
        elif cat == "ac2g":
            steps[i] = step_of_corr.get(_value(e.get("id")), -1)
    stepped = [events[i] for i, s in enumerate(steps) if s >= 0]
    first = min(_ns(e["ts"]) for e in stepped)
    last = max(_ns(e["ts"]) + (_ns(e["dur"]) if "dur" in e else 0) for e in stepped)
    return steps, last - first


def _event_text(event: dict[str, Any]) -> bytes:
    """One event laid out as Kineto writes it: `"key": value` pairs in a braced block."""
    import msgspec

    body = b", ".join(msgspec.json.encode(k) + b": " + bytes(v) for k, v in event.items())
    return b"  {\n    " + body + b"\n  }"


def build_trace(out: Path, steps: int) -> dict[str, int]:
    """Write a Kineto trace of `steps` decode steps to `out`; return what it holds."""
    import msgspec

    top = msgspec.json.decode(gzip.decompress(FIXTURE.read_bytes()), type=dict[str, msgspec.Raw])
    events = msgspec.json.decode(top.pop("traceEvents"), type=list[dict[str, msgspec.Raw]])
    step_of, span_ns = _steps_of(events)
    period_ns = span_ns + 50_000  # a 50 us gap between repeated blocks of 16 steps
    corrs = [
        c
        for e in events
        if "args" in e and _value(e.get("ph")) == "X"
        for c in [_value(e["args"]).get("correlation")]
        if c is not None
    ]
    corr_period = max(corrs) - min(corrs) + 1

    kernels = 0
    with out.open("wb") as f:
        f.write(b"{\n" + b",\n".join(msgspec.json.encode(k) + b": " + bytes(v) for k, v in top.items()))
        f.write(b',\n"traceEvents": [\n')
        f.write(b",\n".join(_event_text(e) for e, s in zip(events, step_of) if s < 0))
        for step in range(steps):
            block, template = divmod(step, FIXTURE_STEPS)
            for e, s in zip(events, step_of):
                if s != template:
                    continue
                copy = dict(e)
                copy["ts"] = msgspec.Raw(_us_text(_ns(e["ts"]) + block * period_ns))
                if "args" in e:
                    args = msgspec.json.decode(e["args"], type=dict[str, msgspec.Raw])
                    if "correlation" in args:
                        args["correlation"] = msgspec.Raw(b"%d" % (_value(args["correlation"]) + block * corr_period))
                        copy["args"] = msgspec.Raw(msgspec.json.encode(args))
                if "id" in e:
                    copy["id"] = msgspec.Raw(b"%d" % (_value(e["id"]) + block * corr_period))
                kernels += _value(e.get("cat")) == "kernel"
                f.write(b",\n" + _event_text(copy))
        f.write(b"\n]}\n")
    return {"steps": steps, "kernels": kernels, "bytes": out.stat().st_size}


# --- the tasks, each run in a child process ------------------------------------------------


def _task(name: str, path: Path) -> dict[str, float]:
    """Runs in the child: the operation's own time, without interpreter start and imports."""
    if name == "orjson":
        import orjson

        started = time.perf_counter()
        data = path.read_bytes()
        read_s = time.perf_counter() - started
        orjson.loads(data)
        return {"op_s": time.perf_counter() - started - read_s, "read_s": read_s}
    if name == "read_trace":
        sys.path.insert(0, str(REPO))
        from guard.trace._read import read_trace

        started = time.perf_counter()
        trace = read_trace(path)
        return {"op_s": time.perf_counter() - started, "gpu_records": len(trace.gpu)}
    if name == "hta":
        from hta.trace_analysis import TraceAnalysis

        started = time.perf_counter()
        analysis = TraceAnalysis(trace_files={0: str(path)}, trace_dir=str(path.parent))
        return {"op_s": time.perf_counter() - started, "rows": sum(len(df) for df in analysis.t.traces.values())}
    raise SystemExit(f"unknown task {name}")


def _run(command: list[str], log: Path) -> dict[str, Any]:
    """Run one child; wall time here, peak RSS from the kernel's accounting of that child."""
    with log.open("wb") as out:
        started = time.perf_counter()
        child = subprocess.Popen(command, cwd=REPO, stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(child.pid, 0)
        wall_s = time.perf_counter() - started
    child.returncode = os.waitstatus_to_exitcode(status)
    result: dict[str, Any] = {"wall_s": wall_s, "peak_rss_bytes": usage.ru_maxrss * 1024, "rc": child.returncode}
    last = log.read_bytes().strip().splitlines()[-1:] or [b""]
    if last[0].startswith(b"{") and b'"op_s"' in last[0]:
        result |= json.loads(last[0])
    return result


def _analyze_available() -> str | None:
    """None when `python -m guard analyze` runs here, else why not."""
    probe = subprocess.run(
        [sys.executable, "-m", "guard", "analyze", "--help"], cwd=REPO, capture_output=True, text=True
    )
    return None if probe.returncode == 0 else (probe.stderr.strip().splitlines() or ["no output"])[-1]


def _hta_python() -> tuple[str | None, str]:
    """An interpreter that can import HolisticTraceAnalysis, installing it into a throwaway
    venv under the temp dir when needed; or None and the reason it could not be had."""
    importable = "import hta.trace_analysis"
    if subprocess.run([sys.executable, "-c", importable], capture_output=True).returncode == 0:
        return sys.executable, "already installed"
    python = HTA_VENV / "bin" / "python"
    if not python.exists():
        made = subprocess.run([sys.executable, "-m", "venv", str(HTA_VENV)], capture_output=True, text=True)
        if made.returncode != 0:
            return None, f"venv failed: {made.stderr.strip()[-200:]}"
    if subprocess.run([str(python), "-c", importable], capture_output=True).returncode != 0:
        print(f"installing {HTA_PACKAGE} into {HTA_VENV} ...", file=sys.stderr, flush=True)
        installed = subprocess.run(
            [str(python), "-m", "pip", "install", "--quiet", HTA_PACKAGE], capture_output=True, text=True
        )
        if installed.returncode != 0:
            return None, f"pip install {HTA_PACKAGE} failed: {installed.stderr.strip()[-200:]}"
    if subprocess.run([str(python), "-c", importable], capture_output=True).returncode != 0:
        return None, f"{HTA_PACKAGE} installed but does not import"
    version = subprocess.run(
        [str(python), "-c", "import importlib.metadata as m; print(m.version('HolisticTraceAnalysis'))"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    return str(python), f"{HTA_PACKAGE} {version} in {HTA_VENV}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, nargs="+", default=[200, 52],
                        help="decode steps of each built trace (200: H200-sized, 52: 48 MB)")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each task; the median is reported")
    parser.add_argument("--workdir", type=Path, default=None, help="where the traces are built (default: a temp dir)")
    parser.add_argument("--skip-hta", action="store_true", help="do not install or time HolisticTraceAnalysis")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    parser.add_argument("--task", nargs=2, metavar=("NAME", "FILE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.task:
        print(json.dumps(_task(args.task[0], Path(args.task[1]))))
        return

    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="guard-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    built: dict[str, dict[str, int]] = {}
    for steps in args.steps:
        trace = workdir / f"decode-trace-{steps}-steps.json"
        started = time.perf_counter()
        built[str(trace)] = build_trace(trace, steps)
        made = built[str(trace)]
        print(
            f"built {trace}: {made['steps']} steps, {made['kernels']:,} kernels "
            f"({made['kernels'] / made['steps']:.0f} per step), {made['bytes'] / 1e6:.1f} MB "
            f"in {time.perf_counter() - started:.1f} s",
            flush=True,
        )

    me = str(Path(__file__).resolve())
    notes: dict[str, str] = {}
    why_no_analyze = _analyze_available()
    if why_no_analyze is not None:
        raise SystemExit(f"`python -m guard analyze` does not run here: {why_no_analyze}")
    hta_python = None
    if args.skip_hta:
        notes["HTA TraceAnalysis"] = "not measured: --skip-hta"
    else:
        hta_python, hta_note = _hta_python()
        notes["HTA TraceAnalysis"] = hta_note if hta_python else f"not measured: {hta_note}"

    def tasks_of(trace: str) -> dict[str, list[str]]:
        tasks = {
            "orjson": [sys.executable, me, "--task", "orjson", trace],
            "read_trace": [sys.executable, me, "--task", "read_trace", trace],
            "guard analyze --json": [sys.executable, "-m", "guard", "analyze", trace, "--json"],
        }
        if hta_python:
            tasks["HTA TraceAnalysis"] = [hta_python, me, "--task", "hta", trace]
        return tasks

    runs: dict[str, dict[str, list[dict[str, Any]]]] = {
        trace: {name: [] for name in tasks_of(trace)} for trace in built
    }
    for repeat in range(args.repeats):
        for trace in built:
            for name, command in tasks_of(trace).items():
                log = workdir / f"{Path(trace).stem}-{name.split()[0]}-{repeat}.log"
                result = _run(command, log)
                if result["rc"] != 0:
                    raise SystemExit(f"{name} failed (exit {result['rc']}); see {log}")
                runs[trace][name].append(result)
                print(
                    f"  run {repeat + 1}/{args.repeats} {Path(trace).name} {name}: {result['wall_s']:.2f} s process",
                    file=sys.stderr,
                    flush=True,
                )

    print(f"\nmedian of {args.repeats} runs; 'operation' excludes interpreter start and imports, "
          "'process' is the whole child process")
    figures: dict[str, dict[str, dict[str, float]]] = {}
    for trace, by_task in runs.items():
        size = built[trace]["bytes"]
        figures[trace] = {
            name: {
                "op_s": statistics.median(r.get("op_s", r["wall_s"]) for r in results),
                "process_s": statistics.median(r["wall_s"] for r in results),
                "peak_rss_mib": statistics.median(r["peak_rss_bytes"] for r in results) / 2**20,
                "peak_over_file": statistics.median(r["peak_rss_bytes"] for r in results) / size,
            }
            for name, results in by_task.items()
        }
        print(f"\n{Path(trace).name}: {size / 1e6:.1f} MB uncompressed JSON ({size:,} bytes), "
              f"{built[trace]['kernels']:,} kernels")
        print(f"{'task':24s} {'operation s':>12s} {'process s':>10s} {'peak RSS MiB':>13s} {'peak / file':>12s}")
        for name, fig in figures[trace].items():
            print(
                f"{name:24s} {fig['op_s']:12.2f} {fig['process_s']:10.2f} "
                f"{fig['peak_rss_mib']:13.0f} {fig['peak_over_file']:12.2f}"
            )
        analyze, orjson = figures[trace]["guard analyze --json"], figures[trace]["orjson"]
        time_ratio = analyze["process_s"] / orjson["process_s"]
        memory_ratio = analyze["peak_over_file"]
        print(
            f"guard analyze process / orjson process: {time_ratio:.2f} (target <= {MAX_TIME_RATIO})"
            f" {'met' if time_ratio <= MAX_TIME_RATIO else 'MISSED'}"
        )
        print(f"guard analyze process / orjson.loads call alone: {analyze['process_s'] / orjson['op_s']:.2f}")
        print(
            f"guard analyze peak memory / file size: {memory_ratio:.2f} (target < {MAX_MEMORY_RATIO})"
            f" {'met' if memory_ratio < MAX_MEMORY_RATIO else 'MISSED'}"
        )
        print(f"read_trace call / orjson.loads call: {figures[trace]['read_trace']['op_s'] / orjson['op_s']:.2f}")
        if "HTA TraceAnalysis" in figures[trace]:
            hta_over_reader = figures[trace]["HTA TraceAnalysis"]["op_s"] / figures[trace]["read_trace"]["op_s"]
            print(f"HTA load time / read_trace time: {hta_over_reader:.1f}")
    for name, note in notes.items():
        print(f"{name}: {note}")
    if args.json:
        args.json.write_text(json.dumps({"traces": built, "figures": figures, "notes": notes, "runs": runs}, indent=2))


if __name__ == "__main__":
    main()
