"""On the GPU: issue 36's pairs, each a `guard run` at the defaults (5 processes per arm, up to
4 rounds in the 180 s budget), timed from start to verdict:

- `demo`: the demo's own pair (piecewise capture at one padded size): the time to verdict;
- `fallback-gain`: the reference engine capturing batch sizes 1, 2, 4 and 8 with an eager
  fallback for the others, measured at batch size 3 with many layers; the head removes the
  fallback, so 3 pads up to 4 and replays a graph instead of launching every kernel: decode
  faster end to end (expected `improvement`, said in end-to-end terms);
- `host-only`: the demo's base, and a head that spins the host for `--host-us` before each
  step's launches: GPU time unchanged, end-to-end time longer (expected `regression`, titled
  end to end);
- `fallback-mix`: the demo's `fallback` scenario (an MoE engine, CUDA graphs at 1, 2, 4 and 8
  with an eager fallback, measured at batch sizes 1 and 6 and over its batch-size mix); the head
  removes the fallback, so 3, 6 and 9 pad up and replay graphs: each padded step does more GPU
  work and decodes faster end to end (issue 48: expected `improvement`, decided by what the
  user feels, the comment saying what GPU ms did and why);
- `added-op`: the demo's base, and a head whose debug flag (on) copies each layer's output to a
  new tensor and checks it is finite: a device-to-device copy and two small kernels per layer at
  every batch size, inside the graphs (issue 36 item 6: said as copies and kernels added at
  every size, not as idle time).

Each run is kept in OUT/NAME/ (report.json, comment.md, stderr.txt) and its figures appended
to OUT/decision_v4.jsonl as it ends; a run already there is skipped, so a second call goes on
where the first stopped. `--dtype` as tools/h200/boxed_pairs.py.

    python3 tools/h200/decision_v4.py --out "$OUT/v4" --work /tmp/v4 [--budget-s 560] [--only demo,...]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from _guard_runs import append, git, lines, run_kept

from guard.demo._repo import make_demo_repo

PAIRS = ("demo", "fallback-gain", "host-only", "added-op", "fallback-mix")
FALLBACK_CONFIG = """target_branch = "main"

[workload]
entry = "bench/guard_workload.py:make"
batch_sizes = [3]
steps = {steps}
options = {{ capture_batch_sizes = [1, 2, 4, 8], fallback = true, layers = {layers}, dtype = "{dtype}" }}

[build]
method = "venv"
install = "pip install --no-deps --no-build-isolation --no-index ."
"""
STEP_LINE = "        size, captured = self._policy(rows)\n"
RESIDUAL_LINE = ("        x = x + (out if self.comm is None else self.comm.all_reduce(out))"
                 "  # a rank's heads: a partial sum\n")
DEBUG_LINES = ("        if DEBUG_CHECKS:  # keep each layer's output and check it is finite\n"
               "            self.debug_x, self.debug_finite = x.clone(), torch.isfinite(x).all()\n")


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--work", type=Path, required=True)
    p.add_argument("--budget-s", type=float, default=560.0)
    p.add_argument("--steps", type=int, default=128)
    p.add_argument("--layers", type=int, default=16, help="the fallback pair's layers: launches an eager step pays")
    p.add_argument("--host-us", type=float, default=300.0, help="the host-only head's spin before each step")
    p.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    p.add_argument("--only", default=",".join(PAIRS), help="comma-separated pairs to run")
    args = p.parse_args()
    started = time.monotonic()
    args.out.mkdir(parents=True, exist_ok=True)
    wanted = [name for name in args.only.split(",") if name]
    unknown = sorted(set(wanted) - set(PAIRS))
    if unknown:
        p.error(f"--only: unknown pair(s) {', '.join(unknown)}; the pairs: {', '.join(PAIRS)}")
    done = {(r["pair"], r["dtype"]) for r in lines(args.out / "decision_v4.jsonl")}
    for pair in wanted:
        if (pair, args.dtype) in done:
            continue
        if time.monotonic() - started > args.budget_s - 240:
            print(f"decision_v4: stopping before {pair}: the budget is spent; call again", flush=True)
            return 3
        repo, head, config = _staged(pair, args)
        name = f"{pair}-{args.dtype}"
        out, kept = args.work / "runs" / name, args.out / name
        proc, wall = run_kept([sys.executable, "-m", "guard", "run", "--repo", str(repo), "--base", "main", "--head",
                               head, "--out", str(out)] + (["--config", str(config)] if config else []), out, kept)
        line = {"pair": pair, "dtype": args.dtype, "exit": proc.returncode, "wall_s": round(wall, 1)}
        if (kept / "report.json").exists():
            line |= _figures(json.loads((kept / "report.json").read_text()), kept / "comment.md")
        append(args.out / "decision_v4.jsonl", line)
    return 0


def _staged(pair: str, args: argparse.Namespace) -> tuple[Path, str, Path | None]:
    """The pair's repository (made once), its head branch, and an outside config or None."""
    repo = args.work / pair
    config = None
    if pair == "demo":
        if not repo.exists():
            make_demo_repo(repo, steps=args.steps)
        return repo, "piecewise-capture", None
    if pair == "fallback-gain":
        if not repo.exists():
            make_demo_repo(repo, steps=args.steps, scenario="fallback-win")
        config = args.work / f"fallback-gain-{args.dtype}.toml"
        config.write_text(FALLBACK_CONFIG.format(steps=args.steps, layers=args.layers, dtype=args.dtype))
        return repo, "remove-fallback", config
    if pair == "fallback-mix":
        if not repo.exists():
            make_demo_repo(repo, steps=args.steps, scenario="fallback")
        return repo, "remove-fallback", None
    if pair == "added-op":
        if not repo.exists():
            make_demo_repo(repo, steps=args.steps)
            git(repo, "checkout", "--quiet", "-b", "added-op", "main")
            model = repo / "refengine" / "model.py"
            source = model.read_text()
            if RESIDUAL_LINE not in source or "\nimport torch\n" not in source:
                raise SystemExit("decision_v4: the model's layer() changed; update RESIDUAL_LINE")
            source = source.replace("\nimport torch\n", "\nimport torch\n\nDEBUG_CHECKS = True\n", 1)
            model.write_text(source.replace(RESIDUAL_LINE, RESIDUAL_LINE + DEBUG_LINES, 1))
            git(repo, "commit", "--quiet", "-am", "model: DEBUG_CHECKS keeps each layer's output and checks it")
            git(repo, "checkout", "--quiet", "main")
        return repo, "added-op", None
    if not repo.exists():
        make_demo_repo(repo, steps=args.steps)
        git(repo, "checkout", "--quiet", "-b", "host-only", "main")
        engine = repo / "refengine" / "engine.py"
        source = engine.read_text()
        if STEP_LINE not in source:
            raise SystemExit("decision_v4: the engine's step() changed; update STEP_LINE")
        spin = (f"        _until = time.perf_counter() + {args.host_us / 1e6!r}  # host work before the launches\n"
                "        while time.perf_counter() < _until:\n            pass\n")
        if "\nimport time\n" not in source:
            raise SystemExit("decision_v4: the engine no longer imports time; update the spin")
        engine.write_text(source.replace(STEP_LINE, spin + STEP_LINE, 1))
        git(repo, "commit", "--quiet", "-am", f"engine: {args.host_us:g} us of host work before each step")
        git(repo, "checkout", "--quiet", "main")
    return repo, "host-only", None


def _figures(report: dict, comment: Path) -> dict:
    """The verdict, the title, and per batch size (and the mix) each metric's verdict and change."""
    sizes = {}
    for b in report["batch_sizes"] + ([report["mix_comparison"]] if report.get("mix_comparison") else []):
        sizes[str(b["batch_size"])] = {
            "verdict": b["verdict"], "decided_by": b.get("decided_by"), "look": b.get("look"),
            "gpu_ms": [b.get("gpu_ms_verdict"), (b.get("gpu_ms_change") or {}).get("pct")],
            "end_to_end_ms": [b.get("end_to_end_verdict"), (b.get("end_to_end_gpu_ms_change") or {}).get("pct")],
            "tok_per_s": [b.get("tok_per_s_verdict"), (b.get("tok_per_s_change") or {}).get("pct")],
            "caught_pct": b.get("caught_pct"),
        }
    title = comment.read_text().splitlines()[1] if comment.exists() else None
    return {"verdict": report["verdict"], "title": title, "rounds": report.get("rounds"), "looks": report["looks"],
            "rounds_stopped": report.get("rounds_stopped"), "duration_s": report.get("duration_s"),
            "schema_version": report["schema_version"], "sizes": sizes}


if __name__ == "__main__":
    raise SystemExit(main())
