"""Validate the guard on real-engine workloads in bf16: A/A pairs, a graph break, a compile
mode that drops CUDA graphs, and an output that really changes.

Usage (from the repository root, or with it on PYTHONPATH):
    python -m validation engines --out DIR --workdir DIR [--pairs CASE:KIND,...]
        [--repeats 3] [--steps 64] [--warmup-steps 16] [--budget-s 540] [--resume] [--compile-cache on|off]
        [--calibrate N]
    python -m validation engines --out DIR --summarise-only

Each case is a throwaway git repository whose base commit holds one workload:
  compiled   guard/workloads/compiled.py copied as engine/compiled.py (torch.compile,
             mode reduce-overhead, bf16)
  two-file   the same workload as two files (validation/_two_file.py): the model in
             engine/model.py, the decode step compiled with fullgraph=True in engine/workload.py,
             which imports it
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
  graph-break-callee (two-file) the graph break in the model's     regression, the capture change
                 forward in model.py, fullgraph=False in           naming model.py and the line of
                 workload.py                                       the break
Every pair is one `guard run` whose report is kept in DIR/pairs/CASE-KIND/, its line (case,
kind, seconds) appended to DIR/pairs.jsonl as soon as it finishes; DIR/summary.md, made from
the kept reports, is rewritten after each. --budget-s stops before a pair that would not fit.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from pydantic import BaseModel, ValidationError

import guard
from guard._errors import ConfigError, GuardError
from guard._git import made_git, run_git
from guard.compare import Agreement, Verdict
from guard.calibrate import suggested_text
from guard.config import MIN_REPEATS, load_thresholds
from guard.explain import CauseKind
from guard.measure import Change
from guard.report import Report, title

from ._older import read_any
from ._pairs import cause_of
from ._two_file import FULLGRAPH_DEFAULT, WHOLE_GRAPH, two_files

COMPILED_SOURCE = Path(guard.__file__).parent / "workloads" / "compiled.py"
ENGINE_DIR = Path(guard.__file__).parent / "engine"
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
    "two-file": Case("two-file", "engine/workload.py:make", "layers = 4, d_model = 1024", "engine/workload.py"),
    "hf": Case("hf", "guard.workloads.hf:make", "layers = 4, d_model = 1024", None),
    "ref-bf16": Case("ref-bf16", "refengine:make", 'layers = 20, dtype = "bfloat16", head_splits = 8',
                     "refengine/engine.py"),
}
KINDS = ("aa", "graph-break", "mode-default", "output-change", "graph-break-callee")
DEFAULT_PAIRS = ("compiled:aa,hf:aa,ref-bf16:aa,compiled:output-change,compiled:graph-break,compiled:mode-default")


def git(repo: Path, *args: str) -> str:
    return made_git(repo, *args, author="Validation", email="validation@example.invalid")


def config(case: Case, args: argparse.Namespace) -> str:
    return (
        "# Written by python -m validation engines\n"
        "[workload]\n"
        f'entry = "{case.entry}"\n'
        "batch_sizes = [1]\n"
        f"steps = {args.steps}\nwarmup_steps = {args.warmup_steps}\n"
        f"profile_steps = {args.profile_steps}\nprofile_repeats = 1\n"
        f"options = {{ {case.options} }}\n\n"
        '[build]\nmethod = "none"\n\n'
        f"[measure]\nrepeats = {args.repeats}\nconfirm = false\ntimeout_s = 600\n"
        f"compile_cache = {'false' if getattr(args, 'compile_cache', 'on') == 'off' else 'true'}\n"
        + ("allow_few_repeats = true\n" if args.repeats < MIN_REPEATS else "")
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
    elif case.name == "two-file":
        (repo / "engine").mkdir()
        for name, source in two_files(COMPILED_SOURCE.read_text()).items():
            (repo / "engine" / name).write_text(source)
    elif case.name == "ref-bf16":
        shutil.copytree(ENGINE_DIR, repo / "refengine", ignore=shutil.ignore_patterns("__pycache__"))
    (repo / "guard.toml").write_text(config(case, args))
    git(repo, "add", "-A")
    git(repo, "commit", "--quiet", "-m", f"{case.name}: the workload as the guard ships it")
    return repo


THRESHOLDS_FILE = "guard-thresholds.toml"


def calibrate_case(repo: Path, case: Case, repeats: int, args: argparse.Namespace, timeout_s: float) -> str:
    """`guard calibrate` of the case's main at `repeats` processes per side; its thresholds file,
    with the spreads a run at fewer processes borrows, is committed to main and named in its
    guard.toml, so every pair after it reads it. Kept under OUT/calibration/CASE. Returns the line
    to print; a refused calibration commits nothing, and the pairs run at measure.threshold_pct."""
    if f'thresholds_file = "{THRESHOLDS_FILE}"' in (repo / "guard.toml").read_text():
        return f"{case.name}: calibrated already"
    kept = args.out / "calibration" / case.name
    kept.mkdir(parents=True, exist_ok=True)
    (kept / "guard.toml").write_text(config(case, argparse.Namespace(**vars(args) | {"repeats": repeats})))
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "guard", "calibrate", "--repo", str(repo), "--ref", "main",
             "--config", str(kept / "guard.toml"), "--out", str(kept / THRESHOLDS_FILE)],
            capture_output=True, text=True, timeout=timeout_s, env=os.environ | {"PYTHONUNBUFFERED": "1"},
        )
    except subprocess.TimeoutExpired as cut:
        (kept / "progress.log").write_text(_text(cut.stderr))
        return f"{case.name}: calibration cut by the budget after {timeout_s:.0f} s; the pairs run uncalibrated"
    (kept / "progress.log").write_text(proc.stderr)
    if proc.returncode != 0:
        return f"{case.name}: calibration exit {proc.returncode}, the pairs run uncalibrated: " + (
            proc.stderr.strip().splitlines() or ["no output"])[-1]
    shutil.copyfile(kept / THRESHOLDS_FILE, repo / THRESHOLDS_FILE)
    named = f'[measure]\nthresholds_file = "{THRESHOLDS_FILE}"\n'
    (repo / "guard.toml").write_text((repo / "guard.toml").read_text().replace("[measure]\n", named))
    git(repo, "add", "-A")
    git(repo, "commit", "--quiet", "-m", f"{case.name}: thresholds calibrated at {repeats} processes per side")
    return f"{case.name}: thresholds {suggested_text(load_thresholds(repo / THRESHOLDS_FILE))}"


def _text(output: str | bytes | None) -> str:
    return output.decode(errors="replace") if isinstance(output, bytes) else output or ""


def _replace(old: str, new: str) -> Callable[[str], str]:
    def change(text: str) -> str:
        if old not in text:
            raise ConfigError(f"the engine no longer contains {old!r}; update validation/_engines.py")
        return text.replace(old, new, 1)
    return change


# kind -> the case it is for, its commit message, and the change to each file it edits
EDITS: dict[str, tuple[str, str, dict[str, Callable[[str], str]]]] = {
    "graph-break": ("compiled", "compiled: split the compiled decode step in two with a graph break",
                    {"engine/compiled.py": _replace(LAYER_LOOP, GRAPH_BREAK_LOOP)}),
    "mode-default": ("compiled",
                     "compiled: compile decode with mode 'default' unless GUARD_COMPILE_MODE says otherwise",
                     {"engine/compiled.py": _replace(MODE_DEFAULT, MODE_DEFAULT.replace('"reduce-overhead"',
                                                                                       '"default"'))}),
    "output-change": ("compiled", "compiled: rotary embedding with the sine's sign flipped",
                      {"engine/compiled.py": _replace(ROTARY, "x2 * cos - x1 * sin")}),
    "graph-break-callee": ("two-file", "model: the second half of the layers in a graph of its own; decode "
                           "compiled with fullgraph=False to allow the break",
                           {"engine/model.py": _replace(LAYER_LOOP, GRAPH_BREAK_LOOP),
                            "engine/workload.py": _replace(WHOLE_GRAPH, FULLGRAPH_DEFAULT)}),
}


def head_branch(repo: Path, case: Case, kind: str) -> str:
    branch = f"validate/{kind}"
    known = run_git(repo, "rev-parse", "--verify", "--quiet", branch)
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
            for_case, message, changes = EDITS[kind]
            if case.name != for_case:
                raise ConfigError(f"kind {kind} is defined for the {for_case} case only")
            for path, change in changes.items():
                target = repo / path
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
    if kind == "graph-break-callee":
        return (report.verdict == "regression" and _names_callee_break(report),
                "regression, the capture change naming engine/model.py and the line of the graph break")
    if kind == "mode-default":
        return report.verdict == "regression" and fell_out, "regression, decode fell out of its CUDA graphs"
    return report.verdict == "invalid" and any(a.output_changed for a in head), "invalid, the head's output changed"


def _names_callee_break(report: Report) -> bool:
    """The capture change holds the graph break added in engine/model.py, traced from the compiled
    decode step of engine/workload.py, on a line of its hunk."""
    files = report.capture.files if report.capture else []
    return any(split.api == "torch._dynamo.graph_break" and split.side == "added" and split.reachable == "traced"
               and split.site_path == "engine/workload.py" and hunk.range.start <= split.line <= hunk.range.end
               for change in files if change.path == "engine/model.py"
               for hunk in change.hunks for split in hunk.splits)


class EngineRecord(BaseModel):
    """One line of pairs.jsonl: which pair ran and how long it took; its figures are its report's.
    Lines of older runs also hold a copy of their report's figures; they are ignored."""

    case: str
    kind: str
    seconds: float


class EngineFacts(BaseModel):
    """What the summary states of one pair, from its kept report."""

    case: str
    kind: str
    verdict: Verdict
    met: bool
    criterion: str
    title: str
    cause: CauseKind | None
    gpu_ms_change: Change | None
    tok_per_s_change: Change | None
    agreement: Agreement | None


def facts(record: EngineRecord, out: Path) -> EngineFacts:
    # a committed pair may be of an older schema: its numbers read as data, decided and explained again
    path = out / "pairs" / f"{record.case}-{record.kind}" / "report.json"
    if not path.is_file():
        raise ConfigError(f"{path}: the report of pair {record.case}:{record.kind} is missing; "
                          "run the pair again (remove its line from pairs.jsonl and --resume)")
    report = read_any(path)
    batch = report.batch_sizes[0]
    cause = cause_of(report, batch.batch_size)
    met, criterion = expected(record.kind, report, cause)
    return EngineFacts(
        case=record.case, kind=record.kind, verdict=report.verdict, met=met, criterion=criterion,
        title=title(report), cause=cause, gpu_ms_change=batch.gpu_ms_change,
        tok_per_s_change=batch.tok_per_s_change, agreement=batch.agreement,
    )


def summary(pairs: list[EngineFacts]) -> str:
    lines = ["| case | kind | verdict | criterion met | GPU ms | tok/s | agreement (D per process) | title |",
             "|---|---|---|---|---|---|---|---|"]
    for r in pairs:
        d = "; ".join(f"{a.arm} {', '.join(map(str, a.disagreements))} of {a.compared}"
                      for a in r.agreement.arms) if r.agreement else "-"
        gpu = f"{r.gpu_ms_change.pct:+.2f}% ({r.gpu_ms_change.interval()})" if r.gpu_ms_change else "-"
        tok = f"{r.tok_per_s_change.pct:+.2f}%" if r.tok_per_s_change else "-"
        lines.append(f"| {r.case} | {r.kind} | {r.verdict} | {'yes' if r.met else 'NO'} | {gpu} | {tok} "
                     f"| {d} | {r.title.replace('|', '/')} |")
    met = sum(r.met for r in pairs)
    return f"{met} of {len(pairs)} pairs met their criterion.\n\n" + "\n".join(lines) + "\n"


def read_records(jsonl: Path) -> list[EngineRecord]:
    if not jsonl.exists():
        return []
    try:
        return [EngineRecord.model_validate_json(line) for line in jsonl.read_text().splitlines() if line.strip()]
    except ValidationError as exc:
        why = exc.errors()[0]["msg"]
        raise ConfigError(f"{jsonl}: a line is not a pair record ({why}); fix or remove it") from None


def main(argv: list[str] | None = None) -> int:
    try:
        return _main(argv)
    except GuardError as exc:
        print(f"validate: error: {exc.message}", file=sys.stderr)
        return exc.exit_code


def _main(argv: list[str] | None) -> int:
    p = argparse.ArgumentParser(prog="python -m validation engines", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--workdir", type=Path)
    p.add_argument("--pairs", default=",".join(DEFAULT_PAIRS), help="CASE:KIND items, in the order to run")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--steps", type=int, default=64)
    p.add_argument("--warmup-steps", type=int, default=16)
    p.add_argument("--profile-steps", type=int, default=8)
    p.add_argument("--compile-cache", choices=("on", "off"), default="on",
                   help="measure.compile_cache of the pairs' config (a --workdir of its own for each setting)")
    p.add_argument("--calibrate", type=int, metavar="N",
                   help="first calibrate each case's main at N processes per side (guard calibrate), "
                        "so that its pairs read the thresholds and may borrow the calibrated spread")
    p.add_argument("--budget-s", type=float, default=540.0)
    p.add_argument("--resume", action="store_true")
    p.add_argument("--summarise-only", action="store_true")
    p.add_argument("--case-options", action="append", default=[], metavar="CASE=TOML",
                   help="another options table body for a case, e.g. 'compiled=layers = 2, d_model = 128'")
    args = p.parse_args(argv)
    for item in args.case_options:
        name, _, options = item.partition("=")
        if name not in CASES:
            print(f"validate: --case-options names no case {name!r}", file=sys.stderr)
            return 2
        CASES[name] = Case(name, CASES[name].entry, options, CASES[name].engine_file)
    args.out.mkdir(parents=True, exist_ok=True)
    jsonl = args.out / "pairs.jsonl"
    records = read_records(jsonl)
    # the verdicts, titles and causes from each pair's report.json, as this guard renders them
    pairs = [facts(r, args.out) for r in records]
    if args.summarise_only:
        (args.out / "summary.md").write_text(summary(pairs))
        print(summary(pairs))
        return 0
    if records and not args.resume:
        print(f"validate: {jsonl} holds pairs already; pass --resume to continue", file=sys.stderr)
        return 2
    if args.workdir is None:
        print("validate: --workdir is needed for a run", file=sys.stderr)
        return 2
    started, longest = time.monotonic(), 0.0
    done = {(r.case, r.kind) for r in records}
    for item in args.pairs.split(","):
        case_name, _, kind = item.strip().partition(":")
        if case_name not in CASES or kind not in KINDS:
            print(f"validate: unknown pair {item!r} (cases {', '.join(CASES)}; kinds {', '.join(KINDS)})",
                  file=sys.stderr)
            return 2
        if (case_name, kind) in done:
            continue
        case = CASES[case_name]
        repo = make_repo(case, args.workdir, args)
        if args.calibrate:
            line = calibrate_case(repo, case, args.calibrate, args, args.budget_s - (time.monotonic() - started))
            print(f"[validate] calibration of {line}", file=sys.stderr, flush=True)
        left = args.budget_s - (time.monotonic() - started)
        if left < max(longest, 60.0) + PAIR_OVERHEAD_S:
            print(f"[validate] {item}: stopping before it, {left:.0f} s of the budget left", file=sys.stderr)
            break
        branch = head_branch(repo, case, kind)
        pair_out = args.out / "pairs" / f"{case_name}-{kind}"
        shutil.rmtree(pair_out, ignore_errors=True)
        print(f"[validate] {item}: guard run on {repo}, head {branch}", file=sys.stderr, flush=True)
        t0 = time.monotonic()
        try:
            proc = subprocess.run(
                [sys.executable, "-m", "guard", "run", "--repo", str(repo), "--base", "main", "--head", branch,
                 "--out", str(pair_out)],
                capture_output=True, text=True, timeout=max(60.0, left), env=os.environ | {"PYTHONUNBUFFERED": "1"},
            )
        except subprocess.TimeoutExpired as cut:  # its progress is kept; --resume runs it again
            pair_out.mkdir(parents=True, exist_ok=True)
            (pair_out / "progress.log").write_text(_text(cut.stderr))
            print(f"[validate] {item}: cut by the budget after {time.monotonic() - t0:.0f} s, no report; "
                  f"its progress is in {pair_out / 'progress.log'}", file=sys.stderr, flush=True)
            break
        seconds = time.monotonic() - t0
        longest = max(longest, seconds)
        (pair_out / "progress.log").write_text(proc.stderr)
        if not (pair_out / "report.json").exists():
            print(f"[validate] {item}: no report (exit {proc.returncode}):\n{proc.stderr[-2000:]}", file=sys.stderr)
            continue
        record = EngineRecord(case=case_name, kind=kind, seconds=round(seconds, 1))
        found = facts(record, args.out)
        with jsonl.open("a") as f:
            f.write(record.model_dump_json() + "\n")
        pairs.append(found)
        (args.out / "summary.md").write_text(summary(pairs))
        print(f"[validate] {item}: {found.verdict}, criterion {'met' if found.met else 'NOT met'} "
              f"({seconds:.0f} s): {found.title}", file=sys.stderr, flush=True)
    print(summary(pairs))
    return 0
