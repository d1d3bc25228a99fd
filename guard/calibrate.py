"""`guard calibrate`: A/A runs of one commit against itself, to learn this runner's noise
and suggest thresholds a regression must pass."""

from __future__ import annotations

import math
import statistics
from contextlib import ExitStack
from pathlib import Path

from pydantic import BaseModel

from guard._errors import HarnessError, TraceError
from guard.checkout import ArmRef, build_arm, require_repo, resolve_commit
from guard.compare import compare
from guard.config import (
    MAX_THRESHOLD_PCT, CommitFiles, GuardConfig, Thresholds, check_entry, load_commit_config, write_thresholds,
)
from guard.measure import (
    MOST_REPEATS, PASS_RATE, ArmTarget, HarnessSpec, check_cpus, prepare_reference, repeats_to_rule_out,
    run_interleaved,
)
from guard.pipeline import Progress, default_cache_dir
from guard.trace import analyze, read_trace

# A suggested threshold is this many times the widest A/A interval bound seen, so an
# unchanged commit passes with room to spare; and never under the floor.
SAFETY_FACTOR = 2.0
FLOOR_PCT = 0.25
# A threshold is below MAX_THRESHOLD_PCT (config); a runner noisier than that gets this one,
# and the file says the runner cannot tell a smaller slowdown from its noise.
CAP_PCT = MAX_THRESHOLD_PCT - 1
# A repeat is far from the rest when it is more than this many robust standard deviations
# (1.4826 x the median absolute deviation) from the median of all repeats, and more than
# OUTLIER_MIN_PCT from it.
OUTLIER_SIGMAS = 5.0
OUTLIER_MIN_PCT = 0.1
# Profiled processes per side for the gap figures, unless workload.profile_repeats says how
# many: enough for a range, without profiling every one of the A/A's processes.
PROFILED_PER_SIDE = 3


class FarRepeat(BaseModel):
    side: str
    repeat: int  # 1-based, as the progress lines count
    gpu_ms_per_step: float
    off_pct: float  # from the median of all repeats


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
    gpu_ms_far_repeats: list[FarRepeat] = []  # one slow process widens the interval, and the thresholds
    # Repeats per arm with which an unchanged commit passes measure.threshold_pct PASS_RATE of
    # the time, at this noise (None: more than MOST_REPEATS); an estimate.
    repeats_needed_at_pct: float | None = None
    gpu_ms_repeats_needed: int | None = None
    tok_per_s_repeats_needed: int | None = None
    gaps: GapNoise | None = None  # None: no profiled pass (no GPU, or workload.profile_steps = 0)


class Calibration(BaseModel):
    sha: str
    repeats: int
    noise: list[NoiseFloor]
    suggested: Thresholds
    # (GPU ms, tok/s) in percent that the A/A asked for, when one was past CAP_PCT
    uncapped_pct: tuple[float, float] | None = None


def calibrate(
    repo: Path, ref: str, config: GuardConfig | None, out: Path, progress: Progress = lambda _: None,
    cache_dir: Path | None = None,
) -> Calibration:
    """`config` None: guard.toml (and its reference_file) as the commit `ref` holds it."""
    repo = repo.resolve()
    require_repo(repo)
    arm_ref = ArmRef(name="aa", ref=ref, sha=resolve_commit(repo, ref))
    if config is None:
        config = load_commit_config(repo, arm_ref.sha)
    check_cpus(config.measure.cpus)
    # the build stays locked until the A/A runs are done: no other run rebuilds it meanwhile
    with ExitStack() as build_in_use:
        built = build_arm(repo, ArmRef(name="aa", ref=ref, sha=arm_ref.sha), config.build,
                          cache_dir or default_cache_dir(repo), progress, hold=build_in_use)
        check_entry(config.workload.entry, built.worktree)
        targets = [
            ArmTarget(name=name, python=built.python, worktree=built.worktree, env=built.env,
                      pass_env=config.build.pass_env, user=config.build.user, cpus=config.measure.cpus)
            for name in "ab"
        ]
        spec = HarnessSpec(
            entry=config.workload.entry, options=config.workload.options, batch_sizes=config.workload.batch_sizes,
            steps=config.workload.steps, warmup_steps=config.workload.warmup_steps,
            tok_per_s_min_s=config.workload.tok_per_s_min_s, warmup_max_s=config.workload.warmup_max_s,
            profile_steps=config.workload.profile_steps,
            profile_repeats=config.workload.profile_repeats or PROFILED_PER_SIDE,
        )
        runs = out.parent / f"{out.stem}-runs"
        spec, reference = prepare_reference(targets[0], spec, runs, config.measure.timeout_s,
                                            config.workload.reference_file, f"A/A {arm_ref.sha[:8]}", progress,
                                            files=CommitFiles(repo=repo, sha=arm_ref.sha))
        progress(f"A/A: {ref} ({arm_ref.sha[:12]}) against itself, {config.measure.repeats} repeats per side")
        measurements = run_interleaved(
            targets, spec, config.measure.repeats, runs, config.measure.timeout_s, progress,
            reference=reference.tokens if spec.reference else None,
        )
    failed = [m.error for m in measurements.values() if m.error]
    if failed:
        raise HarnessError("aa", failed[0])
    comparison = compare(measurements, "a", "b", spec.batch_sizes, config.measure.threshold_pct,
                         config.measure.confidence, config.measure.alpha,
                         reference=reference.tokens.source if reference.tokens else None)
    noise = []
    for batch in comparison.batches:
        if batch.gpu_ms_change is None or batch.tok_per_s_change is None:
            raise HarnessError("aa", f"batch size {batch.batch_size}: {'; '.join(batch.reasons)}")
        gpu = [v for a in batch.arms for v in a.gpu_ms_per_step.values]
        tok = [v for a in batch.arms for v in a.tok_per_s.values]
        noise.append(NoiseFloor(
            batch_size=batch.batch_size,
            gpu_ms_per_step=sorted(gpu)[len(gpu) // 2],
            gpu_ms_spread_pct=(max(gpu) - min(gpu)) / sorted(gpu)[len(gpu) // 2] * 100,
            tok_per_s_spread_pct=(max(tok) - min(tok)) / sorted(tok)[len(tok) // 2] * 100,
            gpu_ms_aa_ci_pct=(batch.gpu_ms_change.ci_low_pct, batch.gpu_ms_change.ci_high_pct),
            tok_per_s_aa_ci_pct=(batch.tok_per_s_change.ci_low_pct, batch.tok_per_s_change.ci_high_pct),
            gpu_ms_far_repeats=far_repeats({a.arm: a.gpu_ms_per_step.values for a in batch.arms}),
            repeats_needed_at_pct=config.measure.threshold_pct,
            gpu_ms_repeats_needed=repeats_to_rule_out(
                [a.gpu_ms_per_step.values for a in batch.arms], config.measure.threshold_pct, config.measure.confidence
            ),
            tok_per_s_repeats_needed=repeats_to_rule_out(
                [a.tok_per_s.values for a in batch.arms], config.measure.threshold_pct, config.measure.confidence
            ),
            gaps=gap_noise([Path(run.trace) for m in measurements.values() for r in m.repeats
                            for run in r.runs if run.batch_size == batch.batch_size and run.trace]),
        ))
    gpu_pct = _suggest(max(abs(b) for n in noise for b in n.gpu_ms_aa_ci_pct))
    tok_pct = _suggest(max(abs(b) for n in noise for b in n.tok_per_s_aa_ci_pct))
    suggested = Thresholds(gpu_ms_pct=min(gpu_pct, CAP_PCT), tok_per_s_pct=min(tok_pct, CAP_PCT))
    result = Calibration(
        sha=arm_ref.sha, repeats=config.measure.repeats, noise=noise, suggested=suggested,
        uncapped_pct=(gpu_pct, tok_pct) if max(gpu_pct, tok_pct) > CAP_PCT else None,
    )
    lines = [f"Written by `guard calibrate` for {arm_ref.sha[:12]}: A/A, {result.repeats} repeats per side."]
    for n in noise:
        lines.append(
            f"bs {n.batch_size}: GPU ms/step {n.gpu_ms_per_step:.4f}, spread {n.gpu_ms_spread_pct:.2f}% "
            f"(A/A {n.gpu_ms_aa_ci_pct[0]:+.2f}% to {n.gpu_ms_aa_ci_pct[1]:+.2f}%); "
            f"tok/s spread {n.tok_per_s_spread_pct:.2f}% "
            f"(A/A {n.tok_per_s_aa_ci_pct[0]:+.2f}% to {n.tok_per_s_aa_ci_pct[1]:+.2f}%)"
        )
        if n.gpu_ms_far_repeats:
            lines.append(far_repeats_line(n, 2 * result.repeats))
        lines.append(repeats_needed_line(n, config.measure.repeats))
        lines.append(gap_noise_line(n))
    lines.append(f"Thresholds: {SAFETY_FACTOR:g} x the widest A/A interval bound, at least {FLOOR_PCT}%.")
    if result.uncapped_pct is not None:
        lines.append(capped_line(*result.uncapped_pct))
    out.parent.mkdir(parents=True, exist_ok=True)
    write_thresholds(out, suggested, "\n".join(lines))
    return result


def capped_line(gpu_ms_pct: float, tok_per_s_pct: float) -> str:
    return (
        f"Capped at {CAP_PCT:g}% (a threshold is under {MAX_THRESHOLD_PCT}%): this A/A asked for "
        f"{gpu_ms_pct:g}% in GPU ms per step and {tok_per_s_pct:g}% in tok/s, so this runner "
        "cannot tell a smaller slowdown from its noise; steady it (measure.cpus, a GPU of its own) or raise "
        "measure.repeats, and calibrate again."
    )


def _suggest(widest_pct: float) -> float:
    return max(FLOOR_PCT, math.ceil(widest_pct * SAFETY_FACTOR * 10) / 10)


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


def repeats_needed_line(noise: NoiseFloor, repeats: int) -> str:
    def count(n: int | None) -> str:
        return f"more than {MOST_REPEATS}" if n is None else f"about {n}"

    return (
        f"bs {noise.batch_size}: at {noise.repeats_needed_at_pct:g}% (measure.threshold_pct) an unchanged commit "
        f"passes {PASS_RATE:.0%} of the time with {count(noise.gpu_ms_repeats_needed)} repeats per arm in "
        f"GPU ms per step and {count(noise.tok_per_s_repeats_needed)} in tok/s (measure.repeats is {repeats}; "
        "an estimate from this spread)."
    )


def far_repeats_line(noise: NoiseFloor, repeats: int) -> str:
    far = ", ".join(f"{f.side} repeat {f.repeat} {f.gpu_ms_per_step:.4f} ms ({f.off_pct:+.2f}%)"
                    for f in noise.gpu_ms_far_repeats)
    return (
        f"bs {noise.batch_size}: {len(noise.gpu_ms_far_repeats)} of {repeats} repeats far from the rest: {far}. "
        "They widen the A/A interval, and so the thresholds; calibrate again to see whether this runner "
        "does that often."
    )


def far_repeats(by_side: dict[str, list[float]]) -> list[FarRepeat]:
    """Repeats whose GPU ms per step is far from the rest (see OUTLIER_SIGMAS)."""
    values = [v for side in by_side.values() for v in side]
    median = statistics.median(values)
    mad = statistics.median(abs(v - median) for v in values)
    limit = max(OUTLIER_SIGMAS * 1.4826 * mad, OUTLIER_MIN_PCT / 100 * median)
    return [
        FarRepeat(side=side, repeat=i, gpu_ms_per_step=v, off_pct=(v / median - 1) * 100)
        for side, side_values in by_side.items()
        for i, v in enumerate(side_values, start=1)
        if abs(v - median) > limit
    ]
