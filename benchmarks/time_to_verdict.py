"""How long `guard run` takes from its first build to report.json, and where the time goes.

Usage: python benchmarks/time_to_verdict.py [--steps N] [--warmup-steps N] [--repeats N]
                                            [--options 'layers = 36'] [--no-ablation] [--out FILE.json]
                                            [--workload demo|compiled|hf] [--compile-cache on|off|both]
                                            [--mix '1 = 0.4, 2 = 0.3, 3 = 0.2, 4 = 0.1'] [--aa]
                                            [--scenario piecewise|fallback|fallback-win]

Makes the repository `guard demo` makes (the reference engine on base, its piecewise capture
on head, and the ablation arm unless --no-ablation), with the config's defaults for steps,
warmup steps and repeats unless given. A first, short run fills the build cache and is not
counted; then the pipeline `guard run` runs (the base commit's config, with
`measure.compile_cache` as asked) is timed as a whole and by stage: the builds (cached),
the reference process, the measured processes by phase (as each harness process timed
itself), the comparisons, the trace analysis, the capture detection and the report's writing.
The confirmation round, when one ran, is its own line; when none ran, the line says what one
would add at the measured per-process times. On a CPU there is no profiled pass.

`--workload compiled` measures an A/A pair of `guard.workloads.compiled` (torch.compile)
instead, as `python -m validation engines` sets it up (batch size 1, no confirmation round;
with --guard-defaults, the guard's batch sizes, profiled processes and rounds instead);
`--options` then replaces its options (on a CPU: `compile_on_cpu = true, mode = "default"`).
`--workload hf` is the same A/A pair of `guard.workloads.hf` (transformers over a static
cache, compiled with torch.compile on a GPU). `--mix` adds that batch-size mix (the
workload's `batch_mix`, TOML inline-table body) to the config; `--aa` runs the demo's engine
against a head that changes only a notes file, without the ablation arm (an A/A pair, as most
pull requests are); `--scenario` stages another of the demo's scenarios (`fallback`: an MoE
engine over its batch-size mix).
`--compile-cache both` runs the same pipeline with `measure.compile_cache` on, then off, and
prints them side by side; every measured process is listed in order with the seconds torch.compile
spent in it and its FX graph cache's hits and misses, so the first process of an arm (which
compiles) stands beside the later ones (which load what it compiled).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import guard.pipeline as pipeline  # noqa: E402
from guard.config import GuardConfig, load_config  # noqa: E402
from guard.demo._repo import make_demo_repo  # noqa: E402
from guard.demo._scenarios import DEFAULT_SCENARIO, SCENARIOS  # noqa: E402
from guard.measure import RepeatResult  # noqa: E402

# the pipeline's stages, by the names it calls them under, and the line each is printed as
STAGES = {
    "build_arm": "builds (cached)",
    "prepare_reference": "reference process",
    "fill_compile_caches": "compile fill (unmeasured)",
    "run_interleaved": "measured processes",
    "compare": "comparisons",
    "trace_sections": "trace analysis",
    "find_capture_changes": "capture detection",
    "write_report": "report.json and comment.md",
}


class StageClock:
    """Wraps the pipeline's stage functions, in its own namespace, to add up their seconds."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {name: 0.0 for name in STAGES}
        self.rounds: list[tuple[float, int]] = []  # each round of measured processes: seconds, processes
        self.results: dict[tuple[str, int], RepeatResult] = {}  # every measured process, by (arm, repeat)
        self._originals: dict[str, Callable[..., Any]] = {}

    def __enter__(self) -> StageClock:
        for name in STAGES:
            original = getattr(pipeline, name)
            self._originals[name] = original
            setattr(pipeline, name, self._timed(name, original))
        return self

    def __exit__(self, *exc: object) -> None:
        for name, original in self._originals.items():
            setattr(pipeline, name, original)

    def _timed(self, name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                result = original(*args, **kwargs)
            finally:
                seconds = time.perf_counter() - started
                self.seconds[name] += seconds
            if name == "run_interleaved":
                self.rounds.append((seconds, sum(len(m.repeats) for m in result.values())))
                self.results |= {(r.arm, r.repeat): r for m in result.values() for r in m.repeats}
            return result

        return timed


def _process_phases(results: list[RepeatResult]) -> tuple[list[float], dict[str, list[float]]]:
    """Each measured process's seconds, and each phase's seconds over the processes that had it."""
    totals: list[float] = []
    by_phase: dict[str, list[float]] = {}
    for result in results:
        total = result.process_s or 0.0
        totals.append(total)
        phases = dict(result.timings_s)
        phases["start and exit"] = max(0.0, total - sum(phases.values()))
        for name, seconds in phases.items():
            by_phase.setdefault(name, []).append(seconds)
    return totals, by_phase


def _prime_cache(repo: Path, head: str, config: GuardConfig, work: Path) -> None:
    """A short run of the same builds, so the timed run finds them cached."""
    short = config.model_copy(update={
        "workload": config.workload.model_copy(update={
            "steps": 2, "warmup_steps": 0, "tok_per_s_min_s": 0.0, "warmup_max_s": 0.0, "profile_steps": 0}),
        "measure": config.measure.model_copy(update={"repeats": 2, "confirm": False}),
        "arms": [],
    })
    pipeline.run_guard(repo, None, head, short, work / "prime", progress=lambda _: None)


def _notes_head(repo: Path) -> str:
    """A head branch off main whose one commit adds a notes file: the engine unchanged."""
    from guard._git import made_git

    made_git(repo, "checkout", "--quiet", "-b", "notes", "main", author="Bench", email="bench@example.invalid")
    (repo / "NOTES.md").write_text("A note; the engine is unchanged.\n")
    made_git(repo, "add", "NOTES.md", author="Bench", email="bench@example.invalid")
    made_git(repo, "commit", "--quiet", "-m", "notes: a line", author="Bench", email="bench@example.invalid")
    made_git(repo, "checkout", "--quiet", "main", author="Bench", email="bench@example.invalid")
    return "notes"


def _with_mix(config: GuardConfig, mix: dict[int, float]) -> GuardConfig:
    return config.model_copy(update={"workload": config.workload.model_copy(update={"batch_mix": mix})})


def _compiled_repo(work: Path, args: argparse.Namespace) -> tuple[Path, str]:
    """An A/A pair of the compiled (or hf) workload, as the engines validation makes it: repository, head branch."""
    from validation._engines import CASES, Case, head_branch, make_repo

    known = CASES[args.workload]
    case = Case(known.name, known.entry, args.options or known.options, known.engine_file)
    made = argparse.Namespace(steps=args.steps, warmup_steps=args.warmup_steps, profile_steps=args.profile_steps,
                              repeats=args.repeats)
    repo = make_repo(case, work, made)
    return repo, head_branch(repo, case, "aa")


def _at_guard_defaults(config: GuardConfig, defaults: GuardConfig) -> GuardConfig:
    """The engines validation's config with what it sets for speed (batch size 1, one profiled
    process, no confirmation round) back at the guard's defaults."""
    fields = ("batch_sizes", "profile_repeats")
    workload = config.workload.model_copy(update={f: getattr(defaults.workload, f) for f in fields})
    measure = config.measure.model_copy(update={"confirm": defaults.measure.confirm})
    return config.model_copy(update={"workload": workload, "measure": measure})


def _processes(results: list[RepeatResult]) -> list[dict[str, Any]]:
    """Every measured process in the order it ran within its arm: its seconds, its setup and
    warmup, what torch.compile cost it and what the FX graph cache gave."""
    rows = []
    for result in sorted(results, key=lambda r: (r.arm, r.repeat)):
        stats = result.compile
        rows.append({
            "arm": result.arm, "repeat": result.repeat, "process_s": result.process_s,
            "setup_and_warmup_s": result.timings_s.get("setup and warmup"),
            "compile_s": stats.compile_s if stats else None,
            "fx_graph_cache": stats.fx_graph.model_dump() if stats else None,
        })
    return rows


def _side_by_side(by_setting: dict[str, dict[str, Any]]) -> None:
    """The cache on and off in columns: time to verdict, and per arm its first process and the later ones."""
    names = list(by_setting)
    print("\n" + " " * 52 + "".join(f"{'compile cache ' + n:>22s}" for n in names))
    print(f"  {'time to verdict (s)':50s}" + "".join(f"{by_setting[n]['time_to_verdict_s']:22.1f}" for n in names))
    print(f"  {'reference process (s)':50s}"
          + "".join(f"{by_setting[n]['stages_s']['reference process']:22.1f}" for n in names))
    arms = sorted({row["arm"] for n in names for row in by_setting[n]["processes"]})
    picks: dict[str, Callable[[list[dict[str, Any]]], list[dict[str, Any]]]] = {
        "first process": lambda rows: rows[:1], "later processes, median": lambda rows: rows[1:]}
    for arm in arms:
        for label, pick in picks.items():
            for key, what in (("process_s", "s"), ("setup_and_warmup_s", "setup and warmup s"),
                              ("compile_s", "torch.compile s")):
                cells = []
                for n in names:
                    rows = pick([r for r in by_setting[n]["processes"] if r["arm"] == arm])
                    values = [r[key] for r in rows if r[key] is not None]
                    cells.append(f"{statistics.median(values):22.1f}" if values else f"{'-':>22s}")
                print(f"  {f'{arm}, {label}, {what}':50s}" + "".join(cells))


def _bad(message: str) -> int:
    print(f"time_to_verdict: {message}", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    defaults = GuardConfig()
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=defaults.workload.steps)
    p.add_argument("--warmup-steps", type=int, default=defaults.workload.warmup_steps)
    p.add_argument("--repeats", type=int, default=defaults.measure.repeats)
    p.add_argument("--options", default="", help="the workload's options, as TOML, e.g. 'layers = 36' "
                   "(--workload compiled: an inline table's body, e.g. 'layers = 2, d_model = 256')")
    p.add_argument("--no-ablation", action="store_true", help="base and head only, without the demo's ablation arm")
    p.add_argument("--workload", choices=("demo", "compiled", "hf"), default="demo",
                   help="the demo's reference engine, or an A/A pair of guard.workloads.compiled or .hf")
    p.add_argument("--mix", default="", help="a batch-size mix for the config, as TOML, e.g. '1 = 0.5, 2 = 0.5'")
    p.add_argument("--aa", action="store_true", help="--workload demo: a head that changes only a notes file")
    p.add_argument("--scenario", choices=sorted(SCENARIOS), default=DEFAULT_SCENARIO,
                   help="--workload demo: which of the demo's scenarios is staged")
    p.add_argument("--profile-steps", type=int, default=8, help="--workload compiled: steps of its profiled pass")
    p.add_argument("--compile-cache", choices=("on", "off", "both"), default="on",
                   help="measure.compile_cache for the timed run; both: on, then off, side by side")
    p.add_argument("--guard-defaults", action="store_true",
                   help="--workload compiled: batch sizes, profiled processes and confirmation rounds at the guard's "
                   "defaults too, not as the engines validation sets them")
    p.add_argument("--out", type=Path, default=None, help="write the figures as JSON here")
    args = p.parse_args(argv)
    try:
        tomllib.loads(args.options if args.workload == "demo" else f"options = {{ {args.options} }}")
    except tomllib.TOMLDecodeError as exc:
        return _bad(f"--options {args.options!r} is not TOML ({exc}), e.g. 'layers = 36'")
    try:
        mix = {int(size): share for size, share in tomllib.loads(f"mix = {{ {args.mix} }}")["mix"].items()}
    except (tomllib.TOMLDecodeError, ValueError) as exc:
        return _bad(f"--mix {args.mix!r} is not a TOML table of batch sizes to shares ({exc}), e.g. '1 = 0.5, 2 = 0.5'")

    work = Path(tempfile.mkdtemp(prefix="guard-ttv-"))
    work.chmod(0o755)  # run as root, the arms' code runs as build.user, which must reach the repository
    if args.workload == "demo":
        repo = work / "engine-repo"
        _, head = make_demo_repo(repo, args.steps, args.warmup_steps, args.repeats, args.options,
                                 scenario=args.scenario)
        if args.aa:
            head = _notes_head(repo)
        committed = load_config(repo / "guard.toml")
        if mix:
            committed = _with_mix(committed, mix)
        _prime_cache(repo, head, committed, work)
    else:  # build method none: nothing to build, so nothing to prime
        repo, head = _compiled_repo(work, args)
        committed = load_config(repo / "guard.toml")
        if args.guard_defaults:
            committed = _at_guard_defaults(committed, defaults)
        if mix:
            committed = _with_mix(committed, mix)
    no_arms = args.no_ablation or args.aa
    base_config = committed.model_copy(update={"arms": []}) if no_arms else committed

    settings = ("on", "off") if args.compile_cache == "both" else (args.compile_cache,)
    by_setting: dict[str, dict[str, Any]] = {}
    for setting in settings:
        measure = base_config.measure.model_copy(update={"compile_cache": setting == "on"})
        config = base_config.model_copy(update={"measure": measure})
        figures = _timed_run(repo, head, config, work / f"out-cache-{setting}", argv, args)
        if figures is None:
            return _bad("no measured process finished; see the progress above")
        by_setting[setting] = figures
        _print_figures(figures, args.repeats)
    if len(by_setting) > 1:
        _side_by_side(by_setting)
    if args.out:
        written = by_setting[settings[0]] if len(by_setting) == 1 else {f"compile_cache_{k}": v
                                                                        for k, v in by_setting.items()}
        args.out.write_text(json.dumps(written, indent=2) + "\n")
    return 0


def _timed_run(repo: Path, head: str, config: GuardConfig, out: Path, argv: list[str] | None,
               args: argparse.Namespace) -> dict[str, Any] | None:
    """The pipeline `guard run` runs, timed as a whole and by stage; its figures, None when no process finished."""
    load_before = os.getloadavg()[0]
    started = time.perf_counter()

    def progress(message: str) -> None:
        print(f"[{time.perf_counter() - started:6.1f} s] {message}", file=sys.stderr, flush=True)

    with StageClock() as clock:
        report = pipeline.run_guard(repo, None, head, config, out, progress=progress)
    total_s = time.perf_counter() - started

    rounds = [{"seconds": seconds, "processes": count} for seconds, count in clock.rounds]
    results = list(clock.results.values())
    totals, by_phase = _process_phases(results)
    if not totals:
        return None
    figures: dict[str, Any] = {
        "command": "python benchmarks/time_to_verdict.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "device": report.environment.gpu or f"CPU ({report.environment.cpu})",
        "cpus": os.cpu_count(),
        "load_average_1min": [load_before, os.getloadavg()[0]],  # before and after: a shared machine shows
        "workload": args.workload,
        "compile_cache": config.measure.compile_cache,
        "verdict": report.verdict,
        "rounds": report.rounds,
        "arms": [a.name for a in report.arms],
        "steps": args.steps,
        "warmup_steps": args.warmup_steps,
        "repeats": args.repeats,
        "options": args.options,
        "time_to_verdict_s": total_s,
        "stages_s": {STAGES[name]: seconds for name, seconds in clock.seconds.items()},
        "other_s": total_s - sum(clock.seconds.values()),
        "measured_rounds": rounds,
        "per_process_s": {"median": statistics.median(totals), "min": min(totals), "max": max(totals),
                          "count": len(totals)},
        "per_phase_s": {name: {"median": statistics.median(values), "processes": len(values), "sum": sum(values)}
                        for name, values in sorted(by_phase.items(), key=lambda item: -sum(item[1]))},
        "processes": _processes(results),
    }
    profiled = [r.process_s or 0.0 for r in results if any(run.trace for run in r.runs)]
    unprofiled = [r.process_s or 0.0 for r in results if not any(run.trace for run in r.runs)]
    figures["profiled_process_s"] = statistics.median(profiled) if profiled else None
    figures["unprofiled_process_s"] = statistics.median(unprofiled) if unprofiled else None
    if report.rounds == 1:
        # what a confirmation round (base and head, `repeats` more each, none profiled) would add
        figures["confirmation_round_estimate_s"] = 2 * args.repeats * statistics.median(unprofiled or totals)
    return figures


def _print_figures(figures: dict[str, Any], repeats: int) -> None:
    per = figures["per_process_s"]
    print(f"time to verdict: {figures['time_to_verdict_s']:.1f} s on {figures['device']} (verdict "
          f"{figures['verdict']}, {figures['rounds']} round(s), arms {', '.join(figures['arms'])}, compile cache "
          f"{'on' if figures['compile_cache'] else 'off'})")
    for name, seconds in figures["stages_s"].items():
        print(f"  {name:28s} {seconds:7.1f} s")
    print(f"  {'other (git, config, cause)':28s} {figures['other_s']:7.1f} s")
    for number, measured in enumerate(figures["measured_rounds"], start=1):
        print(f"  round {number}: {measured['processes']} processes in {measured['seconds']:.1f} s")
    profiled, unprofiled = figures["profiled_process_s"], figures["unprofiled_process_s"]
    print(f"  per measured process: median {per['median']:.1f} s ({per['min']:.1f}-{per['max']:.1f})"
          + (f"; profiled {profiled:.1f} s, the others {unprofiled:.1f} s" if profiled and unprofiled else ""))
    for name, phase in figures["per_phase_s"].items():
        print(f"    {name:34s} median {phase['median']:5.2f} s in {phase['processes']:2d} processes, "
              f"{phase['sum']:6.1f} s in all")
    for row in figures["processes"]:
        fx = row["fx_graph_cache"]
        compiled = (f"; torch.compile {row['compile_s']:.1f} s, FX graph cache {fx['hit']} hit {fx['miss']} miss"
                    if fx is not None else "")
        print(f"    {row['arm']} repeat {row['repeat'] + 1}: {row['process_s'] or 0:.1f} s, setup and warmup "
              f"{row['setup_and_warmup_s'] or 0:.1f} s{compiled}")
    if "confirmation_round_estimate_s" in figures:
        print(f"  no confirmation round ran; one would add about {figures['confirmation_round_estimate_s']:.0f} s "
              f"(2 x {repeats} processes at the median unprofiled process time)")


if __name__ == "__main__":
    sys.exit(main())
