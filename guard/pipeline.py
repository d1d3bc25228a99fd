"""The pipeline `guard run` and `guard demo` share: resolve, build, measure, compare, report."""

from __future__ import annotations

import time
from contextlib import ExitStack
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, NamedTuple

import guard
from guard._errors import BuildError, ConfigError, GuardError
from guard._output import check_out_dir
from guard.cause import CaptureChanges, find_capture_changes
from guard.explain import explain
from guard.harness import HARNESS_SCRIPT
from guard.checkout import (
    ArmRef, BuiltArm, build_arm, check_interpreter_reach, commit_subject, default_cache_dir, persisted_credentials,
    resolve_arms, require_distinct, uncommitted_changes,
)
from guard.compare import Comparison, compare, confirm_undecided
from guard.config import (
    DEFAULT_CONFIG_NAME, CalibratedSpread, CommitFiles, ConfigChange, ConfigOverrides, Files, FolderFiles, GuardConfig,
    ThresholdSource, ThresholdSources, apply_overrides, check_entry, config_change, config_paths, load_commit_config,
    read_thresholds,
)
from guard.measure import (
    ArmMeasurement, ArmTarget, HarnessSpec, RepeatResult, ReferenceOutcome, RoundsBudget, check_cpus, mix_report,
    prepare_reference, rank_trace_paths, run_interleaved, share_compile_caches, slow_processes, fill_compile_caches,
)
from guard.report import (
    ArmInfo, Environment, Report, WorkloadInfo, run_record, slow_processes_sentence, write_report,
)
from guard.sandbox import counting_sweeps, sweeps_of
from guard.trace import mix_trace_section, rank_trace_sections, trace_sections

Progress = Callable[[str], None]


def run_guard(
    repo: Path,
    base: str | None,
    head: str,
    config: GuardConfig | None,
    out_dir: Path,
    cache_dir: Path | None = None,
    progress: Progress = lambda _: None,
    config_dir: Path | None = None,
    github_repo: str | None = None,
    server_url: str = "https://github.com",
    overrides: ConfigOverrides | None = None,
) -> Report:
    """`config` None: guard.toml and the files it names come from the base commit, as git holds
    it. A config the caller gives (--config, the demo) is used as it is, with the files it names
    in `config_dir` (default: the repository). `overrides` replace some of its values (the
    command line's), and the report says which."""
    # the arms' cached builds stay locked until the report is written: no other run rebuilds them meanwhile
    with ExitStack() as builds_in_use:
        return _run_guard(repo, base, head, config, out_dir, cache_dir, progress, config_dir, github_repo, server_url,
                          builds_in_use, overrides or ConfigOverrides())


def run_config(
    repo: Path, base: str | None, head: str, config: GuardConfig | None, config_dir: Path | None = None
) -> GuardConfig:
    """The config `run_guard` runs with, from the same arguments: the caller's, or the base
    commit's. `guard run` needs its build.pass_env before it restarts itself clean."""
    return _arms_and_config(repo.resolve(), base, head, config, config_dir).config


def _run_guard(
    repo: Path,
    base: str | None,
    head: str,
    config: GuardConfig | None,
    out_dir: Path,
    cache_dir: Path | None,
    progress: Progress,
    config_dir: Path | None,
    github_repo: str | None,
    server_url: str,
    builds_in_use: ExitStack,
    overrides: ConfigOverrides,
) -> Report:
    started = time.time()
    repo = repo.resolve()
    out_dir = out_dir.resolve()
    left = builds_in_use.enter_context(counting_sweeps())  # what each arm's code left behind, by arm
    # the guard's before anything of the pull request runs, which then cannot make it its own
    check_out_dir(out_dir)
    base_ref, head_ref, config, files, change = _arms_and_config(repo, base, head, config, config_dir)
    progress(f"base {base_ref.ref} = {base_ref.sha[:12]}, head {head_ref.ref} = {head_ref.sha[:12]}")
    if dirty := uncommitted_changes(repo):
        progress(f"warning: {len(dirty)} file(s) in the working tree have uncommitted changes ({dirty[0]}"
                 f"{', ...' if len(dirty) > 1 else ''}); they are not measured: the guard builds the commits")
    if change is not None:
        progress(f"config: from the base commit; the head's changes to {', '.join(change.paths)} are not used")
    if overrides.given():
        config = apply_overrides(config, overrides)
        given = ", ".join(f"{name} {value}" for name, value in overrides.given().items())
        progress(f"config: overridden on the command line: {given}")
    gpu_pct, tok_pct, end_to_end_pct, spreads, threshold_sources = _thresholds(config, files)
    require_distinct(base_ref, head_ref)  # after the config: its errors are the ones to fix first
    check_cpus(config.measure.cpus)
    check_interpreter_reach(config.build, [HARNESS_SCRIPT])
    cache_dir = cache_dir or default_cache_dir(repo)
    exposed = persisted_credentials(repo)
    security = []
    if exposed:
        security.append(
            f"the checkout keeps a credential in .git/config ({', '.join(exposed)}), which the pull request's "
            "code can read: check out with `persist-credentials: false`"
        )
        progress("warning: " + security[0])

    arms: list[ArmInfo] = []
    targets: list[ArmTarget] = []
    measurements: dict[str, ArmMeasurement] = {}
    for ref in (base_ref, head_ref):
        info, arm = _build(repo, ref, config, cache_dir, progress, builds_in_use)
        arms.append(info)
        if arm is not None:
            check_entry(config.workload.entry, arm.worktree)
            targets.append(ArmTarget(name=arm.name, python=arm.python, worktree=arm.worktree, env=arm.env,
                                   pass_env=config.build.pass_env, user=config.build.user, cpus=config.measure.cpus,
                                   container=arm.container))
        else:
            measurements[ref.name] = ArmMeasurement(arm=ref.name, error=info.error, log_tail=info.log_tail)
    _add_ablation_arms(config, arms, targets, measurements)
    if config.measure.compile_cache:  # every round of this run, the reference process's too (base's)
        targets = share_compile_caches(targets, builds_in_use)
        if shared := [t.compile_cache for t in targets if t.compile_cache is not None]:
            progress(f"compile caches: a folder per arm under {shared[0].parent}, shared by that arm's processes")

    spec = HarnessSpec.of(config.workload)
    repeats = config.measure.repeats
    base_target = next((t for t in targets if t.name == base_ref.name), None)
    reference = ReferenceOutcome()
    if base_target is not None:
        spec, reference = prepare_reference(
            base_target, spec, out_dir / "runs", config.measure.timeout_s, config.workload.reference_file,
            f"base {base_ref.sha[:8]}", progress, files=CommitFiles(repo=repo, sha=base_ref.sha),
        )
    reference_ran = base_target is not None and not config.workload.reference_file
    filled_arms = fill_compile_caches(targets, base_ref.name, reference_ran, spec, reference, out_dir / "runs",
                                      config.measure.timeout_s, progress)
    if targets:
        progress(
            f"measuring {len(targets)} arm(s) x {repeats} repeats, interleaved; "
            f"batch sizes {spec.batch_sizes}, {spec.warmup_steps} warmup + {spec.steps} timed steps"
        )
        measurements |= run_interleaved(targets, spec, repeats, out_dir / "runs", config.measure.timeout_s, progress,
                                        reference=reference.tokens if spec.reference else None)

    looks = config.measure.looks  # alpha is split over the most rounds the run may take

    schedule = spec.mix_schedule()
    verdict_arms = (base_ref.name, head_ref.name)
    decided_at: dict[int, int] = {}  # batch size -> the last round that measured it
    mix_at = 1
    budget = RoundsBudget(config.measure.confirm_budget_s)
    budget.measured(_verdict_processes(measurements, verdict_arms), confirmation=False)

    def decide() -> Comparison:
        return compare(
            {a.name: measurements[a.name] for a in arms},
            base_ref.name, head_ref.name, spec.batch_sizes,
            gpu_pct, config.measure.confidence, config.measure.alpha, tok_pct,
            reference=reference.tokens.source if reference.tokens else None, looks=looks, look=decided_at,
            mix_schedule=schedule, mix_look=mix_at, end_to_end_threshold_pct=end_to_end_pct, spreads=spreads,
        )

    def fits(_undecided: list[int], _mix: bool) -> bool:
        return budget.fits(2 * repeats)

    def confirmation_round(undecided: list[int], mix: bool) -> Comparison:
        nonlocal mix_at
        round_no = budget.rounds + 1
        what = ([f"batch size(s) {undecided}"] if undecided else []) + (["the batch-size mix"] if mix else [])
        progress(f"{' and '.join(what)} undecided: confirmation round {round_no} of at most {looks}, "
                 f"{repeats} repeats per arm of those alone (about {budget.estimate_s(2 * repeats):.0f} s of "
                 f"the {budget.left_s():.0f} s left)")
        # a mix decided in an earlier round is not measured again: its verdict stands on that round
        alone = {"batch_sizes": undecided} | ({} if mix else {"batch_mix": None, "batch_mix_steps": None})
        # base and head alone: the verdict is theirs, and an ablation arm's row stands on its first round
        healthy = [t for t in targets if measurements[t.name].error is None and t.name in verdict_arms]
        more = run_interleaved(
            healthy, spec.model_copy(update=alone), repeats, out_dir / "runs",
            config.measure.timeout_s, progress, first_repeat=(round_no - 1) * repeats,
            reference=reference.tokens if spec.reference else None,
        )
        budget.measured([r for extra in more.values() for r in extra.repeats], confirmation=True)
        for name, extra in more.items():
            merged = measurements[name]
            merged.repeats.extend(extra.repeats)
            merged.error, merged.log_tail = merged.error or extra.error, merged.log_tail or extra.log_tail
        decided_at.update({size: round_no for size in undecided})
        mix_at = round_no if mix else mix_at
        return decide()

    comparison, rounds, stopped, _ = confirm_undecided(decide(), confirmation_round, fits)
    progress(f"rounds: {rounds}, stopped: {stopped}")
    slow = slow_processes(measurements.values(), spec.batch_sizes, schedule)
    gpu_timed = any(a.timer == "cuda_event" for b in comparison.batch_sizes for a in b.arms)
    progress(slow_processes_sentence(slow, gpu=gpu_timed))

    for info in arms:
        m = measurements[info.name]
        info.repeats = len(m.repeats)
        info.swept, info.temp_removed = left.processes[info.name], left.temp_entries[info.name]
        if m.error and info.status == "ok":
            info.status, info.error, info.log_tail = "run_failed", m.error, m.log_tail

    traces = _trace_paths(measurements)
    if traces:
        progress(f"analysing {sum(len(v) for by in traces.values() for v in by.values())} profiler traces")
    sections = trace_sections(traces, base_ref.name, head_ref.name, spec.batch_sizes, spec.profile_steps, out_dir)
    mix_traces = mix_trace_section(_mix_trace_paths(measurements), base_ref.name, head_ref.name, spec.profile_steps,
                                   out_dir)
    rank_traces = rank_trace_sections(rank_trace_paths(measurements), base_ref.name, head_ref.name, spec.batch_sizes,
                                      _profiled_steps(measurements), out_dir)
    capture = _capture_changes(repo, base_ref.sha, head_ref.sha, config.capture.globs, progress)
    mix = mix_report(schedule, spec.batch_mix_file or "batch_mix", spec.batch_mix_seed, spec.steps,
                     measurements, [a.name for a in arms])
    explanation = explain(
        comparison.verdict, comparison.batch_sizes, {s.batch_size: s.diff for s in sections if s.diff is not None},
        base_ref.name, head_ref.name, threshold_pct=comparison.threshold_pct, confidence=comparison.confidence,
        ablation_builds={a.name: a.source for a in arms if a.source is not None and a.status == "ok"},
        capture=capture, mix=mix, mix_trace=mix_traces.diff if mix_traces is not None else None,
        mix_decision=comparison.mix_comparison,
        rank_diffs={s.batch_size: s.diff for s in rank_traces if s.diff is not None},
        compiled=comparison.compiled,
        tok_threshold_pct=comparison.tok_threshold_pct, end_to_end_threshold_pct=comparison.end_to_end_threshold_pct,
    )
    report = Report(
        # the comparison's own fields (a report is a comparison), the security notes among its warnings
        **{**dict(comparison), "warnings": security + comparison.warnings},
        tool_version=guard.__version__,
        base=base_ref.name,
        head=head_ref.name,
        arms=arms,
        rounds=rounds,
        rounds_stopped=stopped,
        confirm_s=round(budget.confirm_s, 1) if rounds > 1 else None,
        confirm_budget_s=budget.budget_s if looks > 1 else None,
        slow_processes=slow,
        compile_caches=True if config.measure.compile_cache else None,
        compile_filled=filled_arms,
        workload=WorkloadInfo(
            **spec.model_dump(exclude={"reference"}), repeats=repeats,
            described=_described(measurements, head_ref.name),
            reference=reference.tokens.source if reference.tokens else None,
            reference_error=reference.error,
        ),
        environment=_environment(measurements, [base_ref.name, head_ref.name]),
        traces=sections,
        changed_files=capture.changed_files if capture else [],  # from the one diff capture detection reads
        config_change=change,
        overrides=overrides if overrides.given() else None,
        capture=capture,
        mix=mix,
        mix_traces=mix_traces,
        rank_traces=rank_traces,
        record=run_record(measurements, [base_ref.name, head_ref.name], mix),
        github_repo=github_repo,
        server_url=server_url,
        repo=str(repo),
        started_at=datetime.fromtimestamp(started, timezone.utc).isoformat(timespec="seconds"),
        duration_s=round(time.time() - started, 1),
        explanation=explanation,
        threshold_sources=threshold_sources,
        at_threshold_status=config.measure.at_threshold,
    )
    write_report(report, out_dir)
    return report


def _capture_changes(
    repo: Path, base_sha: str, head_sha: str, globs: list[str], progress: Progress
) -> CaptureChanges | None:
    try:
        found = find_capture_changes(repo, base_sha, head_sha, globs)
    except GuardError as exc:  # the comparison stands without it; say why it is missing
        progress(f"capture-change detection skipped: {exc.message}")
        return None
    if found.files:
        progress(f"changes to CUDA graph capture: {', '.join(f.path for f in found.files)}")
    return found


class _Resolved(NamedTuple):
    base: ArmRef
    head: ArmRef
    config: GuardConfig
    files: Files  # where the files the config names are read from
    change: ConfigChange | None  # the head's changes to the config, not used


def _arms_and_config(
    repo: Path, base: str | None, head: str, given: GuardConfig | None, config_dir: Path | None
) -> _Resolved:
    if given is not None:
        base_ref, head_ref = resolve_arms(repo, base, head, given.target_branch)
        # beside a config from outside the checkout, named files must be outside it too
        files = FolderFiles(folder=config_dir, checkout=repo) if config_dir else FolderFiles(folder=repo)
        return _Resolved(base_ref, head_ref, given, files, None)
    # Without --base the target branch picks the base; the head must not pick it, so it starts
    # as the default and moves only where the base's own config says.
    default = GuardConfig().target_branch
    base_ref, head_ref = resolve_arms(repo, base, head, default)
    config = load_commit_config(repo, base_ref.sha)
    if base is None and config.target_branch != default:
        base_ref, head_ref = resolve_arms(repo, None, head, config.target_branch)
        moved = load_commit_config(repo, base_ref.sha)
        if moved.target_branch != config.target_branch:
            raise ConfigError(
                f"the config at the merge-base with {default} names target_branch '{config.target_branch}', but "
                f"the one at the merge-base with '{config.target_branch}' names '{moved.target_branch}'; "
                "pass --base to say which base to compare with"
            )
        config = moved
    change = config_change(repo, base_ref.sha, head_ref.sha, config_paths(config, DEFAULT_CONFIG_NAME))
    return _Resolved(base_ref, head_ref, config, CommitFiles(repo=repo, sha=base_ref.sha), change)


class _Thresholds(NamedTuple):
    """The thresholds a run decides by, in percent, the spreads it may borrow, and where each came from."""

    gpu_ms_pct: float
    tok_per_s_pct: float
    end_to_end_ms_pct: float
    spreads: list[CalibratedSpread]
    sources: ThresholdSources


def _thresholds(config: GuardConfig, files: Files) -> _Thresholds:
    """GPU ms, tok/s and end-to-end ms thresholds in percent: calibrated ones when a file is named,
    with the spreads they were calibrated at, which the rule may borrow; and where each came from.
    A metric the file wrote no threshold for (tok/s too noisy to gate) takes GPU ms's."""
    measure = config.measure
    if measure.thresholds_file is None:
        return _Thresholds(measure.threshold_pct, measure.threshold_pct,
                           measure.end_to_end_threshold_pct or measure.threshold_pct, [],
                           ThresholdSources(gpu_ms="configured", tok_per_s="configured", end_to_end_ms="configured"))
    calibrated = read_thresholds(files, measure.thresholds_file)

    def own(pct: float | None) -> tuple[float, ThresholdSource]:
        return (calibrated.gpu_ms_pct, "gpu_ms_fallback") if pct is None else (pct, "calibrated")

    (tok, tok_from), (end, end_from) = own(calibrated.tok_per_s_pct), own(calibrated.end_to_end_ms_pct)
    return _Thresholds(calibrated.gpu_ms_pct, tok, end, calibrated.spreads,
                       ThresholdSources(gpu_ms="calibrated", tok_per_s=tok_from, end_to_end_ms=end_from))


def _add_ablation_arms(
    config: GuardConfig, arms: list[ArmInfo], targets: list[ArmTarget], measurements: dict[str, ArmMeasurement]
) -> None:
    """Each [[arms]] entry reuses the build of base or head and runs with its env overrides."""
    by_name = {t.name: t for t in targets}
    infos = {a.name: a for a in arms}
    for extra in config.arms:
        source = infos[extra.source]
        info = source.model_copy(
            update={"name": extra.name, "label": extra.label or extra.name, "source": extra.source, "env": extra.env}
        )
        arms.append(info)
        if extra.source in by_name:
            built = by_name[extra.source]
            targets.append(built.model_copy(update={"name": extra.name, "env": built.env | extra.env}))
        else:
            measurements[extra.name] = ArmMeasurement(
                arm=extra.name, error=f"its source arm '{extra.source}' did not build", log_tail=""
            )


def _build(
    repo: Path, ref: ArmRef, config: GuardConfig, cache_dir: Path, progress: Progress, builds_in_use: ExitStack
) -> tuple[ArmInfo, BuiltArm | None]:
    info = ArmInfo(
        name=ref.name, ref=ref.ref, sha=ref.sha, subject=commit_subject(repo, ref.sha),
        build_method=config.build.method,
    )
    try:
        with sweeps_of(ref.name):
            arm = build_arm(repo, ref, config.build, cache_dir, progress, hold=builds_in_use)
    except BuildError as exc:
        progress(f"{ref.name}: {exc.message}")
        info.status, info.error, info.log_tail = "build_failed", exc.message, exc.log_tail
        return info, None
    info.build_reused, info.build_s = arm.reused, round(arm.build_s, 1)
    return info, arm


def _environment(measurements: dict[str, ArmMeasurement], order: list[str]) -> Environment:
    for name in order:
        m = measurements.get(name)
        if m and m.repeats:
            return Environment.model_validate(m.repeats[0].environment, strict=False)
    return Environment()


def _verdict_processes(measurements: dict[str, ArmMeasurement], arms: tuple[str, str]) -> list[RepeatResult]:
    return [r for name in arms if name in measurements for r in measurements[name].repeats]


def _trace_paths(measurements: dict[str, ArmMeasurement]) -> dict[str, dict[int, list[tuple[int, Path]]]]:
    """arm -> batch size -> (repeat, trace) for every profiled pass on a GPU that left a trace (a
    CPU's, of gloo ranks, holds no kernels: only the analysis across ranks reads it)."""
    found: dict[str, dict[int, list[tuple[int, Path]]]] = {}
    for arm, m in measurements.items():
        for result in m.repeats:
            for run in result.runs:
                if run.trace and run.timer == "cuda_event":
                    found.setdefault(arm, {}).setdefault(run.batch_size, []).append((result.repeat, Path(run.trace)))
    return found


def _mix_trace_paths(measurements: dict[str, ArmMeasurement]) -> dict[str, list[tuple[int, Path]]]:
    """arm -> (repeat, trace) for every profiled pass of the mix that left a trace."""
    return {arm: found for arm, m in measurements.items()
            if (found := [(r.repeat, Path(r.mix.trace)) for r in m.repeats if r.mix and r.mix.trace])}


def _profiled_steps(measurements: dict[str, ArmMeasurement]) -> dict[int, int]:
    """Batch size -> the steps its profiled passes ran (on a CPU the harness profiles no more
    than the timed steps, whatever profile_steps says)."""
    return {run.batch_size: run.profile_steps for m in measurements.values() for result in m.repeats
            for run in result.runs if run.trace}


def _described(measurements: dict[str, ArmMeasurement], arm: str) -> dict[str, object]:
    m = measurements.get(arm)
    if not m or not m.repeats:
        return {}
    return {str(run.batch_size): run.workload for run in m.repeats[0].runs}
