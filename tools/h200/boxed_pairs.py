"""On the GPU: an A/A pair and a regression pair of the demo's engine, each run unboxed
(build.isolation = "none") and in the kernel's box ("kernel": a cgroup v2 and PID, IPC and
mount namespaces per process), alternating, so that the box's cost on the figures is seen
side by side on one machine in one call. Each `guard run` is kept in OUT/RUN/ (report.json,
comment.md, stderr.txt; traces left out) and its figures appended to OUT/boxed_pairs.jsonl
as it ends; a run already there is skipped (a second call continues). `--dtype` picks the
engine's dtype (float32, the demo's, or bfloat16); runs are kept per dtype.

`--start-cost N` then times N launches of a trivial process (`python3 -c pass`, as the build
user, through the guard's own launcher) unboxed and boxed, alternating, to OUT/start_cost.json:
what the box adds to each process's start.

    python3 tools/h200/boxed_pairs.py --out "$OUT/boxed" --work /tmp/boxed [--budget-s 540] \
        [--dtype bfloat16] [--start-cost 40]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from _guard_runs import append, git, lines, run_kept

from guard.demo._repo import make_demo_repo

CONFIG = """target_branch = "main"

[workload]
entry = "bench/guard_workload.py:make"
batch_sizes = [1, 2]
steps = {steps}
warmup_steps = 32
options = {{ layers = {layers}, dtype = "{dtype}" }}

[build]
method = "venv"
install = "pip install --no-deps --no-build-isolation --no-index ."
isolation = "{isolation}"

[measure]
repeats = {repeats}
allow_few_repeats = {few}
max_rounds = 1
"""
RUNS = [("aa", "none"), ("aa", "kernel"), ("regression", "none"), ("regression", "kernel")]


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--work", type=Path, required=True)
    p.add_argument("--budget-s", type=float, default=540.0)
    p.add_argument("--steps", type=int, default=128)
    p.add_argument("--layers", type=int, default=30)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    p.add_argument("--start-cost", type=int, default=0, metavar="N")
    args = p.parse_args()
    started = time.monotonic()
    args.out.mkdir(parents=True, exist_ok=True)
    repo = args.work / "repo"
    if not repo.exists():
        make_demo_repo(repo, steps=args.steps, repeats=args.repeats)
        git(repo, "checkout", "--quiet", "-b", "aa", "main")
        engine = repo / "refengine" / "engine.py"
        engine.write_text(engine.read_text() + "\n# A comment, nothing else.\n")
        git(repo, "commit", "--quiet", "-am", "engine: a comment, nothing else")
        git(repo, "checkout", "--quiet", "main")
    heads = {"aa": "aa", "regression": "piecewise-capture"}
    done = {(r["pair"], r["isolation"], r.get("dtype", "float32")) for r in lines(args.out / "boxed_pairs.jsonl")}
    for pair, isolation in RUNS:
        if (pair, isolation, args.dtype) in done:
            continue
        if time.monotonic() - started > args.budget_s - 150:
            print(f"boxed_pairs: stopping before {pair}/{isolation}: the budget is spent; call again", flush=True)
            return 3
        config = args.work / f"guard-{isolation}-{args.dtype}.toml"
        config.write_text(CONFIG.format(steps=args.steps, layers=args.layers, isolation=isolation, dtype=args.dtype,
                                        repeats=args.repeats, few=str(args.repeats < 5).lower()))
        name = f"{pair}-{isolation}-{args.dtype}"
        proc, wall = run_kept([sys.executable, "-m", "guard", "run", "--repo", str(repo), "--base", "main",
                               "--head", heads[pair], "--config", str(config), "--out", str(args.work / "runs" / name)],
                              args.work / "runs" / name, args.out / name)
        line = {"pair": pair, "isolation": isolation, "dtype": args.dtype, "exit": proc.returncode,
                "wall_s": round(wall, 1)}
        if (args.out / name / "report.json").exists():
            line |= _figures(json.loads((args.out / name / "report.json").read_text()))
        append(args.out / "boxed_pairs.jsonl", line)
    if args.start_cost:
        costs = _start_cost(args.start_cost)
        (args.out / "start_cost.json").write_text(json.dumps(costs, indent=1) + "\n")
        print(json.dumps({k: v["median_ms"] for k, v in costs.items()}), flush=True)
    return 0


def _start_cost(n: int) -> dict[str, dict[str, float]]:
    """Wall ms of launching `python3 -c pass` as the build user through the guard's launcher,
    unboxed and boxed, `n` times each, alternating (the same host state for both)."""
    import statistics

    from guard.sandbox import Launch, choose_box, launch, pr_user

    user = pr_user("guard-pr")
    times: dict[str, list[float]] = {"none": [], "kernel": []}
    for _ in range(n):
        for isolation in ("none", "kernel"):
            box = choose_box(isolation)  # type: ignore[arg-type]
            if isolation == "kernel" and not box.isolation.boxed():
                raise SystemExit(f"boxed_pairs: this host gives no box: {box.missing}")
            t = time.perf_counter()
            one = Launch([sys.executable, "-c", "pass"], subprocess.DEVNULL, cwd=Path("/"), user=user)
            code = launch(box, [one], timeout_s=60).codes[0]
            times[isolation].append((time.perf_counter() - t) * 1000)
            if code != 0:
                raise SystemExit(f"boxed_pairs: the trivial process exited {code} ({isolation})")
    return {k: {"n": len(v), "median_ms": round(statistics.median(v), 2), "min_ms": round(min(v), 2),
                "max_ms": round(max(v), 2), "all_ms": [round(x, 2) for x in v]}
            for k, v in times.items()}


def _figures(report: dict) -> dict:
    """What the comparison needs: the verdict, the box, each batch size's base and head GPU ms
    per step (median of processes) and the change with its interval."""
    sizes = {}
    for b in report["batch_sizes"]:
        arms = {a["arm"]: a for a in b["arms"]}
        base_ms = arms[report["base"]]["gpu_ms_per_step"]
        change = b.get("gpu_ms_change") or {}
        sizes[str(b["batch_size"])] = {
            "base_ms": arms[report["base"]]["gpu_ms_per_step"]["median"],
            "head_ms": arms[report["head"]]["gpu_ms_per_step"]["median"],
            "base_range_ms": [base_ms["min"], base_ms["max"]],
            "change_pct": change.get("pct"), "ci_pct": [change.get("ci_low_pct"), change.get("ci_high_pct")],
            "verdict": b["verdict"],
        }
    return {"verdict": report["verdict"], "isolation_field": report.get("isolation"),
            "swept": {a["name"]: a.get("swept", 0) for a in report["arms"]}, "duration_s": report["duration_s"],
            "sizes": sizes}


if __name__ == "__main__":
    raise SystemExit(main())
