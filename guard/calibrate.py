"""`guard calibrate`: A/A runs of one commit against itself, to learn this runner's noise
and suggest thresholds a regression must pass."""

from __future__ import annotations

import math
from contextlib import ExitStack
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from guard._errors import GuardError, HarnessError, TraceError
from guard._output import write_atomic
from guard.checkout import ArmRef, build_arm, check_interpreter_reach, default_cache_dir, require_repo, resolve_commit
from guard.compare import BatchComparison, DisagreementNoise, MetricKey, bounds_level, compare, disagreement_noise
from guard.config import (
    REFUSED_GPU_MS_PCT, STEADY_RUNNER, CalibratedSpread, CommitFiles, GuardConfig, MeasureConfig, Rule, Thresholds,
    check_entry, felt_cap_pct, load_commit_config, threshold_refusal, write_thresholds,
)
from guard.harness import HARNESS_SCRIPT
from guard.measure import (
    BORROW_CHECK_ALPHA, MOST_REPEATS, PASS_RATE, RATE_CONFIDENCE, SPREAD_LIMIT_CONFIDENCE, ArmMeasurement,
    ArmTarget, Harness, HarnessSpec, ReferenceOutcome, RunnerNoise, SlowMetric, SlowProcesses, check_cpus,
    fill_compile_caches, prepare_reference, run_interleaved, run_ranks, runner_noise, share_compile_caches,
    slow_processes,
)
from guard.pipeline import Progress
from guard.report import share, slow_processes_sentence
from guard.report._reason_text import reason_short
from guard.sandbox import choose_box
from guard.trace import analyze, read_trace

# A suggested threshold is the smallest this runner supports (measure/_noise.py), over the
# batch sizes, rounded up to SUGGESTION_STEP_PCT; and never under the floor.
SUGGESTION_STEP_PCT = 0.1
FLOOR_PCT = 0.25
# Profiled processes per side for the gap figures at the least (more where workload.profile_repeats
# says so): enough for a range, without profiling every one of the A/A's processes.
PROFILED_PER_SIDE = 3


class RunnerTooNoisy(GuardError):
    """The A/A's noise asks for a threshold the config would refuse: nothing is written."""


class GapNoise(BaseModel):
    """The gaps between kernels over the profiled processes of both sides: how far the trace's
    figures move when nothing changed (a PR's trace diff is read against this)."""

    traces: int
    unreadable: list[str] = []  # traces that could not be read, with why: skipped, not fatal
    median_gap_us: list[float]
    idle_ms_per_step: list[float]
    largest_1pct_gaps_ms_per_step: list[float]


class NoiseFloor(BaseModel):
    batch_size: int
    gpu_ms_per_step: float
    gpu_ms_spread_pct: float  # (max - min) / median over all repeats of both arms
    tok_per_s_spread_pct: float
    gpu_ms_aa_ci_pct: tuple[float, float]  # the A/A change's interval; ideally around 0
    tok_per_s_aa_ci_pct: tuple[float, float]
    gpu_ms: RunnerNoise  # the spread without the slow processes, and what it supports
    tok_per_s: RunnerNoise
    end_to_end_ms: RunnerNoise | None = None  # None: no end-to-end figure (a CPU's step time is already one)
    # host instructions per step, every process kept; None: a process had no counter. Their
    # threshold stays the config's (what a user feels, not this spread): no file key is written
    instructions: RunnerNoise | None = None
    gaps: GapNoise | None = None  # None: no profiled pass (no GPU, or workload.profile_steps = 0)
    disagreement: DisagreementNoise | None = None  # None: the workload ran free (its step() takes no ids)


class Calibration(BaseModel):
    sha: str
    repeats: int
    noise: list[NoiseFloor]
    slow: SlowProcesses
    # the chance that a run of 2 x `repeats` processes holds a slow one, at the A/A's rate
    slow_in_a_run: float
    # the smallest threshold each metric supports at `repeats`, the widest over the batch sizes
    gpu_ms_supported_pct: float
    tok_per_s_supported_pct: float
    end_to_end_supported_pct: float | None = None  # None: no end-to-end figure was measured
    suggested: Thresholds
    # the two-sided level of the rule's bounds the suggestions hold at (None: made at the shown 95%)
    bounds_level: float | None = None
    # the sides whose compile cache one unmeasured process filled before the measured ones
    # (side a's is filled by the reference process when one ran); empty without shared caches
    compile_filled: list[str] = []


def rule_level(config: GuardConfig, batch_sizes: int) -> float:
    """The level of the bounds `guard run` decides its first look by under `config`: its alpha
    spent over the most rounds it may take, split over the families and `batch_sizes` (the mix
    counted as one). A run that plans fewer looks decides its first at a lower level."""
    return Rule.of_config(config.measure).model_copy(update={"decided_sizes": batch_sizes}).bounds_confidence


def _level_of(batch: BatchComparison, metric: MetricKey, level: float) -> float:
    """The level `metric`'s bounds are decided at in a run under this config (rule 5: its own
    share of its family's alpha at the first look, as the A/A's own comparison split it), or
    `level` where the comparison kept none of its own (rule 4 and before)."""
    alpha = batch.alpha_per_bound.get(metric)
    return bounds_level(alpha) if alpha is not None else level


def calibrate(
    repo: Path, ref: str, config: GuardConfig | None, out: Path, progress: Progress = lambda _: None,
    cache_dir: Path | None = None, thresholds_pct: list[float] | None = None, harness: Harness = run_ranks,
) -> Calibration:
    """`config` None: guard.toml (and its reference_file) as the commit `ref` holds it.
    `thresholds_pct`: thresholds, besides measure.threshold_pct, to estimate the repeats of.
    Raises RunnerTooNoisy, writing nothing, when a suggestion would be refused. `harness` runs
    each process (pipeline.run_guard's)."""
    repo = repo.resolve()
    require_repo(repo)
    arm_ref = ArmRef(name="aa", ref=ref, sha=resolve_commit(repo, ref))
    if config is None:
        config = load_commit_config(repo, arm_ref.sha)
    check_cpus(config.measure.cpus)
    check_interpreter_reach(config.build, [HARNESS_SCRIPT])
    spec, reference, measurements, filled = _run_aa(repo, arm_ref, config, out, progress, cache_dir, harness)
    # the A/A's changes at the confidence shown, by the config's own thresholds (the file is what it writes)
    comparison = compare(measurements, "a", "b", spec.batch_sizes, Rule.of_config(config.measure),
                         reference=reference.tokens.source if reference.tokens else None)
    slow = slow_processes(measurements.values(), spec.batch_sizes)
    asked = [config.measure.threshold_pct, *(thresholds_pct or [])]
    level = rule_level(config, len(spec.batch_sizes) + (spec.mix_schedule() is not None))
    noise = [_noise_floor(batch, measurements, slow, config, level, asked) for batch in comparison.batch_sizes]
    gpu_pct = max(n.gpu_ms.supported_pct for n in noise)
    tok_pct = max(n.tok_per_s.supported_pct for n in noise)
    ends = [n.end_to_end_ms.supported_pct for n in noise if n.end_to_end_ms is not None]
    end_pct = max(ends) if ends and len(ends) == len(noise) else None
    lines = [f"Written by `guard calibrate` for {arm_ref.sha[:12]}: A/A, {config.measure.repeats} repeats per side.",
             *(line for n in noise for line in noise_lines(n))]
    run_processes = 2 * config.measure.repeats
    in_a_run = 1 - (1 - slow.count / slow.processes) ** run_processes if slow.processes else 0.0
    lines.append(slow_line(slow, in_a_run, run_processes))
    refusal = too_noisy_message(_suggest(gpu_pct), noise, config.measure.repeats)
    if refusal:
        for line in lines[1:]:
            progress(line)
        raise RunnerTooNoisy(refusal)
    suggested = Thresholds(gpu_ms_pct=_suggest(gpu_pct), tok_per_s_pct=_gating_suggestion("tok_per_s", tok_pct),
                           end_to_end_ms_pct=_gating_suggestion("end_to_end_ms", end_pct),
                           spreads=calibrated_spreads(noise))
    result = Calibration(
        sha=arm_ref.sha, repeats=config.measure.repeats, bounds_level=level, noise=noise, slow=slow,
        slow_in_a_run=in_a_run,
        gpu_ms_supported_pct=gpu_pct, tok_per_s_supported_pct=tok_pct, end_to_end_supported_pct=end_pct,
        suggested=suggested, compile_filled=filled,
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    write_thresholds(out, suggested, "\n".join(lines + _thresholds_lines(result, config.measure)))
    write_atomic(calibration_path(out), result.model_dump_json(indent=2) + "\n")
    return result


def _run_aa(
    repo: Path, arm_ref: ArmRef, config: GuardConfig, out: Path, progress: Progress, cache_dir: Path | None,
    harness: Harness,
) -> tuple[HarnessSpec, ReferenceOutcome, dict[str, ArmMeasurement], list[str]]:
    """Build `arm_ref` once and run it as sides a and b, interleaved: the spec run, the reference's
    outcome, each side's measurement and the sides whose compile cache was filled first. Raises
    HarnessError where a process failed."""
    box = choose_box(config.build.isolation, container=config.build.method == "docker")
    # the build stays locked until the A/A runs are done: no other run rebuilds it meanwhile
    with ExitStack() as build_in_use:
        build_in_use.enter_context(box.held())
        built = build_arm(repo, arm_ref, config.build, cache_dir or default_cache_dir(repo), progress,
                          hold=build_in_use, box=box)
        check_entry(config.workload.entry, built.worktree)
        targets = [
            ArmTarget(name=name, python=built.python, worktree=built.worktree, box=box, env=built.env,
                      pass_env=config.build.pass_env, user=config.build.user, cpus=config.measure.cpus,
                      container=built.container)
            for name in "ab"
        ]
        if config.measure.compile_cache:
            targets = share_compile_caches(targets, build_in_use)
        spec = HarnessSpec.of(config.workload).model_copy(
            update={"profile_repeats": max(config.workload.profile_repeats, PROFILED_PER_SIDE)})
        runs = out.parent / f"{out.stem}-runs"
        spec, reference = prepare_reference(targets[0], spec, runs, config.measure.timeout_s,
                                            config.workload.reference_file, f"A/A {arm_ref.sha[:8]}", progress,
                                            files=CommitFiles(repo=repo, sha=arm_ref.sha), harness=harness)
        filled = fill_compile_caches(targets, "a", not config.workload.reference_file, spec, reference, runs,
                                     config.measure.timeout_s, progress, harness=harness)
        progress(f"A/A: {arm_ref.ref} ({arm_ref.sha[:12]}) against itself, {config.measure.repeats} repeats per side")
        measurements = run_interleaved(
            targets, spec, config.measure.repeats, runs, config.measure.timeout_s, progress,
            reference=reference.tokens if spec.reference else None, harness=harness,
        )
    failed = [m.error for m in measurements.values() if m.error]
    if failed:
        raise HarnessError("aa", failed[0])
    return spec, reference, measurements, filled


def _noise_floor(batch: BatchComparison, measurements: dict[str, ArmMeasurement], slow: SlowProcesses,
                 config: GuardConfig, level: float, asked: list[float]) -> NoiseFloor:
    """What the A/A saw at one batch size: its spreads, its changes' intervals, and per metric what
    the runner supports at `level` and measure.repeats, the slow processes left out where they may be."""
    if batch.gpu_ms_change is None or batch.tok_per_s_change is None:
        why = "; ".join(reason_short(r) for r in batch.reasons) or "no change to compare"
        raise HarnessError("aa", f"batch size {batch.batch_size}: {why}")
    gpu = [v for a in batch.arms for v in a.gpu_ms_per_step.values]
    tok = [v for a in batch.arms for v in a.tok_per_s.values]
    repeats = config.measure.repeats
    return NoiseFloor(
        batch_size=batch.batch_size,
        gpu_ms_per_step=sorted(gpu)[len(gpu) // 2],
        gpu_ms_spread_pct=(max(gpu) - min(gpu)) / sorted(gpu)[len(gpu) // 2] * 100,
        tok_per_s_spread_pct=(max(tok) - min(tok)) / sorted(tok)[len(tok) // 2] * 100,
        gpu_ms_aa_ci_pct=(batch.gpu_ms_change.ci_low_pct, batch.gpu_ms_change.ci_high_pct),
        tok_per_s_aa_ci_pct=(batch.tok_per_s_change.ci_low_pct, batch.tok_per_s_change.ci_high_pct),
        gpu_ms=runner_noise(_kept(measurements, slow, "gpu_ms", batch.batch_size), repeats, level, asked,
                            borrowed=True),
        # what the user feels at its own level: rule 5 splits the host family's share over its metrics
        tok_per_s=runner_noise(_kept(measurements, slow, "tok_per_s", batch.batch_size), repeats,
                               _level_of(batch, "tok_per_s", level), asked, borrowed=True),
        end_to_end_ms=_end_to_end_noise(measurements, batch.batch_size, repeats,
                                        _level_of(batch, "end_to_end_ms", level), asked),
        instructions=_instructions_noise(measurements, batch.batch_size, repeats, level,
                                         config.measure.instructions_threshold_pct),
        gaps=gap_noise([Path(run.trace) for m in measurements.values() for r in m.repeats
                        for run in r.runs if run.batch_size == batch.batch_size and run.trace]),
        disagreement=disagreement_noise(batch.agreement),
    )


def _thresholds_lines(result: Calibration, measure: MeasureConfig) -> list[str]:
    """The file's closing lines: how the suggested thresholds were made and the rule's level they
    hold at, then each felt metric written none or held above measure.threshold_pct."""
    gpu_pct, tok_pct, end_pct = (result.gpu_ms_supported_pct, result.tok_per_s_supported_pct,
                                 result.end_to_end_supported_pct)
    lines = [
        f"Thresholds: the smallest each metric supports at {result.repeats} repeats per arm (the upper "
        f"{SPREAD_LIMIT_CONFIDENCE:.0%} limit of its spread, the widest batch size), rounded up to "
        f"{SUGGESTION_STEP_PCT:g}% and at least {FLOOR_PCT}%: GPU ms per step {_shown(gpu_pct, '.3f')}, "
        f"tok/s {_shown(tok_pct, '.3f')}"
        + (f", end-to-end ms per step {_shown(end_pct, '.3f')}" if end_pct is not None else "") + ". "
        f"At that limit an unchanged commit passes them {PASS_RATE:.0%} of the time in the first round (more at the "
        f"spread measured), each bound at the rule's own level ({result.bounds_level:.4%} two-sided: alpha "
        f"{measure.alpha:g} split over {measure.looks} round(s), the metrics and the batch sizes), "
        "when no slow process lands in its run. The spreads are kept below the thresholds: a run pools each with "
        "its own processes' where its own is not past it (an F test at "
        f"{BORROW_CHECK_ALPHA:.0%}), and decides on its own alone where it is."
    ]
    felt = (("tok/s", "tok_per_s", tok_pct, result.suggested.tok_per_s_pct),
            ("end-to-end ms per step", "end_to_end_ms", end_pct, result.suggested.end_to_end_ms_pct))
    for name, metric, pct, written in felt:
        if pct is not None and written is None:
            lines.append(
                f"{name} cannot tell a change here ({_refused(_suggest(pct))}, past "
                f"{felt_cap_pct(metric):,.4g}%): no threshold is written for it, so a run holds it to "
                "measure.threshold_pct and leaves it undecided; "
                f"{STEADY_RUNNER}."
            )
        elif written is not None and written > measure.threshold_pct:
            lines.append(f"{name} resolves {written:g}% here, not measure.threshold_pct's "
                         f"{measure.threshold_pct:g}%: a run holds it to {written:g}%.")
    return lines


def suggested_text(suggested: Thresholds) -> str:
    """The suggested thresholds as the progress output names them; a metric written none is held
    to measure.threshold_pct by a run (`Rule.of_config`)."""
    tok = ("none (held to measure.threshold_pct)" if suggested.tok_per_s_pct is None
           else f"{suggested.tok_per_s_pct:g}%")
    end = ("none written (held to measure.threshold_pct)" if suggested.end_to_end_ms_pct is None
           else f"{suggested.end_to_end_ms_pct:g}%")
    return f"GPU ms per step {suggested.gpu_ms_pct:g}%, tok/s {tok}, end-to-end ms per step {end}"


def calibrated_spreads(noise: list[NoiseFloor]) -> list[CalibratedSpread]:
    """Each metric's spread at each batch size, for a run to borrow (compare/_borrow.py); a
    spread of 0 (no noise at all) is not one to pool with."""
    found = []
    for n in noise:
        for metric, figures in (("gpu_ms", n.gpu_ms), ("tok_per_s", n.tok_per_s), ("end_to_end_ms", n.end_to_end_ms)):
            if figures is not None and figures.sd_pct > 0:
                found.append(CalibratedSpread(batch_size=n.batch_size, metric=metric, sd_pct=figures.sd_pct,
                                              degrees_of_freedom=figures.degrees_of_freedom))
    return found


def calibration_path(out: Path) -> Path:
    """Where the A/A's figures are written as JSON, beside the thresholds file `out`."""
    return out.parent / f"{out.stem}-calibration.json"


def _kept(
    measurements: dict[str, ArmMeasurement], slow: SlowProcesses, metric: SlowMetric, batch_size: int
) -> list[list[float]]:
    """Each side's figures of `metric` at `batch_size`, in run order, its slow processes left out."""
    set_aside = {(s.arm, s.repeat) for s in slow.of(metric, batch_size)}
    sides = []
    for side in "ab":
        runs = [r.run_for(batch_size) for r in measurements[side].repeats]
        sides.append([run.gpu_ms_per_step if metric == "gpu_ms" else run.tok_per_s
                      for position, run in enumerate(runs, start=1) if (side, position) not in set_aside])
    return sides


def _end_to_end_noise(measurements: dict[str, ArmMeasurement], batch_size: int, repeats: int, confidence: float,
                      asked: list[float]) -> RunnerNoise | None:
    """The spread of each side's end-to-end ms per step (GPU only), every process kept: a slow
    process is one of the host's states this figure is meant to see."""
    sides = [[r.run_for(batch_size).end_to_end_gpu_ms_per_step for r in measurements[side].repeats] for side in "ab"]
    if any(v is None for side in sides for v in side):
        return None
    return runner_noise(sides, repeats, confidence, asked, borrowed=True)  # type: ignore[arg-type]


def _instructions_noise(measurements: dict[str, ArmMeasurement], batch_size: int, repeats: int, confidence: float,
                        threshold_pct: float) -> RunnerNoise | None:
    """The spread of each side's host instructions per step, every process kept (a neighbour
    slows a process, it does not change what it executes); None where a process had no counter."""
    sides = [[run.host.instructions_per_step if run.host else None
              for run in (r.run_for(batch_size) for r in measurements[side].repeats)] for side in "ab"]
    if any(not v for side in sides for v in side):
        return None
    return runner_noise(sides, repeats, confidence, [threshold_pct])  # type: ignore[arg-type]


# Past this a figure of the file says no more than its order: at few repeats and the rule's level
# a threshold or a bound runs to millions of percent, or to the cap (measure.pct_of_log's)
SHOWN_UP_TO_PCT = 1000


def too_noisy_message(gpu_ms_pct: float, noise: list[NoiseFloor], repeats: int) -> str | None:
    """One message where the gating metric's suggestion is one the config would refuse, with what to
    do; None when it guards. tok/s too noisy is no refusal: it then informs (`calibrate`)."""
    if not threshold_refusal("gpu_ms", gpu_ms_pct):
        return None
    refused = [f"{_refused(gpu_ms_pct)} in GPU ms per step (refused at {REFUSED_GPU_MS_PCT:g}% or more: "
               "a decode a quarter slower would pass)"]
    # the repeats measure.threshold_pct (the first threshold asked about) would take, the most over batch sizes
    needed = [n.gpu_ms.needed[0] for n in noise]
    most = None if any(r.repeats is None for r in needed) else max(r.repeats or 0 for r in needed)
    repeats_text = f"more than {MOST_REPEATS}" if most is None else f"about {most}"
    return (
        f"this runner is too noisy to guard decode: at {repeats} repeats per side an unchanged commit would need a "
        f"threshold of {' and '.join(refused)}; no thresholds file was written. To steady it: {STEADY_RUNNER} "
        f"(at this noise measure.threshold_pct, {needed[0].threshold_pct:g}%, would take "
        f"{repeats_text} repeats per arm); then calibrate again"
    )


def _refused(pct: float) -> str:
    """A refused suggestion: '279%', or 'over 1,000%'."""
    return _shown(pct, ".3g")


def _shown(pct: float, form: str = ".2f") -> str:
    """A percent as the file and the progress lines state it, in `form`; past SHOWN_UP_TO_PCT,
    'over 1,000%' ('over +1,000%' for a signed form)."""
    if pct < SHOWN_UP_TO_PCT:
        return f"{pct:{form}}%"
    return f"over {'+' if form.startswith('+') else ''}{SHOWN_UP_TO_PCT:,}%"


def _gating_suggestion(metric: Literal["tok_per_s", "end_to_end_ms"], supported_pct: float | None) -> float | None:
    """The threshold written for what the user feels (end-to-end ms, tok/s): what the runner
    resolves at this spread, however coarse (a compiled engine's tok/s can move by a third
    between processes whose GPU ms agree), since a run holds the metric to it and GPU ms still
    gates at its own; None past felt_cap_pct (a step eleven times as long), where the
    figure says no more than that the runner cannot tell: a run then holds the metric to the
    config's threshold and stays undecided on it, saying so."""
    if supported_pct is None or _suggest(supported_pct) > felt_cap_pct(metric):
        return None
    return _suggest(supported_pct)


def _suggest(supported_pct: float) -> float:
    steps = supported_pct / SUGGESTION_STEP_PCT
    return max(FLOOR_PCT, round(math.ceil(steps - 1e-9) * SUGGESTION_STEP_PCT, 6))


def gap_noise(traces: list[Path]) -> GapNoise | None:
    """The gap figures of every profiled process's trace; None without traces."""
    if not traces:
        return None
    figures, unreadable = [], []
    for path in traces:
        try:
            figures.append(analyze(read_trace(path)))
        except TraceError as exc:  # one bad trace must not cost the A/A's timings
            unreadable.append(f"{path.name}: {exc.message}")
    return GapNoise(
        traces=len(figures),
        unreadable=unreadable,
        median_gap_us=[f.gaps.median_gap_us for f in figures if f.gaps.median_gap_us is not None],
        idle_ms_per_step=[f.idle_ms_per_step for f in figures],
        largest_1pct_gaps_ms_per_step=[f.gaps.largest_1pct_gaps_ms_per_step for f in figures],
    )


def gap_noise_line(noise: NoiseFloor) -> str:
    gaps = noise.gaps
    if gaps is None:
        return f"bs {noise.batch_size}: no profiled pass (no GPU, or workload.profile_steps = 0): no gap figures."

    def span(values: list[float], digits: int) -> str:
        return f"{min(values):.{digits}f}-{max(values):.{digits}f}" if values else "n/a"

    skipped = ""
    if gaps.unreadable:
        skipped = f" {len(gaps.unreadable)} trace(s) could not be read: {'; '.join(gaps.unreadable)}."
    return (
        f"bs {noise.batch_size}: over {gaps.traces} profiled processes, median gap {span(gaps.median_gap_us, 3)} us, "
        f"idle {span(gaps.idle_ms_per_step, 4)} ms per step, largest 1% of gaps "
        f"{span(gaps.largest_1pct_gaps_ms_per_step, 4)} ms per step." + skipped
    )


def noise_lines(noise: NoiseFloor) -> list[str]:
    """The file's lines for one batch size: what the A/A saw, then per metric what it supports."""
    lines = [
        f"bs {noise.batch_size}: GPU ms/step {noise.gpu_ms_per_step:.4f}, spread {_shown(noise.gpu_ms_spread_pct)} "
        f"(A/A {_shown(noise.gpu_ms_aa_ci_pct[0], '+.2f')} to {_shown(noise.gpu_ms_aa_ci_pct[1], '+.2f')}); "
        f"tok/s spread {_shown(noise.tok_per_s_spread_pct)} "
        f"(A/A {_shown(noise.tok_per_s_aa_ci_pct[0], '+.2f')} to {_shown(noise.tok_per_s_aa_ci_pct[1], '+.2f')})"
    ]
    for label, metric in (("GPU ms per step", noise.gpu_ms), ("tok/s", noise.tok_per_s),
                          ("end-to-end ms per step", noise.end_to_end_ms)):
        if metric is not None:
            lines.append(metric_line(noise.batch_size, label, metric))
    if noise.instructions is not None:
        lines.append(metric_line(noise.batch_size, "host instructions per step", noise.instructions,
                                 "measure.instructions_threshold_pct, not calibrated: set by what a user feels"))
    lines.append(gap_noise_line(noise))
    lines.append(disagreement_line(noise))
    return lines


def disagreement_line(noise: NoiseFloor) -> str:
    """The A/A's disagreements with the reference per side, and the agreement rule's floor beside them."""
    found = noise.disagreement
    if found is None:
        return (f"bs {noise.batch_size}: the workload ran free (its step() takes no input ids): "
                "no disagreement figures.")
    sides = "; ".join(
        f"side {s.side} {', '.join(map(str, s.disagreements))} of {s.compared} outputs per process, "
        f"{_pct(s.rate)} ({RATE_CONFIDENCE:.0%} interval {_pct(s.rate_low)} to {_pct(s.rate_high)})"
        for s in found.sides
    )
    floor = (f"the agreement rule calls an output changed when every head process disagrees more than every base "
             f"one, by at least {_pct(found.floor_share)} of the outputs on average ({found.floor_outputs:g} of "
             f"{found.sides[0].compared})")
    if found.leaves_room:
        room = (f"the upper limit {_pct(found.rate_high)} leaves {found.room_share * 100:.1f} "
                "points under it, so a change that only rounds differently, which moves near-ties like these, "
                "stays under the floor")
    else:
        room = (f"the upper limit {_pct(found.rate_high)} is not under it: near-ties are this common here, so a "
                "change that only rounds differently may pass the floor and be called a changed output (invalid)")
    return f"bs {noise.batch_size}, disagreement with the reference under forcing: {sides}; {floor}: {room}."


def _pct(share: float) -> str:
    return f"{share * 100:.1f}%"


def metric_line(batch_size: int, label: str, noise: RunnerNoise, setting: str = "measure.threshold_pct") -> str:
    """'bs 1, GPU ms per step: sd 0.031% (upper 95% limit 0.072%, ...); smallest threshold ...'.
    `setting`: what the first threshold asked about is."""
    def count(n: int | None) -> str:
        return f"more than {MOST_REPEATS}" if n is None else f"about {n}"

    needed = "; ".join(
        f"{count(r.repeats)} repeats per arm for {r.threshold_pct:g}%" + (f" ({setting})" if i == 0 else "")
        for i, r in enumerate(noise.needed)
    )
    return (
        f"bs {batch_size}, {label}: within-side sd {_shown(noise.sd_pct, '.3f')} (upper "
        f"{SPREAD_LIMIT_CONFIDENCE:.0%} limit {_shown(noise.sd_limit_pct, '.3f')}, {noise.processes} processes, "
        f"{noise.degrees_of_freedom} degrees of freedom); "
        f"smallest threshold at {noise.repeats} repeats per arm {_shown(noise.supported_pct)}"
        + (f" (a run borrowing this spread; {_shown(noise.alone_pct)} on its own processes alone)"
           if noise.alone_pct is not None else "")
        + f"; {needed}."
    )


def slow_line(slow: SlowProcesses, in_a_run: float, run_processes: int) -> str:
    sentence = slow_processes_sentence(slow, lambda side: f"side {side}", "side")
    if not slow.slow:
        return sentence
    return (f"{sentence} At this rate a run of {run_processes} processes holds one {share(in_a_run)} of the time; "
            "the spreads above leave them out.")
