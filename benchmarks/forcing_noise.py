"""How often fresh processes of one commit disagree with a reference, forced and free-running.

Usage (from the repository root):
    python3 benchmarks/forcing_noise.py --out DIR [--processes 8] [--steps 128] [--warmup-steps 16]
        [--batch-sizes 1,4] [--case NAME=ENTRY|OPTIONS ...]

For each case (a workload entry and its options, TOML inline-table body): one reference
process (free-running, untimed), then --processes fresh processes forced with its ids, then
as many free-running ones. Per process it records D, the (step, sequence) outputs that
differ from the reference, and, free-running, the first step at which its tokens leave the
reference's. The forced processes are then split in two halves as an A/A pair and judged by
the agreement rule (guard/compare/_agreement.py). Writes DIR/forcing-noise.json and prints
a table. This is the evidence the agreement rule was chosen with
(docs/measurements/forcing-noise-h200.md).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from guard.compare import agreement, first_mismatch  # noqa: E402
from guard.measure import ArmTarget, BatchRun, HarnessSpec, ReferenceTokens, write_reference  # noqa: E402
from guard.measure._disagreements import count_disagreements  # noqa: E402
from guard.measure._runner import RunFailed, run_harness  # noqa: E402
from guard.sandbox import choose_box  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
DEFAULT_CASES = [
    "ref-fp32=guard.engine:make|layers = 20, dtype = \"float32\"",
    "ref-bf16=guard.engine:make|layers = 20, dtype = \"bfloat16\"",
]


def parse_case(text: str) -> tuple[str, str, dict[str, Any]]:
    name, _, rest = text.partition("=")
    entry, _, options = rest.partition("|")
    return name, entry, tomllib.loads(f"o = {{{options}}}")["o"] if options.strip() else {}


def run_case(name: str, entry: str, options: dict[str, Any], args: argparse.Namespace, out: Path) -> dict[str, Any]:
    run_dir = out / name
    run_dir.mkdir(parents=True, exist_ok=True)
    target = ArmTarget(name=name, python=Path(sys.executable), worktree=REPO, box=choose_box(),
                       user="")  # the guard's own engine
    spec = HarnessSpec(entry=entry, options=options, batch_sizes=args.batch_sizes, steps=args.steps,
                       warmup_steps=args.warmup_steps, profile_steps=0)
    started = time.perf_counter()
    ref = run_harness(target, spec.model_dump() | {"mode": "reference"}, "reference", run_dir, args.timeout_s)
    if not ref.get("accepts_tokens"):
        return {"case": name, "error": "the workload's step() takes no input ids"}
    rows = {int(r["batch_size"]): r["tokens"] for r in ref["runs"]}
    path = write_reference(ReferenceTokens(source=f"{name} reference", batch_sizes=rows), run_dir)
    forced: list[dict[str, Any]] = []
    free: list[dict[str, Any]] = []
    for i in range(args.processes):
        for kind, extra, bucket in (("forced", {"reference": str(path)}, forced), ("free", {}, free)):
            try:
                data = run_harness(target, spec.model_dump() | extra, f"{kind}-{i}", run_dir, args.timeout_s, repeat=i)
            except RunFailed as failed:
                return {"case": name, "error": failed.message}
            bucket.append(data)
            print(f"  {name}: {kind} process {i + 1}/{args.processes} done", file=sys.stderr, flush=True)
    result: dict[str, Any] = {"case": name, "entry": entry, "options": options, "seconds": 0.0,
                              "environment": forced[0].get("environment", {}), "batch_sizes": {}}
    for size in args.batch_sizes:
        forced_runs = []
        for p in forced:
            run = BatchRun.model_validate(next(r for r in p["runs"] if r["batch_size"] == size))
            count, compared, first = count_disagreements(run.tokens, rows[size])
            forced_runs.append(run.model_copy(update={"disagreements": count, "compared": compared,
                                                      "first_disagreement": first}))
        free_runs = [next(r for r in p["runs"] if r["batch_size"] == size) for p in free]
        counts = [int(r.disagreements or 0) for r in forced_runs]
        diverged = []
        for run in free_runs:
            where = first_mismatch(rows[size], run["tokens"])
            diverged.append(where.step if where else None)
        half = len(forced_runs) // 2
        judged = agreement({"base": forced_runs[:half], "head": forced_runs[half:]}, "base", "reference")
        head = judged.arm("head")
        result["batch_sizes"][str(size)] = {
            "compared": forced_runs[0].compared,
            "forced_disagreements": counts,
            "forced_disagreement_pct": [round(c / forced_runs[0].compared * 100, 3) for c in counts],
            "free_first_divergence_step": diverged,
            "free_identical_to_reference": sum(d is None for d in diverged),
            "gpu_ms_per_step_forced": [r.gpu_ms_per_step for r in forced_runs],
            "gpu_ms_per_step_free": [r["gpu_ms_per_step"] for r in free_runs],
            "a_a_split": {"exact": judged.exact, "output_changed": bool(head and head.output_changed),
                          "base": counts[:half], "head": counts[half:]},
        }
    result["seconds"] = round(time.perf_counter() - started, 1)
    return result


def table(results: list[dict[str, Any]]) -> str:
    lines = ["| case | batch size | forced D per process (of outputs) | free: first divergence step | A/A split |",
             "|---|---|---|---|---|"]
    for r in results:
        if "error" in r:
            lines.append(f"| {r['case']} | - | {r['error']} | | |")
            continue
        for size, b in r["batch_sizes"].items():
            free = ", ".join("same" if d is None else str(d) for d in b["free_first_divergence_step"])
            split = b["a_a_split"]
            verdict = "changed" if split["output_changed"] else ("exact" if split["exact"] else "noise")
            lines.append(f"| {r['case']} | {size} | {', '.join(map(str, b['forced_disagreements']))} "
                         f"(of {b['compared']}) | {free} | {verdict} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="forcing_noise.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--processes", type=int, default=8)
    p.add_argument("--steps", type=int, default=128)
    p.add_argument("--warmup-steps", type=int, default=16)
    p.add_argument("--batch-sizes", type=lambda s: [int(x) for x in s.split(",")], default=[1, 4])
    p.add_argument("--timeout-s", type=float, default=300.0)
    p.add_argument("--case", action="append", default=[], help="NAME=ENTRY|OPTIONS (default: the reference engine "
                   "in float32 and bfloat16)")
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    results = []
    for text in args.case or DEFAULT_CASES:
        name, entry, options = parse_case(text)
        print(f"{name}: {entry} {options}", file=sys.stderr, flush=True)
        results.append(run_case(name, entry, options, args, args.out))
        (args.out / "forcing-noise.json").write_text(json.dumps(results, indent=1))
    print(table(results))
    for r in results:
        for size, b in r.get("batch_sizes", {}).items():
            pct = b["forced_disagreement_pct"]
            print(f"{r['case']} bs {size}: forced D median {statistics.median(pct):.2f}% max {max(pct):.2f}%; "
                  f"free identical to the reference {b['free_identical_to_reference']} of {len(pct)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
