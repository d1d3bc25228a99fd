"""The built-in workloads on this machine: setup and step times, launches, and agreement across processes.

Usage: python benchmarks/workloads_smoke.py --out DIR [--cases compiled:reduce-overhead,hf:none,...]
       [--batch-size 1] [--steps 64] [--options JSON] [--budget-s 225]

For each case (a workload and a compile mode), one measuring process: setup time (the
first setup compiles and captures), ms per step of `steps` free-running and `steps` forced
steps (CUDA events around each step, as the harness's end-to-end pass; perf_counter on a
CPU), tokens/s, and per step the graph launches, host kernel launches and GPU kernels of a
short profiler pass. Its free-running tokens are the reference. Then two fresh processes,
side by side, each decode free-running and forced by the reference's inputs, and count
the tokens that disagree with the reference: free-running, one near-tie in bf16 changes
every token after it; forced, a near-tie changes that one token only.

Prints a table and writes DIR/smoke.json (and one JSON per process). Needs only the
standard library, torch and, for the hf cases, transformers. A case that would not finish
within --budget-s is skipped and listed as such.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CASES = (
    "compiled:reduce-overhead,hf:reduce-overhead,compiled:default,compiled:none,hf:none,hf:default"
)
WARMUP_STEPS = 8
PROFILE_STEPS = 8
MIN_CASE_S = 20.0  # a case is started only with this much of the budget left


# -- the processes ----------------------------------------------------------------------


def _make(workload: str, mode: str, options: dict[str, Any]) -> Any:
    sys.path.insert(0, str(REPO_ROOT))
    if workload == "compiled":
        from guard.workloads.compiled import make
    else:
        from guard.workloads.hf import make
    return make(mode=mode, **options)


def _timed_steps(workload: Any, torch: Any, inputs: list[list[int]] | None, steps: int) -> dict[str, Any]:
    """`steps` steps, free-running (inputs None) or forced; each step's output copied to the host."""
    cuda = workload.device.type == "cuda"
    forced = None
    if inputs is not None:
        forced = torch.tensor(inputs, dtype=torch.int64, device=workload.device)  # preloaded, as the harness does
    step_ms, outputs = [], []
    if cuda:
        torch.cuda.synchronize()
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(steps)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(steps)]
    wall0 = time.perf_counter()
    for i in range(steps):
        t0 = time.perf_counter()
        if cuda:
            starts[i].record()
        out = workload.step(None if forced is None else forced[i])
        if cuda:
            ends[i].record()
        outputs.append(out.tolist())
        step_ms.append((time.perf_counter() - t0) * 1e3)
    if cuda:
        torch.cuda.synchronize()
        step_ms = [s.elapsed_time(e) for s, e in zip(starts, ends)]
    wall_s = time.perf_counter() - wall0
    ordered = sorted(step_ms)
    return {
        "outputs": outputs,
        "ms_per_step": statistics.median(step_ms),
        "ms_p10": ordered[len(ordered) // 10],
        "ms_p90": ordered[(len(ordered) * 9) // 10],
        "tok_per_s": len(outputs[0]) * steps / wall_s,
        "timer": "cuda_event" if cuda else "perf_counter",
    }


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """The measuring process: times, launches, and the reference tokens."""
    import torch

    t0 = time.perf_counter()
    workload = _make(args.workload, args.mode, json.loads(args.options))
    make_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    workload.setup(args.batch_size)
    setup_s = time.perf_counter() - t0
    for _ in range(WARMUP_STEPS):
        workload.step()
    t0 = time.perf_counter()
    workload.setup(args.batch_size)  # again: a fresh prefill, the graphs already there
    resetup_s = time.perf_counter() - t0
    first = workload.last.tolist()  # what prefill predicted: the first step's input
    free = _timed_steps(workload, torch, None, args.steps)
    inputs = [first, *free["outputs"][:-1]]
    workload.setup(args.batch_size)
    forced = _timed_steps(workload, torch, inputs, args.steps)
    result: dict[str, Any] = {
        "workload": args.workload,
        "mode": args.mode,
        "describe": workload.describe(),
        "make_s": make_s,
        "setup_s": setup_s,
        "resetup_s": resetup_s,
        "free": {k: v for k, v in free.items() if k != "outputs"},
        "forced": {k: v for k, v in forced.items() if k != "outputs"},
        "forced_self_disagreements": _disagreements(forced["outputs"], free["outputs"]),
        "reference": {"first": first, "inputs": inputs, "outputs": free["outputs"]},
    }
    if workload.device.type == "cuda":  # last: a profiler session leaves the process slower
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from engine_probe import kernels_per_step

        workload.setup(args.batch_size)
        result["profile"] = kernels_per_step(workload, PROFILE_STEPS, None)
    workload.teardown()
    return result


def replay(args: argparse.Namespace) -> dict[str, Any]:
    """A fresh process: free-running and forced tokens against the reference."""
    import torch

    reference = json.loads(Path(args.reference).read_text())["reference"]
    workload = _make(args.workload, args.mode, json.loads(args.options))
    workload.setup(args.batch_size)
    first = workload.last.tolist()
    free = _timed_steps(workload, torch, None, args.steps)["outputs"]
    workload.setup(args.batch_size)
    forced = _timed_steps(workload, torch, reference["inputs"], args.steps)["outputs"]
    return {
        "weights_checksum": workload.describe()["weights_checksum"],
        "prefill_agrees": first == reference["first"],
        "free_disagreements": _disagreements(free, reference["outputs"]),
        "first_free_disagreement_step": next(
            (i for i, (a, b) in enumerate(zip(free, reference["outputs"])) if a != b), None
        ),
        "forced_disagreements": _disagreements(forced, reference["outputs"]),
    }


def _disagreements(tokens: list[list[int]], reference: list[list[int]]) -> int:
    return sum(a != b for row, ref_row in zip(tokens, reference) for a, b in zip(row, ref_row))


# -- the parent --------------------------------------------------------------------------


def _child(args: argparse.Namespace, role: str, case: tuple[str, str], out: Path, extra: list[str]) -> list[str]:
    workload, mode = case
    return [
        sys.executable, str(Path(__file__).resolve()), "--child", role, "--workload", workload, "--mode", mode,
        "--batch-size", str(args.batch_size), "--steps", str(args.steps), "--options", args.options,
        "--json", str(out), *extra,
    ]


def _run(cmds: list[list[str]], logs: list[Path], timeout_s: float) -> list[int | str]:
    """Start the commands together; their exit codes, or 'timed out'."""
    procs = []
    for cmd, log in zip(cmds, logs):
        procs.append(subprocess.Popen(cmd, stdout=log.open("w"), stderr=subprocess.STDOUT, cwd=REPO_ROOT))
    deadline = time.monotonic() + timeout_s
    codes: list[int | str] = []
    for proc in procs:
        try:
            codes.append(proc.wait(timeout=max(1.0, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            codes.append("timed out")
    return codes


def run_case(args: argparse.Namespace, case: tuple[str, str], out_dir: Path, deadline: float) -> dict[str, Any]:
    name = f"{case[0]}-{case[1]}"
    ref_path = out_dir / f"{name}.measure.json"
    code = _run([_child(args, "measure", case, ref_path, [])], [out_dir / f"{name}.measure.log"],
                deadline - time.monotonic())[0]
    row: dict[str, Any] = {"case": name, "workload": case[0], "mode": case[1]}
    if code != 0:
        return row | {"error": f"measuring process: exit {code}; see {name}.measure.log"}
    row |= json.loads(ref_path.read_text())
    del row["reference"]
    replay_paths = [out_dir / f"{name}.replay{i}.json" for i in (1, 2)]
    cmds = [_child(args, "replay", case, path, ["--reference", str(ref_path)]) for path in replay_paths]
    codes = _run(cmds, [path.with_suffix(".log") for path in replay_paths], deadline - time.monotonic())
    row["replays"] = [
        json.loads(path.read_text()) if code == 0 else {"error": f"exit {code}; see {path.with_suffix('.log').name}"}
        for code, path in zip(codes, replay_paths)
    ]
    return row


def _fmt(value: Any, digits: int = 2) -> str:
    if value is None:
        return "-"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def _ran_as(described: dict[str, Any]) -> str:
    if described["cuda_graphs"]:
        return "CUDA graphs"
    return "compiled" if described["compiled"] else "eager"


def table(rows: list[dict[str, Any]]) -> str:
    head = ["case", "ran as", "setup s", "ms/step free", "ms/step forced", "tok/s", "graph launches",
            "kernel launches", "kernels", "free disagree", "forced disagree", "same weights"]
    lines = [" | ".join(head), " | ".join("---" for _ in head)]
    for row in rows:
        if "error" in row or "skipped" in row:
            lines.append(" | ".join([row["case"], row.get("error") or row["skipped"], *["" for _ in head[2:]]]))
            continue
        profile = row.get("profile", {})
        replays = [r for r in row["replays"] if "error" not in r]
        same = all(r["weights_checksum"] == row["describe"]["weights_checksum"] for r in replays)
        lines.append(" | ".join([
            row["case"],
            _ran_as(row["describe"]),
            _fmt(row["setup_s"], 1),
            f"{row['free']['ms_per_step']:.3f} ({row['free']['ms_p10']:.3f}-{row['free']['ms_p90']:.3f})",
            f"{row['forced']['ms_per_step']:.3f}",
            _fmt(row["free"]["tok_per_s"], 0),
            _fmt(profile.get("graph_launches_per_step"), 1),
            _fmt(profile.get("kernel_launches_per_step"), 1),
            _fmt(profile.get("kernels_per_step"), 1),
            ", ".join(str(r["free_disagreements"]) for r in replays) or "-",
            ", ".join(str(r["forced_disagreements"]) for r in replays) or "-",
            ("yes" if same else "NO") + ("" if len(replays) == 2 else f" ({2 - len(replays)} replay failed)"),
        ]))
    return "\n".join(lines)


def _environment() -> dict[str, Any]:
    import platform

    import torch

    env: dict[str, Any] = {"python": platform.python_version(), "torch": torch.__version__,
                           "cuda": torch.version.cuda, "gpu": None}
    if torch.cuda.is_available():
        env["gpu"] = torch.cuda.get_device_name()
    try:
        import transformers

        env["transformers"] = transformers.__version__
    except ImportError:
        env["transformers"] = None
    return env


def parse_cases(text: str) -> list[tuple[str, str]]:
    cases = []
    for item in text.split(","):
        workload, _, mode = item.strip().partition(":")
        if workload not in ("compiled", "hf") or not mode:
            raise SystemExit(f"--cases takes WORKLOAD:MODE items (compiled or hf), not {item!r}")
        cases.append((workload, mode))
    return cases


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--cases", default=DEFAULT_CASES)
    parser.add_argument("--batch-size", type=int, default=1)
    parser.add_argument("--steps", type=int, default=64)
    parser.add_argument("--options", default="{}", help="JSON of workload options for every case, e.g. sizes")
    parser.add_argument("--budget-s", type=float, default=225.0)
    parser.add_argument("--child", choices=("measure", "replay"), help=argparse.SUPPRESS)
    parser.add_argument("--workload", help=argparse.SUPPRESS)
    parser.add_argument("--mode", help=argparse.SUPPRESS)
    parser.add_argument("--reference", help=argparse.SUPPRESS)
    parser.add_argument("--json", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        result = (measure if args.child == "measure" else replay)(args)
        args.json.write_text(json.dumps(result))
        return 0
    if args.out is None:
        parser.error("--out DIR is required")
    cases = parse_cases(args.cases)
    try:
        json.loads(args.options)
    except json.JSONDecodeError as exc:
        raise SystemExit(f"--options must be JSON, as {{\"layers\": 4}}: {exc}") from None
    start = time.monotonic()
    deadline = start + args.budget_s
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for case in cases:
        name = f"{case[0]}-{case[1]}"
        if deadline - time.monotonic() < MIN_CASE_S:
            rows.append({"case": name, "skipped": f"skipped: under {MIN_CASE_S:.0f} s of the budget left"})
            continue
        case_start = time.monotonic()
        rows.append(run_case(args, case, args.out, deadline) | {"case_s": time.monotonic() - case_start})
        print(f"[smoke] {name}: {rows[-1]['case_s']:.1f} s", file=sys.stderr, flush=True)
    summary = {"environment": _environment(), "batch_size": args.batch_size, "steps": args.steps,
               "options": json.loads(args.options), "total_s": time.monotonic() - start, "cases": rows}
    (args.out / "smoke.json").write_text(json.dumps(summary, indent=2))
    env = summary["environment"]
    print(f"torch {env['torch']}, transformers {env['transformers']}, {env['gpu'] or 'no GPU'}; "
          f"batch size {args.batch_size}, {args.steps} steps each; {summary['total_s']:.0f} s")
    print(table(rows))
    failed = [row["case"] for row in rows if "error" in row]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
