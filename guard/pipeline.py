"""The pipeline `guard run` and `guard demo` share: resolve, build, measure, decide in rounds,
report; and `guard record`'s, which builds and measures one commit with the same steps and
records its figures. Each stage is a function of its own; the one that starts processes is
passed in (a `Harness`), so the whole pipeline runs in-process over recorded or synthetic
processes too."""

from __future__ import annotations

import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

import guard
from guard._errors import BuildError, ConfigError, GuardError
from guard._output import check_out_dir
from guard._resolve import arms_and_config
from guard.export import write_record
from guard.cause import CaptureChanges, find_capture_changes
from guard.harness import HARNESS_SCRIPT
from guard.checkout import (
    ArmRef, BuiltArm, build_arm, check_interpreter_reach, commit_subject, default_cache_dir, persisted_credentials,
    require_distinct, require_repo, resolve_commit, uncommitted_changes,
)
from guard.compare import (
    Comparison, CredentialKept, Decide, MeasureRound, RoundsOutcome, RunWarning, arm_stats, check_measurements,
    compare, decide_in_rounds,
)
from guard.config import (
    DEFAULT_CONFIG_NAME, MAX_CONFIG_BYTES, CommitFiles, ConfigChange, ConfigOverrides, Files, GuardConfig, Rule,
    apply_overrides, check_entry, check_entry_in_commit, config_uncommitted, load_commit_config, read_thresholds,
)
from guard.measure import (
    ArmMeasurement, ArmTarget, Harness, HarnessSpec, ReferenceOutcome, check_cpus,
    mix_report, prepare_reference, rank_trace_paths, run_interleaved, run_ranks, share_compile_caches,
    slow_processes, fill_compile_caches,
)
from guard.record import Record, RecordedBatch
from guard.report import (
    ArmInfo, Environment, Report, WorkloadInfo, explain_run, run_record, slow_processes_sentence, warning_text,
    write_report,
)
from guard.sandbox import Box, Leftovers, choose_box
from guard.trace import mix_trace_section, rank_trace_sections, trace_sections

Progress = Callable[[str], None]
RECORDED_ARM = "commit"  # the one arm of `guard record`: its processes' files are commit-N.json


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
    harness: Harness = run_ranks,
) -> Report:
    """`config` None: guard.toml and the files it names come from the base commit, as git holds
    it. A config the caller gives (--config, the demo) is used as it is, with the files it names
    in `config_dir` (default: the repository). `overrides` replace some of its values (the
    command line's), and the report says which. `harness` runs each process of an arm: the
    arm's interpreter in its sandbox, or a stand-in that answers as one would."""
    started = time.time()
    repo, out_dir = repo.resolve(), out_dir.resolve()
    # the arms' cached builds stay locked until the report is written: no other run rebuilds them meanwhile
    with ExitStack() as builds_in_use:
        # the guard's before anything of the pull request runs, which then cannot make it its own
        check_out_dir(out_dir)
        plan = plan_run(repo, base, head, config, config_dir, overrides or ConfigOverrides(), progress)
        builds_in_use.enter_context(plan.box.held())
        built = build_arms(repo, plan, cache_dir or default_cache_dir(repo), progress, builds_in_use)
        first = measure_first_round(repo, plan.config, plan.base, built, out_dir / "runs", progress, harness)
        measure = round_measure(built.targets, first.spec, out_dir / "runs", plan.config.measure.timeout_s,
                                first.reference, progress, harness)
        outcome = decide_in_rounds(first.measurements, (plan.base.name, plan.head.name), first.spec,
                                   plan.config.measure.repeats, plan.config.measure.confirm_budget_s,
                                   decider(plan, built.arms, first), measure, progress,
                                   most_looks=plan.config.measure.looks)
        report = assemble_report(repo, plan, built, first, outcome, plan.box.left, progress, out_dir,
                                 github_repo=github_repo, server_url=server_url, started=started)
        write_report(report, out_dir)
        return report


def record_commit(
    repo: Path,
    commit: str,
    config: GuardConfig | None,
    out_dir: Path,
    cache_dir: Path | None = None,
    progress: Progress = lambda _: None,
    harness: Harness = run_ranks,
) -> Record:
    """`guard record`: one commit built and measured as a pull request's run measures each arm
    (its reference process, compile fill and `measure.repeats` processes), with no comparison;
    record.json and its exports written. `config` None: guard.toml as the commit itself holds it."""
    started = time.time()
    repo, out_dir = repo.resolve(), out_dir.resolve()
    with ExitStack() as build_in_use:
        check_out_dir(out_dir)
        ref, config, box = plan_record(repo, commit, config, progress)
        build_in_use.enter_context(box.held())
        built = build_refs(repo, [ref], config, box, cache_dir or default_cache_dir(repo), build_in_use, progress)
        built = _share_compile_caches(config, built, build_in_use, progress)
        first = measure_first_round(repo, config, ref, built, out_dir / "runs", progress, harness)
        (info,) = built.arms
        measured = first.measurements[ref.name]
        info.repeats = len(measured.repeats)
        info.swept, info.temp_removed = box.left.processes[ref.name], box.left.temp_entries[ref.name]
        if measured.error and info.status == "ok":
            info.status, info.error, info.log_tail = "run_failed", measured.error, measured.log_tail
        spec = first.spec
        record = Record(
            tool_version=guard.__version__,
            arm=info,
            workload=WorkloadInfo(
                **spec.model_dump(exclude={"reference"}), repeats=config.measure.repeats,
                described=_described(first.measurements, ref.name),
                reference=first.reference.tokens.source if first.reference.tokens else None,
                reference_error=first.reference.error,
            ),
            environment=_environment(first.measurements, [ref.name]),
            gpu_fingerprint=check_measurements(first.measurements).summary,
            batch_sizes=[RecordedBatch(batch_size=size, stats=arm_stats(ref.name, measured.repeats, size))
                         for size in spec.batch_sizes if info.status == "ok"],
            started_at=datetime.fromtimestamp(started, timezone.utc).isoformat(timespec="seconds"),
            duration_s=round(time.time() - started, 1),
        )
        write_record(record, out_dir)
        return record


def plan_record(repo: Path, commit: str, given: GuardConfig | None, progress: Progress
                ) -> tuple[ArmRef, GuardConfig, Box]:
    """The commit and its config, checked as a run checks its base's before anything is built."""
    require_repo(repo)
    ref = ArmRef(name=RECORDED_ARM, ref=commit, sha=resolve_commit(repo, commit))
    progress(f"recording {commit} = {ref.sha[:12]}")
    if given is None:
        held = CommitFiles(repo=repo, sha=ref.sha).read(DEFAULT_CONFIG_NAME, "config", MAX_CONFIG_BYTES)
        progress(f"config: {DEFAULT_CONFIG_NAME} of the commit {ref.sha[:12]}"
                 + ("" if held is not None else " (it has none: the defaults)"))
    config = given if given is not None else load_commit_config(repo, ref.sha)
    if given is None and config_uncommitted(repo, ref.sha):
        progress(f"warning: the work tree's {DEFAULT_CONFIG_NAME} is not committed, and is not used: the config is "
                 f"the commit's ({ref.sha[:12]}); commit it, or pass it with --config")
    where = f"{DEFAULT_CONFIG_NAME} of the commit" if given is None else "the config given"
    _, box = check_before_build(repo, config, ref, where, progress)
    return ref, config, box


@dataclass
class Plan:
    """What a run compares and by which rule, before anything is built."""

    base: ArmRef
    head: ArmRef
    config: GuardConfig
    files: Files  # where the files the config names are read from
    change: ConfigChange | None  # the head's changes to the config, not used
    overrides: ConfigOverrides
    rule: Rule  # its looks the most the run may take: a run plans its own (`decide_in_rounds`)
    security: list[RunWarning]  # warnings about the checkout itself
    box: Box  # what holds the pull request's processes on this host (its `isolation`: the report's fact)


def plan_run(
    repo: Path, base: str | None, head: str, given: GuardConfig | None, config_dir: Path | None,
    overrides: ConfigOverrides, progress: Progress,
) -> Plan:
    """The arms and the config, checked before anything of theirs runs; the progress says where each came from."""
    base_ref, head_ref, config, files, change = arms_and_config(repo, base, head, given, config_dir)
    progress(f"base {base_ref.ref} = {base_ref.sha[:12]}, head {head_ref.ref} = {head_ref.sha[:12]}")
    if given is None:
        held = CommitFiles(repo=repo, sha=base_ref.sha).read(DEFAULT_CONFIG_NAME, "config", MAX_CONFIG_BYTES)
        progress(f"config: {DEFAULT_CONFIG_NAME} of the base commit {base_ref.sha[:12]}"
                 + ("" if held is not None else " (it has none: the defaults)"))
    if dirty := uncommitted_changes(repo):
        progress(f"warning: {len(dirty)} file(s) in the working tree have uncommitted changes ({dirty[0]}"
                 f"{', ...' if len(dirty) > 1 else ''}); they are not measured: the guard builds the commits")
    if given is None and config_uncommitted(repo, head_ref.sha):
        progress(f"warning: the work tree's {DEFAULT_CONFIG_NAME} is not committed, and is not used: the config is "
                 f"the base commit's ({base_ref.sha[:12]}); commit it to the base branch, or pass it with --config")
    if change is not None:
        progress(f"config: from the base commit; the head's changes to {', '.join(change.paths)} are not used")
    if overrides.given():
        config = apply_overrides(config, overrides)
        given_text = ", ".join(f"{name} {value}" for name, value in overrides.given().items())
        progress(f"config: overridden on the command line: {given_text}")
    rule = _rule(config, files)
    require_distinct(base_ref, head_ref)  # after the config: its errors are the ones to fix first
    where = f"{DEFAULT_CONFIG_NAME} of the base commit" if given is None else "the config given"
    security, box = check_before_build(repo, config, base_ref, where, progress)
    return Plan(base_ref, head_ref, config, files, change, overrides, rule, security, box)


def check_before_build(
    repo: Path, config: GuardConfig, config_ref: ArmRef, where: str, progress: Progress
) -> tuple[list[RunWarning], Box]:
    """What must hold before anything of the commits is built: the CPUs, the interpreter, the
    workload's entry in the tree of the commit whose config names it (`where` says which), the
    checkout's credentials and the kernel's box. Returns the security warnings and the box."""
    check_cpus(config.measure.cpus)
    check_interpreter_reach(config.build, [HARNESS_SCRIPT])
    # the entry against that commit's tree, before anything is built: a misspelt one is said now
    check_entry_in_commit(config.workload.entry, CommitFiles(repo=repo, sha=config_ref.sha), where)
    security: list[RunWarning] = []
    if exposed := persisted_credentials(repo):
        security.append(CredentialKept(keys=exposed))
        progress("warning: " + warning_text(security[0]))
    box = choose_box(config.build.isolation, container=config.build.method == "docker")
    if not box.isolation.boxed() and box.isolation.as_root and config.build.isolation == "kernel":
        raise ConfigError(
            f"this host cannot box the pull request's processes ({'; '.join(box.missing)}), and run as root the guard "
            "does not run them unboxed: run it as root where cgroup v2 can be mounted and util-linux's unshare "
            "makes PID, IPC and mount namespaces, use build.method = \"docker\", or set build.isolation = \"none\" "
            "in the base's guard.toml to run them so, which the report and the comment then say"
        )
    for reason in box.missing:
        progress(f"warning: the pull request's processes run without the kernel's box: {reason}")
    if config.build.isolation == "none":
        progress('warning: the pull request\'s processes run without a cgroup or namespaces (build.isolation = "none")')
    return security, box


@dataclass
class Built:
    """The arms as built: each one's facts, where the healthy ones run, and what failed already."""

    arms: list[ArmInfo]
    targets: list[ArmTarget]
    failed: dict[str, ArmMeasurement] = field(default_factory=dict)  # an arm that did not build, by name


def build_arms(repo: Path, plan: Plan, cache_dir: Path, progress: Progress, builds_in_use: ExitStack) -> Built:
    """Base and head built (a failed build keeps the other arm), then the ablation arms on their builds."""
    built = build_refs(repo, [plan.base, plan.head], plan.config, plan.box, cache_dir, builds_in_use, progress)
    _add_ablation_arms(plan.config, built)
    return _share_compile_caches(plan.config, built, builds_in_use, progress)


def build_refs(
    repo: Path, refs: list[ArmRef], config: GuardConfig, box: Box, cache_dir: Path, builds_in_use: ExitStack,
    progress: Progress,
) -> Built:
    """Each commit built as an arm; a failed build is kept as that arm's measurement and keeps the others."""
    built = Built(arms=[], targets=[])
    for ref in refs:
        info, arm = _build(repo, ref, config, box, cache_dir, progress, builds_in_use)
        built.arms.append(info)
        if arm is not None:
            check_entry(config.workload.entry, arm.worktree)
            built.targets.append(ArmTarget(
                name=arm.name, python=arm.python, worktree=arm.worktree, box=box, env=arm.env,
                pass_env=config.build.pass_env, user=config.build.user, cpus=config.measure.cpus,
                container=arm.container))
        else:
            built.failed[ref.name] = ArmMeasurement(arm=ref.name, error=info.error, log_tail=info.log_tail)
    return built


def _share_compile_caches(config: GuardConfig, built: Built, builds_in_use: ExitStack, progress: Progress) -> Built:
    if config.measure.compile_cache:  # every round of this run, the reference process's too (base's)
        built.targets = share_compile_caches(built.targets, builds_in_use)
        if shared := [t.compile_cache for t in built.targets if t.compile_cache is not None]:
            progress(f"compile caches: a folder per arm under {shared[0].parent}, shared by that arm's processes")
    return built


@dataclass
class FirstRound:
    """What the first round measured, and the spec and reference every later round reuses."""

    spec: HarnessSpec
    reference: ReferenceOutcome
    filled: list[str]  # the arms whose compile caches an unmeasured process filled
    measurements: dict[str, ArmMeasurement]  # every arm's, a failed build's error included


def measure_first_round(
    repo: Path, config: GuardConfig, first_arm: ArmRef, built: Built, runs: Path, progress: Progress, harness: Harness
) -> FirstRound:
    """The reference process (`first_arm`'s: base's in a comparison), the compile fill, then every
    arm `repeats` times, interleaved."""
    spec = HarnessSpec.of(config.workload)
    first_target = next((t for t in built.targets if t.name == first_arm.name), None)
    reference = ReferenceOutcome()
    if first_target is not None:
        spec, reference = prepare_reference(
            first_target, spec, runs, config.measure.timeout_s, config.workload.reference_file,
            f"{first_arm.name} {first_arm.sha[:8]}", progress, files=CommitFiles(repo=repo, sha=first_arm.sha),
            harness=harness,
        )
    reference_ran = first_target is not None and not config.workload.reference_file
    filled = fill_compile_caches(built.targets, first_arm.name, reference_ran, spec, reference, runs,
                                 config.measure.timeout_s, progress, harness=harness)
    measurements = dict(built.failed)
    if built.targets:
        progress(
            f"measuring {len(built.targets)} arm(s) x {config.measure.repeats} repeats, interleaved; "
            f"batch sizes {spec.batch_sizes}, {spec.warmup_steps} warmup + {spec.steps} timed steps"
        )
        measurements |= run_interleaved(built.targets, spec, config.measure.repeats, runs, config.measure.timeout_s,
                                        progress, reference=reference.tokens if spec.reference else None,
                                        harness=harness)
    return FirstRound(spec, reference, filled, measurements)


def round_measure(
    targets: list[ArmTarget], spec: HarnessSpec, runs: Path, timeout_s: float,
    reference: ReferenceOutcome, progress: Progress, harness: Harness,
) -> MeasureRound:
    """A later round's measure step: `processes` more of each named arm, interleaved."""
    by_name = {t.name: t for t in targets}

    def measure(arms: list[str], round_spec: HarnessSpec, first_repeat: int, processes: int
                ) -> dict[str, ArmMeasurement]:
        return run_interleaved([by_name[name] for name in arms], round_spec, processes, runs, timeout_s, progress,
                               first_repeat=first_repeat,
                               reference=reference.tokens if round_spec.reference else None, harness=harness)

    return measure


def decider(plan: Plan, arms: list[ArmInfo], first: FirstRound) -> Decide:
    """The run's rule, applied to whatever has been measured so far."""
    spec, tokens = first.spec, first.reference.tokens

    def decide(measurements: dict[str, ArmMeasurement], look: dict[int, int], mix_look: int, looks: int
               ) -> Comparison:
        return compare(
            {a.name: measurements[a.name] for a in arms}, plan.base.name, plan.head.name, spec.batch_sizes,
            plan.rule.model_copy(update={"looks": looks}), reference=tokens.source if tokens else None, look=look,
            mix_schedule=spec.mix_schedule(), mix_look=mix_look,
        )

    return decide


def assemble_report(
    repo: Path, plan: Plan, built: Built, first: FirstRound, outcome: RoundsOutcome, left: Leftovers,
    progress: Progress, out_dir: Path, *, github_repo: str | None = None, server_url: str = "https://github.com",
    started: float | None = None,
) -> Report:
    """The report of a decided run: each arm's facts, slow processes, the traces analysed, the
    changes to capture, the mix, and the explanation, as typed fields (words come at render time)."""
    config, spec, measurements, comparison = plan.config, first.spec, outcome.measurements, outcome.comparison
    base, head = plan.base.name, plan.head.name
    schedule = spec.mix_schedule()
    slow = slow_processes(measurements.values(), spec.batch_sizes, schedule)
    gpu_timed = any(a.timer == "cuda_event" for b in comparison.batch_sizes for a in b.arms)
    decided = comparison.batch_sizes + ([comparison.mix_comparison] if comparison.mix_comparison else [])
    progress(slow_processes_sentence(slow, gpu=gpu_timed, set_aside=sum(len(b.set_aside) for b in decided)))
    arms = built.arms
    for info in arms:
        m = measurements[info.name]
        info.repeats = len(m.repeats)
        info.swept, info.temp_removed = left.processes[info.name], left.temp_entries[info.name]
        if m.error and info.status == "ok":
            info.status, info.error, info.log_tail = "run_failed", m.error, m.log_tail

    traces = _trace_paths(measurements)
    if traces:
        progress(f"analysing {sum(len(v) for by in traces.values() for v in by.values())} profiler traces")
    sections = trace_sections(traces, base, head, spec.batch_sizes, spec.profile_steps, out_dir)
    mix_traces = mix_trace_section(_mix_trace_paths(measurements), base, head, spec.profile_steps, out_dir)
    rank_traces = rank_trace_sections(rank_trace_paths(measurements), base, head, spec.batch_sizes,
                                      _profiled_steps(measurements), out_dir)
    capture = _capture_changes(repo, plan.base.sha, plan.head.sha, config.capture.globs, progress)
    mix = mix_report(schedule, spec.batch_mix_file or "batch_mix", spec.batch_mix_seed, spec.steps,
                     measurements, [a.name for a in arms])
    explanation = explain_run(comparison, base, head, plan.rule, arms, traces=sections, capture=capture, mix=mix,
                              mix_traces=mix_traces, rank_traces=rank_traces)
    budget, looks, reference = outcome.budget, config.measure.looks, first.reference
    started = time.time() if started is None else started
    return Report(
        # the comparison's own fields (a report is a comparison), the security notes among its warnings
        **{**dict(comparison), "warnings": plan.security + comparison.warnings},
        tool_version=guard.__version__,
        base=base,
        head=head,
        arms=arms,
        rounds=outcome.rounds,
        rounds_stopped=outcome.stopped,
        confirm_s=round(budget.confirm_s, 1) if outcome.rounds > 1 else None,
        confirm_budget_s=budget.budget_s if looks > 1 else None,
        slow_processes=slow,
        compile_caches=True if config.measure.compile_cache else None,
        compile_filled=first.filled,
        workload=WorkloadInfo(
            **spec.model_dump(exclude={"reference"}), repeats=config.measure.repeats,
            described=_described(measurements, head),
            reference=reference.tokens.source if reference.tokens else None,
            reference_error=reference.error,
        ),
        environment=_environment(measurements, [base, head]),
        traces=sections,
        changed_files=capture.changed_files if capture else [],  # from the one diff capture detection reads
        config_change=plan.change,
        overrides=plan.overrides if plan.overrides.given() else None,
        isolation=plan.box.isolation,
        capture=capture,
        mix=mix,
        mix_traces=mix_traces,
        rank_traces=rank_traces,
        record=run_record(measurements, [base, head], mix),
        github_repo=github_repo,
        server_url=server_url,
        repo=str(repo),
        started_at=datetime.fromtimestamp(started, timezone.utc).isoformat(timespec="seconds"),
        duration_s=round(time.time() - started, 1),
        explanation=explanation,
    )


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


def _rule(config: GuardConfig, files: Files) -> Rule:
    """The rule the config states, at the thresholds of the file it names (read from `files`)
    where it names one (`Rule.of_config`)."""
    named = config.measure.thresholds_file
    return Rule.of_config(config.measure, read_thresholds(files, named) if named is not None else None)


def _add_ablation_arms(config: GuardConfig, built: Built) -> None:
    """Each [[arms]] entry reuses the build of base or head and runs with its env overrides."""
    by_name = {t.name: t for t in built.targets}
    infos = {a.name: a for a in built.arms}
    for extra in config.arms:
        source = infos[extra.source]
        info = source.model_copy(
            update={"name": extra.name, "label": extra.label or extra.name, "source": extra.source, "env": extra.env}
        )
        built.arms.append(info)
        if extra.source in by_name:
            target = by_name[extra.source]
            built.targets.append(target.model_copy(update={"name": extra.name, "env": target.env | extra.env}))
        else:
            built.failed[extra.name] = ArmMeasurement(
                arm=extra.name, error=f"its source arm '{extra.source}' did not build", log_tail=""
            )


def _build(
    repo: Path, ref: ArmRef, config: GuardConfig, box: Box, cache_dir: Path, progress: Progress,
    builds_in_use: ExitStack,
) -> tuple[ArmInfo, BuiltArm | None]:
    info = ArmInfo(
        name=ref.name, ref=ref.ref, sha=ref.sha, subject=commit_subject(repo, ref.sha),
        build_method=config.build.method,
    )
    try:
        arm = build_arm(repo, ref, config.build, cache_dir, progress, hold=builds_in_use, box=box)
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
