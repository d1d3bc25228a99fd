"""Validate the guard on real-engine workloads in bf16: A/A pairs, a graph break, a compile
mode that drops CUDA graphs, and an output that really changes.

Usage (from the repository root, or with it on PYTHONPATH):
    python3 benchmarks/validate_engines.py --out DIR --workdir DIR [--pairs CASE:KIND,...]
        [--repeats 3] [--steps 64] [--warmup-steps 16] [--budget-s 540] [--resume]
    python3 benchmarks/validate_engines.py --out DIR --summarise-only

Each case is a throwaway git repository whose base commit holds one workload:
  compiled   guard/workloads/compiled.py copied as engine/compiled.py (torch.compile,
             mode reduce-overhead, bf16)
  hf         guard.workloads.hf (transformers, static cache, reduce-overhead, bf16); the
             repository holds only guard.toml
  ref-bf16   the reference engine in bf16 with head_splits (a split-K LM head summed with
             atomic adds, so near-ties in the argmax break differently in every process)
Each kind is a head branch with one commit:
  aa             a comment (hf: a notes file), nothing else        must pass, not invalid
  graph-break    torch._dynamo.graph_break() between the layers   regression, idle time between
                 of the compiled forward                           kernels, titled as a capture change
  mode-default   the default of GUARD_COMPILE_MODE from            regression whose title says decode
                 reduce-overhead to default                        fell out of its CUDA graphs
  output-change  a sign flipped in the rotary embedding            invalid: the output changed
Every pair is one `guard run`, appended to DIR/pairs.jsonl as soon as it finishes;
DIR/summary.md is rewritten after each. --budget-s stops before a pair that would not fit.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from benchmarks.validation._older import read_any  # noqa: E402
from benchmarks.validation._pairs import cause_of  # noqa: E402
from guard.report import Report, title  # noqa: E402
from guard.report._reason_text import reason_short  # noqa: E402

COMPILED_SOURCE = REPO_ROOT / "guard" / "workloads" / "compiled.py"
ENGINE_DIR = REPO_ROOT / "guard" / "engine"
IDENTITY = ["-c", "user.name=Validation", "-c", "user.email=validation@example.invalid"]
LAYER_LOOP = "        for layer in self.layers:\n            x = layer(x, cos, sin, pos, mask)\n"
GRAPH_BREAK_LOOP = (
    "        for index, layer in enumerate(self.layers):\n"
    "            x = layer(x, cos, sin, pos, mask)\n"
    "            if index == len(self.layers) // 2 - 1:\n"
    "                torch._dynamo.graph_break()  # the second half of the layers in a graph of its own\n"
)
MODE_DEFAULT = 'os.environ.get("GUARD_COMPILE_MODE", "reduce-overhead")'
ROTARY = "x2 * cos + x1 * sin"
PAIR_OVERHEAD_S = 20.0  # builds, the reference process, the report


@dataclass(frozen=True)
class Case:
    name: str
    entry: str
    options: str  # TOML inline-table body
    engine_file: str | None  # the file kinds edit; None: the repository holds no engine code


CASES = {
    "compiled": Case("compiled", "engine/compiled.py:make", "layers = 4, d_model = 1024", "engine/compiled.py"),
    "hf": Case("hf", "guard.workloads.hf:make", "layers = 4, d_model = 1024", None),
    "ref-bf16": Case("ref-bf16", "refengine:make", 'layers = 20, dtype = "bfloat16", head_splits = 8',
                     "refengine/engine.py"),
}
KINDS = ("aa", "graph-break", "mode-default", "output-change")
DEFAULT_PAIRS = ("compiled:aa,hf:aa,ref-bf16:aa,compiled:output-change,compiled:graph-break,compiled:mode-default")


def git(repo: Path, *args: str) -> str:
    date = "2026-01-01T00:00:00+00:00"
    env = os.environ | {"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
    return subprocess.run(["git", *IDENTITY, *args], cwd=repo, env=env, capture_output=True, text=True,
                          check=True).stdout.strip()


def config(case: Case, args: argparse.Namespace) -> str:
    return (
        "# Written by benchmarks/validate_engines.py\n"
        "[workload]\n"
        f'entry = "{case.entry}"\n'
        "batch_sizes = [1]\n"
        f"steps = {args.steps}\nwarmup_steps = {args.warmup_steps}\n"
        f"profile_steps = {args.profile_steps}\nprofile_repeats = 1\n"
        f"options = {{ {case.options} }}\n\n"
        '[build]\nmethod = "none"\n\n'
        f"[measure]\nrepeats = {args.repeats}\nconfirm = false\ntimeout_s = 600\n"
    )


def make_repo(case: Case, workdir: Path, args: argparse.Namespace) -> Path:
    repo = workdir / case.name
    if (repo / ".git").is_dir():
        return repo
    repo.mkdir(parents=True)
    git(repo, "init", "--quiet", "--initial-branch=main")
    if case.name == "compiled":
        (repo / "engine").mkdir()
        shutil.copyfile(COMPILED_SOURCE, repo / "engine" / "compiled.py")
    elif case.name == "ref-bf16":
        shutil.copytree(ENGINE_DIR, repo / "refengine", ignore=shutil.ignore_patterns("__pycache__"))
    (repo / "guard.toml").write_text(config(case, args))
    git(repo, "add", "-A")
    git(repo, "commit", "--quiet", "-m", f"{case.name}: the workload as the guard ships it")
    return repo


def _replace(old: str, new: str) -> Callable[[str], str]:
    def change(text: str) -> str:
        if old not in text:
            raise SystemExit(f"validate_engines: the engine no longer contains {old!r}; update this script")
        return text.replace(old, new, 1)
    return change


EDITS: dict[str, tuple[str, Callable[[str], str]]] = {
    "graph-break": ("compiled: split the compiled decode step in two with a graph break",
                    _replace(LAYER_LOOP, GRAPH_BREAK_LOOP)),
    "mode-default": ("compiled: compile decode with mode 'default' unless GUARD_COMPILE_MODE says otherwise",
                     _replace(MODE_DEFAULT, MODE_DEFAULT.replace('"reduce-overhead"', '"default"'))),
    "output-change": ("compiled: rotary embedding with the sine's sign flipped",
                      _replace(ROTARY, "x2 * cos - x1 * sin")),
}


def head_branch(repo: Path, case: Case, kind: str) -> str:
    branch = f"validate/{kind}"
    known = subprocess.run(["git", "rev-parse", "--verify", "--quiet", branch], cwd=repo, capture_output=True)
    if known.returncode == 0:
        return branch
    git(repo, "checkout", "--quiet", "-b", branch, "main")
    try:
        if kind == "aa":
            target = repo / (case.engine_file or "NOTES.md")
            text = target.read_text() if target.exists() else ""
            target.write_text(text + "\n# The decode step is unchanged; this comment is the whole change.\n")
            message = "a comment, nothing else"
        else:
            if case.engine_file is None or case.name != "compiled":
                raise SystemExit(f"validate_engines: kind {kind} is defined for the compiled case only")
            message, change = EDITS[kind]
            target = repo / case.engine_file
            target.write_text(change(target.read_text()))
        git(repo, "add", "-A")
        git(repo, "commit", "--quiet", "-m", message)
    finally:
        git(repo, "checkout", "--quiet", "main")
    return branch


def expected(kind: str, report: Report, cause: str | None) -> tuple[bool, str]:
    """Whether the pair met its criterion, and the criterion, from the report's typed fields
    (the explanation's cause, not the title's words)."""
    capture = bool(report.capture and report.capture.files)
    fell_out = any(t.diff and t.diff.launches and t.diff.launches.fell_out_of_graphs for t in report.traces)
    head = [a for b in report.batch_sizes if b.agreement for a in b.agreement.arms if a.arm == report.head]
    if kind == "aa":
        return report.verdict == "pass", "pass"
    if kind == "graph-break":
        return (report.verdict == "regression" and cause == "idle_between_kernels" and capture,
                "regression, idle time between kernels, titled as a capture change, the line named")
    if kind == "mode-default":
        return report.verdict == "regression" and fell_out, "regression, decode fell out of its CUDA graphs"
    return report.verdict == "invalid" and any(a.output_changed for a in head), "invalid, the head's output changed"


def record(case: Case, kind: str, out: Path, seconds: float) -> dict[str, Any]:
    # a committed pair may be of an older schema: its numbers read as data, decided and explained again
    report = read_any(out / "report.json")
    batch = report.batch_sizes[0]
    section = next((t for t in report.traces if t.batch_size == batch.batch_size), None)
    cause = cause_of(report, batch.batch_size)
    headline = title(report)
    met, criterion = expected(kind, report, cause)
    agreement = batch.agreement
    launches = section.diff.launches if section and section.diff else None
    return {
        "case": case.name, "kind": kind, "verdict": report.verdict, "met": met, "criterion": criterion,
        "title": headline, "cause": cause,
        "gpu_ms_pct": batch.gpu_ms_change.pct if batch.gpu_ms_change else None,
        "gpu_ms_interval": batch.gpu_ms_change.interval() if batch.gpu_ms_change else None,
        "tok_per_s_pct": batch.tok_per_s_change.pct if batch.tok_per_s_change else None,
        "host_ms_pct": batch.host_ms_change.pct if batch.host_ms_change else None,
        "agreement": None if agreement is None else {
            "exact": agreement.exact,
            "arms": {a.arm: {"disagreements": a.disagreements, "compared": a.compared,
                             "output_changed": a.output_changed} for a in agreement.arms},
        },
        "launches": None if launches is None else launches.model_dump(),
        "capture": [{"path": f.path, "ranges": f.ranges, "matched_by": f.matched_by}
                    for f in (report.capture.files if report.capture else [])],
        "reasons": [reason_short(r) for r in report.reasons],
        "repeats": report.workload.repeats, "steps": report.workload.steps,
        "gpu": report.environment.gpu, "seconds": round(seconds, 1),
    }


def summary(records: list[dict[str, Any]]) -> str:
    lines = ["| case | kind | verdict | criterion met | GPU ms | tok/s | agreement (D per process) | title |",
             "|---|---|---|---|---|---|---|---|"]
    for r in records:
        agreement = r["agreement"]
        d = "; ".join(f"{arm} {', '.join(map(str, v['disagreements']))} of {v['compared']}"
                      for arm, v in agreement["arms"].items()) if agreement else "-"
        gpu = f"{r['gpu_ms_pct']:+.2f}% ({r['gpu_ms_interval']})" if r["gpu_ms_pct"] is not None else "-"
        tok = f"{r['tok_per_s_pct']:+.2f}%" if r["tok_per_s_pct"] is not None else "-"
        lines.append(f"| {r['case']} | {r['kind']} | {r['verdict']} | {'yes' if r['met'] else 'NO'} | {gpu} | {tok} "
                     f"| {d} | {r['title'].replace('|', '/')} |")
    met = sum(r["met"] for r in records)
    return f"{met} of {len(records)} pairs met their criterion.\n\n" + "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="validate_engines.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--workdir", type=Path)
    p.add_argument("--pairs", default=",".join(DEFAULT_PAIRS), help="CASE:KIND items, in the order to run")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--steps", type=int, default=64)
    p.add_argument("--warmup-steps", type=int, default=16)
    p.add_argument("--profile-steps", type=int, default=8)
    p.add_argument("--budget-s", type=float, default=540.0)
    p.add_argument("--resume", action="store_true")
    p.add_argument("--summarise-only", action="store_true")
    p.add_argument("--case-options", action="append", default=[], metavar="CASE=TOML",
                   help="another options table body for a case, e.g. 'compiled=layers = 2, d_model = 128'")
    args = p.parse_args(argv)
    for item in args.case_options:
        name, _, options = item.partition("=")
        if name not in CASES:
            print(f"validate_engines: --case-options names no case {name!r}", file=sys.stderr)
            return 2
        CASES[name] = Case(name, CASES[name].entry, options, CASES[name].engine_file)
    args.out.mkdir(parents=True, exist_ok=True)
    jsonl = args.out / "pairs.jsonl"
    records = [json.loads(line) for line in jsonl.read_text().splitlines()] if jsonl.exists() else []
    if args.summarise_only:
        # the verdicts, titles and causes again from each pair's report.json, as this guard renders them
        records = [record(CASES[r["case"]], r["kind"], args.out / "pairs" / f"{r['case']}-{r['kind']}", r["seconds"])
                   for r in records]
        jsonl.write_text("".join(json.dumps(r) + "\n" for r in records))
        (args.out / "summary.md").write_text(summary(records))
        print(summary(records))
        return 0
    if records and not args.resume:
        print(f"validate_engines: {jsonl} holds pairs already; pass --resume to continue", file=sys.stderr)
        return 2
    if args.workdir is None:
        print("validate_engines: --workdir is needed for a run", file=sys.stderr)
        return 2
    started, longest = time.monotonic(), 0.0
    done = {(r["case"], r["kind"]) for r in records}
    for item in args.pairs.split(","):
        case_name, _, kind = item.strip().partition(":")
        if case_name not in CASES or kind not in KINDS:
            print(f"validate_engines: unknown pair {item!r} (cases {', '.join(CASES)}; kinds {', '.join(KINDS)})",
                  file=sys.stderr)
            return 2
        if (case_name, kind) in done:
            continue
        left = args.budget_s - (time.monotonic() - started)
        if left < max(longest, 60.0) + PAIR_OVERHEAD_S:
            print(f"[validate] {item}: stopping before it, {left:.0f} s of the budget left", file=sys.stderr)
            break
        case = CASES[case_name]
        repo = make_repo(case, args.workdir, args)
        branch = head_branch(repo, case, kind)
        pair_out = args.out / "pairs" / f"{case_name}-{kind}"
        shutil.rmtree(pair_out, ignore_errors=True)
        print(f"[validate] {item}: guard run on {repo}, head {branch}", file=sys.stderr, flush=True)
        t0 = time.monotonic()
        proc = subprocess.run(
            [sys.executable, "-m", "guard", "run", "--repo", str(repo), "--base", "main", "--head", branch,
             "--out", str(pair_out)],
            capture_output=True, text=True, timeout=max(60.0, left), env=os.environ | {"PYTHONUNBUFFERED": "1"},
        )
        seconds = time.monotonic() - t0
        longest = max(longest, seconds)
        (pair_out / "progress.log").write_text(proc.stderr)
        if not (pair_out / "report.json").exists():
            print(f"[validate] {item}: no report (exit {proc.returncode}):\n{proc.stderr[-2000:]}", file=sys.stderr)
            continue
        found = record(case, kind, pair_out, seconds)
        with jsonl.open("a") as f:
            f.write(json.dumps(found) + "\n")
        records.append(found)
        (args.out / "summary.md").write_text(summary(records))
        print(f"[validate] {item}: {found['verdict']}, criterion {'met' if found['met'] else 'NOT met'} "
              f"({seconds:.0f} s): {found['title']}", file=sys.stderr, flush=True)
    print(summary(records))
    return 0


if __name__ == "__main__":
    sys.exit(main())
