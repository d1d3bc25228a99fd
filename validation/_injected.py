"""Validate the guard on regressions of known size injected into the reference engine.

Usage (from the repository root, or with it on PYTHONPATH):
    python -m validation injected --out DIR [--pairs 10] [--budget-s 540] [--resume]
    python -m validation injected --out DIR --summarise-only [--jsonl MORE.jsonl ...]

Stages, each result kept in DIR and reused by --resume:
  1. sizing: GPU ms per step of the unsplit base, the split alone, a few idle_us and a few
     long_kv_layers settings (fresh processes, no profiler); the idle_us and long_kv_layers
     that add +1% and +0.5% are interpolated, and the chosen long_kv_layers must keep base's
     tokens (sizing.json);
  2. calibration: `guard calibrate` A/A on base (calibration.json, thresholds.toml);
  3. pairs: one `guard run` per pair on a throwaway repository, base = the engine as is,
     head = a commit that injects one kind (or only adds a comment, A/A), kinds taking turns;
     each pair is appended to pairs.jsonl as soon as it finishes, its report kept in
     pairs/PAIR/report.json.gz;
  4. summary.json and summary.md, from the kept reports, rewritten after every pair.
--padding runs one pair alone instead: a batch-size mix whose head removes the eager fallback,
so size 3 pads to 4; the report's mix must state that padding as the mix's shares give it
(padding.json; validation/_padding.py).
--budget-s stops between stages and pairs before the budget runs out; rerun with --resume.
"""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import statistics
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from guard._errors import ConfigError, GuardError
from guard.calibrate import RunnerTooNoisy, calibrate, suggested_text
from guard.checkout import ArmRef, build_arm, default_cache_dir
from guard.config import MeasureConfig, load_config
from guard.measure import HarnessSpec
from guard.sandbox import choose_box

from . import _inputs as inputs
from ._models import KINDS, Kind, PairFacts, RunSettings, Sizing, Summary
from ._padding import run_padding_pair
from ._pairs import Pair, append_record, keep_pair_files, load_pair, pair_id, plan, read_records, run_pair
from ._progress import ASSUMED_PROCESS_S, SIZING_OVERHEAD_S, Budget, Log, eta_s, first_that_fits, minutes, pair_s
from ._render import cause_text, render_markdown, setting_label
from ._repo import BASE_BRANCH, ENTRY, base_long_kv_len, make_engine_repo, write_config
from ._sizing import TOKEN_CHECK_TRIES, Measurer, PointSpec, size_injections, sizing_points
from ._summary import planned_done, summarise

JSONL = "pairs.jsonl"
PLANNED = "planned.json"  # the pairs the last run asked for; --summarise-only reads it
DEFAULT_PAIRS = 10


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m validation injected", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True, help="folder for the results (kept small: no traces)")
    p.add_argument("--workdir", type=Path, help="throwaway repository, builds and runs (default: a temp dir)")
    p.add_argument("--pairs", type=int, help=f"pairs of each kind (default {DEFAULT_PAIRS})")
    p.add_argument(
        "--kinds", help="comma-separated kinds, each optionally with its own count, e.g. aa,idle-1,idle-0.5=5 "
        f"(default: all, {','.join(k.name for k in KINDS)})",
    )
    p.add_argument("--batch-size", type=int, default=1)
    p.add_argument("--steps", type=int, default=128, help="timed decode steps per process (each pass)")
    p.add_argument("--warmup-steps", type=int, default=32)
    p.add_argument("--profile-steps", type=int, default=8, help="steps of a process's profiled pass (GPU)")
    p.add_argument("--profile-repeats", type=int, default=1,
                   help="processes per arm and round that run the profiled pass (0: every one)")
    p.add_argument("--repeats", type=int, default=4, help="processes per arm per round")
    p.add_argument("--options", default="", help="workload options, TOML inline-table body, e.g. 'layers = 4'")
    p.add_argument("--build", choices=("venv", "none"), default="venv", help="build.method of the pairs")
    p.add_argument("--no-confirm", action="store_true", help="no confirmation round near the threshold")
    p.add_argument("--max-rounds", type=int, default=2,
                   help="rounds a pair may take, the first included (measure.max_rounds; the guard's default is "
                   f"{MeasureConfig.model_fields['max_rounds'].default}, the suite's estimates assume 2)")
    p.add_argument("--alpha", type=float, default=MeasureConfig.model_fields["alpha"].default)
    p.add_argument("--tok-per-s-min-s", type=float, default=None,
                   help="workload.tok_per_s_min_s of every process (default: the config's); 0: one timed pass")
    p.add_argument("--warmup-max-s", type=float, default=None,
                   help="workload.warmup_max_s of every process (default: the config's); 0: warmup_steps alone")
    p.add_argument("--timeout-s", type=float, default=300.0, help="limit for one harness process")
    p.add_argument("--sizing-repeats", type=int, default=3, help="processes per sizing setting")
    p.add_argument("--idle-grid-us", default="1,3,6,12", help="idle_us values measured for sizing")
    p.add_argument("--long-kv-grid", default="1,2,4",
                   help="long_kv_layers values measured for sizing (layers with a longer KV cache)")
    p.add_argument("--calibrate-repeats", type=int, default=10, help="processes per side of the A/A calibration")
    p.add_argument("--budget-s", type=float, help="stop between stages and pairs before this many seconds pass")
    p.add_argument("--resume", action="store_true", help="continue the run in --out: skip what it holds")
    p.add_argument("--summarise-only", action="store_true", help="rebuild summary.json and summary.md only")
    p.add_argument("--jsonl", type=Path, action="append", default=[], help="more pairs.jsonl to merge (summary)")
    p.add_argument("--process-s", type=float, default=ASSUMED_PROCESS_S, help="seconds per process, for the plan")
    p.add_argument("--verbose", action="store_true", help="print the pipeline's own progress lines too")
    p.add_argument("--padding", action="store_true",
                   help="run the padding pair alone (size 3 of a batch-size mix padded to 4) and check its figures")
    return p


@dataclass
class Run:
    """What every stage of one invocation shares."""

    args: argparse.Namespace
    settings: RunSettings
    planned: dict[str, int]  # kind -> pairs asked for
    out: Path
    workdir: Path
    repo: Path
    log: Log
    budget: Budget
    sizing: Sizing | None = None
    calibration: dict[str, Any] | None = None
    process_s: float = ASSUMED_PROCESS_S


def main(argv: list[str] | None = None) -> int:
    """`argv`: the arguments after `python -m validation injected` (default: the process's own)."""
    argv = sys.argv[1:] if argv is None else argv
    args = _parser().parse_args(argv)
    args.invocation = shlex.join(["python", "-m", "validation", "injected", *argv])
    try:
        planned = _planned(args)
        args.out.mkdir(parents=True, exist_ok=True)
        log = Log(args.out / "progress.log", args.verbose)
        if args.summarise_only:
            _summarise_only(args, planned, log)
            return 0
        if args.padding:
            return _padding(args, log)
        return _validate(args, planned, log)
    except GuardError as exc:
        print(f"validate: error: {exc.message}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("validate: interrupted; finished pairs are in pairs.jsonl: continue with --resume", file=sys.stderr)
        return 130


def _planned(args: argparse.Namespace) -> dict[str, int]:
    """Pairs per kind from --kinds and --pairs; a summary of a run without them takes the run's own."""
    stored = args.out / PLANNED
    if args.summarise_only and args.kinds is None and args.pairs is None and stored.exists():
        return {str(k): int(n) for k, n in json.loads(stored.read_text()).items()}
    kinds = args.kinds if args.kinds is not None else ",".join(k.name for k in KINDS)
    return inputs.planned_pairs(kinds, args.pairs if args.pairs is not None else DEFAULT_PAIRS)


def _validate(args: argparse.Namespace, planned: dict[str, int], log: Log) -> int:
    settings = inputs.run_settings(args)
    inputs.check_resume(args.out, settings, args.resume, JSONL)
    idle_grid = inputs.idle_grid(args.idle_grid_us)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="guard-validate-"))
    workdir.mkdir(parents=True, exist_ok=True)
    workdir.chmod(workdir.stat().st_mode | 0o055)  # run as root, the arms run as build.user, which must reach it
    run = Run(args, settings, planned, args.out, workdir, workdir / "engine-repo", log, Budget(args.budget_s))
    base_sha = make_engine_repo(run.repo, settings)
    long_kv_len = base_long_kv_len(run.repo)
    points = sizing_points(idle_grid, inputs.long_kv_grid(args.long_kv_grid))
    # every input is checked: from here on the folder holds this run
    (args.out / "settings.json").write_text(settings.model_dump_json(indent=2))
    (args.out / PLANNED).write_text(json.dumps(planned))
    with (args.out / "invocations.txt").open("a", encoding="utf-8") as f:
        f.write(args.invocation + "\n")
    records = read_records(run.out / JSONL, repair=True)
    todo = [(k, i) for k, i in plan(planned) if pair_id(k, i) not in {r.pair_id for r in records}]
    _print_plan(run, len(points), planned_done([r.kind for r in records], planned), len(todo))
    log.say(f"throwaway repository at {run.repo}; work folder {workdir}")

    run.sizing = _sizing(run, points, base_sha, long_kv_len)
    if run.sizing is None:
        return _stop(run)
    run.process_s = _process_s(run.sizing)
    run.calibration = _calibration(run)
    if run.calibration is None:
        return _stop(run)
    _run_pairs(run, todo)
    summary = _write_summary(run.out, planned, settings, run.sizing, run.calibration, log)
    for decision in summary.decisions:
        for criterion in decision.criteria:
            log.say(f"{decision.label}: {criterion.status}: {criterion.name}: {criterion.detail}")
    total = sum(planned.values())
    log.say(f"complete: all {total} planned pairs are in" if summary.complete
            else f"incomplete: {summary.done} of {total} planned pairs are in; continue with --resume")
    return 0


def _padding(args: argparse.Namespace, log: Log) -> int:
    settings = inputs.run_settings(args)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="guard-validate-"))
    workdir.mkdir(parents=True, exist_ok=True)
    workdir.chmod(workdir.stat().st_mode | 0o055)  # run as root, the arms run as build.user, which must reach it
    repo = workdir / "engine-repo"
    make_engine_repo(repo, settings)
    check = run_padding_pair(repo, settings, workdir / "padding.toml", workdir / "padding", log.detail)
    (args.out / "padding.json").write_text(check.model_dump_json(indent=2))
    status = "met" if check.met else "not met: " + "; ".join(check.failures)
    log.say(f"padding pair (size 3 padded to 4, expected waste {check.expected_waste:.4f}, head "
            f"{check.head_waste}): {status}; wrote {args.out / 'padding.json'}")
    return 0


# --- estimates ----------------------------------------------------------------------------------


def _print_plan(run: Run, n_points: int, done: int, todo: int) -> None:
    args, settings = run.args, run.settings
    sizing_n = 0 if (run.out / "sizing.json").exists() else n_points * args.sizing_repeats
    calib_n = 0 if (run.out / "calibration.json").exists() else 2 * args.calibrate_repeats
    per_pair = 2 * settings.repeats
    s, source = args.process_s, "assumed until the sizing measures it"
    if not sizing_n:  # a resumed run: the sizing has measured it
        s, source = _process_s(Sizing.model_validate_json((run.out / "sizing.json").read_text())), "from the sizing"
    run.log.say(
        f"plan: {', '.join(f'{n} x {k}' for k, n in run.planned.items())} pairs, {done} done, {todo} to run; each pair "
        f"{per_pair} processes ({2 * per_pair} with a confirmation round); sizing {sizing_n} processes "
        f"(+ up to {1 + 2 * TOKEN_CHECK_TRIES} token checks per kernel kind); calibration {calib_n}"
    )
    run.log.say(
        f"estimate at {s:.1f} s per process ({source}): sizing {minutes(sizing_n * s)}, "
        f"calibration {minutes(calib_n * s)}, pairs {minutes(todo * pair_s(settings, s))} "
        f"to {minutes(todo * pair_s(settings, s, rounds=2))}"
        + (f"; budget {args.budget_s:.0f} s" if args.budget_s else "")
    )


def _process_s(sizing: Sizing) -> float:
    seconds = [s for p in sizing.points for s in p.process_s]
    return statistics.median(seconds) if seconds else ASSUMED_PROCESS_S


# --- stages -------------------------------------------------------------------------------------


def _sizing(run: Run, points: list[PointSpec], base_sha: str, long_kv_len: int) -> Sizing | None:
    path = run.out / "sizing.json"
    if path.exists():
        run.log.say(f"sizing: reusing {path}")
        return Sizing.model_validate_json(path.read_text())
    repeats = run.args.sizing_repeats
    needed = len(points) * repeats * run.args.process_s + SIZING_OVERHEAD_S
    if not run.budget.allows(needed):
        run.log.say(f"budget: {run.budget.left_s():.0f} s left, sizing needs about {needed:.0f} s; stopping before it")
        return None
    run.log.say(f"sizing: {len(points)} settings x {repeats} processes, batch size {run.settings.batch_size}")
    config = load_config(_config_file(run, "calibrate.toml", run.settings.repeats, None), required=True)
    box = choose_box(config.build.isolation, container=config.build.method == "docker")
    arm = build_arm(run.repo, ArmRef(name="base", ref=BASE_BRANCH, sha=base_sha), config.build,
                    default_cache_dir(run.repo), run.log.detail, box=box)
    spec = HarnessSpec(
        entry=ENTRY, options=run.settings.options, batch_sizes=[run.settings.batch_size],
        steps=run.settings.steps, warmup_steps=run.settings.warmup_steps, profile_steps=0,
        **{name: value for name, value in (("tok_per_s_min_s", run.settings.tok_per_s_min_s),
                                           ("warmup_max_s", run.settings.warmup_max_s)) if value is not None},
    )
    measurer = Measurer(arm, box, spec, run.workdir / "sizing-runs", run.settings.timeout_s,
                        lambda m: run.log.detail(f"sizing {m}"))
    injected = [k for k in KINDS if k.injection != "none"]  # all of them: a resumed run may add kinds
    sizing = size_injections(measurer, injected, points, repeats, long_kv_len)
    path.write_text(sizing.model_dump_json(indent=2))
    _say_sizing(run.log, sizing)
    return sizing


def _say_sizing(log: Log, sizing: Sizing) -> None:
    for p in sizing.points:
        ms = f"{statistics.median(p.gpu_ms_per_step):.4f} ms per step" if p.gpu_ms_per_step else "no result"
        change = f"{p.change_pct:+.2f}%" if p.change_pct is not None else "-"
        log.say(f"sizing {p.label}: {ms} ({change}), tokens match base: {p.tokens_match_base}"
                f"{'; ' + p.error if p.error else ''}")
    for i in sizing.injections:
        chosen = f"{i.setting:g}" if i.setting is not None else "none"
        predicted = f"{i.predicted_pct:+.2f}%" if i.predicted_pct is not None else "-"
        log.say(f"sizing {i.kind}: {chosen} ({i.how}, predicted {predicted}){'; ' + i.note if i.note else ''}")
    log.say(f"sizing took {sizing.duration_s:.0f} s, {_process_s(sizing):.1f} s per process")


def _config_file(run: Run, name: str, repeats: int, thresholds: Path | None) -> Path:
    path = run.workdir / name
    write_config(path, run.settings.model_copy(update={"repeats": repeats}), thresholds)
    return path


def _calibration(run: Run) -> dict[str, Any] | None:
    path, thresholds = run.out / "calibration.json", run.out / "thresholds.toml"
    if path.exists() and (thresholds.exists() or "refused" in json.loads(path.read_text())):
        run.log.say(f"calibration: reusing {path}")
        return json.loads(path.read_text())
    repeats = run.args.calibrate_repeats
    needed = 2 * repeats * run.process_s + SIZING_OVERHEAD_S
    if not run.budget.allows(needed):
        run.log.say(f"budget: {run.budget.left_s():.0f} s left, calibration needs about {needed:.0f} s; "
                    "stopping before it")
        return None
    config = load_config(_config_file(run, "calibrate.toml", repeats, None), required=True)
    run.log.say(f"calibration: guard calibrate on {BASE_BRANCH}, {repeats} processes per side")
    written = run.workdir / "calibration" / "thresholds.toml"
    try:
        result = calibrate(run.repo, BASE_BRANCH, config, written, lambda m: run.log.detail(f"calibrate {m}"),
                           cache_dir=default_cache_dir(run.repo))
    except RunnerTooNoisy as refused:
        # a runner that has no thresholds file runs at measure.threshold_pct: so do the pairs
        thresholds.unlink(missing_ok=True)
        data = {"repeats": repeats, "refused": refused.message}
        path.write_text(json.dumps(data, indent=2))
        run.log.say(f"calibration: refused, the pairs run at measure.threshold_pct ({config.measure.threshold_pct:g}%)"
                    f": {refused.message}")
        return data
    shutil.copyfile(written, thresholds)
    data = result.model_dump(mode="json")
    path.write_text(json.dumps(data, indent=2))
    run.log.say(f"calibration: suggested thresholds {suggested_text(result.suggested)}")
    return data


def _run_pairs(run: Run, todo: list[tuple[Kind, int]]) -> None:
    assert run.sizing is not None
    thresholds = run.out / "thresholds.toml"  # none where the calibration was refused
    config_path = _config_file(run, "guard.toml", run.settings.repeats, thresholds if thresholds.exists() else None)
    config = load_config(config_path, required=True)
    run.log.say(f"pairs run with {config_path}; to repeat one by hand: guard run --repo {run.repo} "
                f"--base {BASE_BRANCH} --head BRANCH --config {config_path}")
    runnable = []
    for kind, index in todo:
        size = run.sizing.injection(kind.name)
        if kind.injection != "none" and (size is None or size.setting is None):
            why = size.note if size is not None else "not sized"
            run.log.say(f"{pair_id(kind, index)}: skipped, no setting for {kind.name} ({why})")
            continue
        runnable.append((kind, index, size))
    records = read_records(run.out / JSONL)
    pending, total = list(runnable), len(runnable)
    while pending:
        # Kinds take turns; near the end of the budget, a kind whose pairs take less may go first.
        fits, shortest = first_that_fits([k.name for k, _, _ in pending], records, run.settings, run.process_s,
                                         run.budget)
        if fits is None:
            run.log.say(f"budget: {run.budget.left_s():.0f} s left, a pair may take {shortest:.0f} s; stopping "
                        f"with {len(pending)} pair(s) to go: continue with --resume")
            return
        kind, index, size = pending.pop(fits)
        number = total - len(pending)
        pid = pair_id(kind, index)
        record = run_pair(run.repo, kind, index, size, config, config_path.parent, run.workdir / "pairs" / pid,
                          lambda m, pid=pid: run.log.detail(f"{pid} {m}"))
        keep_pair_files(run.workdir / "pairs" / pid, run.out / "pairs" / pid)  # the report first, then its line
        append_record(run.out / JSONL, record)
        records.append(record)
        _write_summary(run.out, run.planned, run.settings, run.sizing, run.calibration, run.log, quiet=True)
        left = len(pending)
        run.log.say(f"[{number}/{total}] {pid}: {_pair_line(load_pair(run.out, record).facts)}; "
                    f"{left} left, ETA {minutes(eta_s(records, left))}")


def _pair_line(r: PairFacts) -> str:
    parts = [r.verdict]
    if r.setting is not None:
        parts[0] += f" ({setting_label(r.injection, r.setting)})"
    if r.gpu_ms_change is not None:
        c = r.gpu_ms_change
        parts.append(f"GPU ms {c.pct:+.2f}% ({c.ci_low_pct:+.2f}% to {c.ci_high_pct:+.2f}%, p = {c.p_value:.2g})")
    if r.tok_per_s_change is not None:
        parts.append(f"tok/s {r.tok_per_s_change.pct:+.2f}%")
    parts += [f"cause {cause_text(r)}", f"{r.rounds} round(s)", f"{r.duration_s:.0f} s"]
    return ", ".join(parts)


# --- summary ------------------------------------------------------------------------------------


def _stop(run: Run) -> int:
    _write_summary(run.out, run.planned, run.settings, run.sizing, _load_calibration(run.out), run.log)
    run.log.say("stopped early; continue with --resume")
    return 0


def _write_summary(
    out: Path, planned: dict[str, int], settings: RunSettings | None, sizing: Sizing | None,
    calibration: dict[str, Any] | None, log: Log, pairs: list[Pair] | None = None, quiet: bool = False,
) -> Summary:
    if pairs is None:
        pairs = [load_pair(out, r) for r in read_records(out / JSONL)]
    # every kind the folder holds: a later call may plan fewer kinds than earlier calls ran
    kinds = [k for k in KINDS if k.name in planned or any(p.facts.kind == k.name for p in pairs)]
    summary = summarise(pairs, kinds, planned, settings, sizing, calibration)
    (out / "summary.json").write_text(summary.model_dump_json(indent=2))
    invocations_path = out / "invocations.txt"
    invocations = invocations_path.read_text().splitlines() if invocations_path.exists() else []
    (out / "summary.md").write_text(render_markdown(summary, invocations))
    if not quiet:
        log.say(f"wrote {out / 'summary.json'} and {out / 'summary.md'} ({len(summary.pairs)} pairs)")
    return summary


def _load_calibration(out: Path) -> dict[str, Any] | None:
    path = out / "calibration.json"
    return json.loads(path.read_text()) if path.exists() else None


def _summarise_only(args: argparse.Namespace, planned: dict[str, int], log: Log) -> None:
    """Merge pairs.jsonl of DIR with those named by --jsonl, each pair read from the report kept
    beside its pairs.jsonl; a pair id read twice keeps its last record."""
    pairs: dict[str, Pair] = {}
    duplicates = 0
    for path in [args.out / JSONL, *args.jsonl]:
        if path != args.out / JSONL and not path.exists():
            raise ConfigError(f"--jsonl {path}: no such file")
        for record in read_records(path):
            duplicates += record.pair_id in pairs
            pairs[record.pair_id] = load_pair(path.parent, record)
    if duplicates:
        log.say(f"{duplicates} pair id(s) appear more than once; the last one read is kept")
    settings_path, sizing_path = args.out / "settings.json", args.out / "sizing.json"
    settings = RunSettings.model_validate_json(settings_path.read_text()) if settings_path.exists() else None
    sizing = Sizing.model_validate_json(sizing_path.read_text()) if sizing_path.exists() else None
    _write_summary(args.out, planned, settings, sizing, _load_calibration(args.out), log,
                   pairs=list(pairs.values()))
