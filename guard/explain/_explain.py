"""The explain stage, run after the comparison and the trace analysis: from their figures, the
facts the comment states (`Explanation`). A report read back is explained again from its own
numbers and must give the same facts (report/_check.py)."""

from __future__ import annotations

from guard.cause import CaptureChanges
from guard.compare import BatchComparison, CompiledChange, MetricKey, Slowdown, Verdict, time_ratio
from guard.config import FELT_METRICS, Rule
from guard.explain._models import (
    GRAPH_BREAK_CAUSES, AblationEffect, CapturePlace, Cause, CauseKind, CompiledCause, DeviceRise, Explanation,
    Headline, HostTime, LaunchNote, ProfileScale, RankCause, SlowerKernel, TimeSplit,
)
from guard.explain._mix import mix_attribution
from guard.explain._ranks import rank_causes
from guard.measure import Change, MixReport, relative_change
from guard.trace import BeforeAfter, RankDiff, TraceDiff, grew

DOMINANT_SHARE = 0.6  # a part of the change carrying this share of it is its cause
NOTABLE_SHARE = 0.5  # a pass names a rise in step time of at least this share of the threshold
PROFILE_SCALE_FACTOR = 2.0  # a profiled change this many times the timed one (or under its inverse)
SLOWER_KERNELS_NAMED = 3


def explain(
    verdict: Verdict,
    batches: list[BatchComparison],
    diffs: dict[int, TraceDiff],
    base: str,
    head: str,
    *,
    rule: Rule,
    ablation_builds: dict[str, str] | None = None,
    capture: CaptureChanges | None = None,
    mix: MixReport | None = None,
    mix_trace: TraceDiff | None = None,
    mix_decision: BatchComparison | None = None,
    rank_diffs: dict[int, RankDiff] | None = None,
    compiled: CompiledChange | None = None,
) -> Explanation:
    """`diffs`: the profiled pass's base -> head diff per batch size; `ablation_builds`: each
    ablation arm that ran, and the arm whose build it reuses; `mix`: the batch-size mix's
    figures, `mix_trace` the diff of its own profiled pass where it has one, and `mix_decision`
    the compare stage's verdict on it; `rank_diffs`: per batch size of several ranks, the diff
    of base's profiled passes across the ranks with head's; `compiled`: what dynamo compiled in
    each arm. `rule`: what the verdicts were decided by, its thresholds and the confidence shown."""
    thresholds = rule.pcts()
    rows = padded_rows(mix, base, head)
    causes = [c for b in batches if b.verdict in ("regression", "at_threshold")
              if (c := cause_of(b, diffs.get(b.batch_size), rows.get(b.batch_size))) is not None]
    ranks = rank_causes(batches, rank_diffs or {}, head)
    broke = compiled_cause(compiled, causes)
    headline = _headline(verdict, batches + ([mix_decision] if mix_decision is not None else []), diffs, causes,
                         thresholds, capture, ranks)
    if headline.verdict == "improvement":
        headline = headline.model_copy(update={"device_rise": device_rise(
            next(b for b in [*batches, *([mix_decision] if mix_decision else [])]
                 if b.batch_size == headline.batch_size), rows, mix, base, head)})
    if broke is not None and headline.batch_size in broke.batch_sizes:
        headline = headline.model_copy(update={"graph_breaks": True})
    return Explanation(
        headline=headline,
        causes=causes,
        ranks=ranks,
        compiled=broke,
        ablations=[e for arm, source in (ablation_builds or {}).items() for b in batches
                   if (e := _ablation(b, arm, "base" if source == base else "head", base, rule.confidence))],
        launch_notes=[n for b in batches if (n := _launch_note(b, base, head, thresholds["gpu_ms"]))],
        profile_scales=[s for b in batches if b.verdict in ("regression", "at_threshold")
                        if (s := _profile_scale(b, diffs.get(b.batch_size), base, head))],
        mix=mix_attribution(mix, base, head, decision=mix_decision, dominant_share=DOMINANT_SHARE, diffs=diffs,
                            mix_trace=mix_trace),
        capture_unchanged=capture_unchanged(diffs),
    )


def capture_unchanged(diffs: dict[int, TraceDiff]) -> bool | None:
    """Whether what was captured is the same on both sides: every profiled batch size that
    replays a CUDA graph on either side has the same kernels (copies and memsets included) and
    the same API calls per step. A size run eagerly on both sides captured nothing, so what it
    added is not capture's; a diff without launch counts (older reports) counts as replaying.
    None without a profiled pass."""
    if not diffs:
        return None
    replayed = [d for d in diffs.values() if d.launches is None
                or (d.launches.graph_launches_per_step.before or 0) > 0
                or (d.launches.graph_launches_per_step.after or 0) > 0]
    return all(d.kernel_counts_identical and d.api_calls_identical for d in replayed)


def device_rise(batch: BatchComparison, rows: dict[int, tuple[int, int]], mix: MixReport | None, base: str,
                head: str) -> DeviceRise | None:
    """Where what the user feels decided `batch` an improvement and its GPU ms per step rose, a
    slowdown shown (its lower bound above 0): that rise, and the padding that explains it where
    the run recorded one (`padded_rows`; over the mix, each arm's padding waste)."""
    gpu = batch.gpu_ms_bounds
    if batch.decided_by not in FELT_METRICS or gpu is None or gpu.ci_low_pct <= 0:
        return None
    waste = None
    if batch.mix and mix is not None:
        arms = {a.arm: a.padding_waste for a in mix.arms}
        before, after = arms.get(base), arms.get(head)
        waste = (before, after) if before is not None and after is not None and after > before else None
    return DeviceRise(gpu_ms=gpu, rows=None if batch.mix else rows.get(batch.batch_size), padding_waste=waste)


def compiled_cause(compiled: CompiledChange | None, causes: list[Cause]) -> CompiledCause | None:
    """The head's added graphs or breaks, where they account for a slower batch size's time
    (GRAPH_BREAK_CAUSES); None where its decode broke no more than base's, or nothing went there."""
    if compiled is None or compiled.head is None or not compiled.rose:
        return None
    sizes = [c.batch_size for c in causes if c.kind in GRAPH_BREAK_CAUSES]
    if not sizes:
        return None
    base = compiled.base.graphs_most if compiled.base is not None else 0
    return CompiledCause(graphs=(base, compiled.head.graphs_most), breaks_added=len(compiled.breaks_added),
                         first=compiled.breaks_added[0] if compiled.breaks_added else None, batch_sizes=sizes)


def padded_rows(mix: MixReport | None, base: str, head: str) -> dict[int, tuple[int, int]]:
    """Batch size -> rows each step computed, base -> head, for the sizes of the mix whose head
    computes more rows than base (as both arms' step_info recorded them)."""
    arms = {a.arm: {s.batch_size: s for s in a.sizes} for a in mix.arms} if mix is not None else {}
    before, after = arms.get(base, {}), arms.get(head, {})
    return {size: (b.padded_to, h.padded_to) for size, b in before.items()
            if (h := after.get(size)) is not None and b.padded_to is not None and h.padded_to is not None
            and h.padded_to > b.padded_to}


def cause_of(batch: BatchComparison, change: TraceDiff | None, rows: tuple[int, int] | None = None) -> Cause | None:
    """Where a slower batch size's extra time went, or None when nothing says. `rows`: the rows
    each step of this size computed in the mix, base -> head, where the head computes more."""
    gpu, tok = batch.gpu_ms_change, batch.tok_per_s_change
    if gpu is None or tok is None:
        return None
    host = _host_time(batch)
    # GPU time that rose past the threshold is explained by the trace, where it has a cause for
    # it; host time alone explains a slowdown the GPU did not see
    if host is not None and (batch.gpu_ms_verdict != "regression" or change is None):
        return Cause(batch_size=batch.batch_size, kind="host_time", dominant=True, host=host)
    found = _from_trace(batch.batch_size, change, rows) if change is not None else None
    if host is not None:
        if found is None or not found.dominant:
            base = found or Cause(batch_size=batch.batch_size, kind="host_time", dominant=True)
            return base.model_copy(update={"kind": "host_time", "dominant": True, "host": host})
        return found.model_copy(update={"host": host})
    return found


def graphs_gone(change: TraceDiff) -> bool:
    """Base replayed CUDA graphs and head replays none: decode runs eagerly."""
    if change.launches is not None:
        return change.launches.fell_out_of_graphs and (change.launches.graph_launches_per_step.after or 0) == 0
    launches = change.api_calls_changed.get("cudaGraphLaunch")
    return launches is not None and (launches.before or 0) > 0 and (launches.after or 0) == 0


def _from_trace(batch_size: int, change: TraceDiff, rows: tuple[int, int] | None = None) -> Cause | None:
    if graphs_gone(change):
        return Cause(batch_size=batch_size, kind="no_cuda_graph", dominant=True)
    split = time_split(change)
    if split is None:
        return None
    kind: CauseKind = "mixed"
    # more rows computed, and the growth is busy time: the kernels do the padded rows' work
    if rows is not None and split.counts_share + split.durations_share >= DOMINANT_SHARE:
        return Cause(batch_size=batch_size, kind="padded_rows", dominant=True, split=split, rows=rows)
    if split.idle_share >= DOMINANT_SHARE:
        kind = "idle_between_kernels"
    elif split.counts_share >= DOMINANT_SHARE:
        kind = "kernels_added"
    elif split.durations_share >= DOMINANT_SHARE:
        kind = "slower_kernels"
    return Cause(
        batch_size=batch_size, kind=kind, dominant=kind != "mixed", split=split,
        only_idle=change.kernel_counts_identical and not change.kernels_slower,
        kernels_per_step=change.kernels_per_step if kind == "kernels_added" else _more(change.kernels_per_step),
        memcpys_per_step=_more(change.memcpys_per_step), memsets_per_step=_more(change.memsets_per_step),
        slower_kernels=_slower_kernels(change) if kind == "slower_kernels" else [],
    )


def _more(count: BeforeAfter | None) -> BeforeAfter | None:
    """A count per step where the head's step runs more than base's; None where it does not."""
    return count if count is not None and grew(count) else None


def time_split(change: TraceDiff) -> TimeSplit | None:
    """The shares of idle time, kernels added or removed and kernel durations in what grew."""
    idle = change.idle_ms_per_step.delta or 0.0
    counts, durations = change.busy_ms_per_step_from_counts, change.busy_ms_per_step_from_durations
    total = sum(max(part, 0.0) for part in (idle, counts, durations))
    if total <= 0:
        return None
    return TimeSplit(idle_ms=idle, counts_ms=counts, durations_ms=durations, idle_share=max(idle, 0.0) / total,
                     counts_share=max(counts, 0.0) / total, durations_share=max(durations, 0.0) / total)


def _slower_kernels(change: TraceDiff) -> list[SlowerKernel]:
    swapped = [SlowerKernel(name=c.name, kernels_per_step=c.kernels_per_step.after,
                            mean_duration_us=c.mean_duration_us, variant=True)
               for c in change.kernels_replaced if (c.busy_ms_per_step.delta or 0.0) > 0]
    variants = {c.name for c in change.kernels_replaced}
    slower = [SlowerKernel(name=c.name, kernels_per_step=c.kernels_per_step.after,
                           mean_duration_us=c.mean_duration_us, variant=False)
              for c in change.kernels_slower if c.name not in variants]
    return [*swapped, *slower][:SLOWER_KERNELS_NAMED]


def _host_time(batch: BatchComparison) -> HostTime | None:
    gpu, tok = batch.gpu_ms_change, batch.tok_per_s_change
    assert gpu is not None and tok is not None
    fall = -tok.pct
    if fall > 2 * max(gpu.pct, 0.0) + 1.0 and gpu.ci_high_pct < fall / 2:
        return HostTime(gpu_ms_pct=gpu.pct, tok_per_s_fall_pct=fall)
    return None


def _stats_values(batch: BatchComparison, arm: str) -> list[float] | None:
    stats = next((a for a in batch.arms if a.arm == arm), None)
    return stats.gpu_ms_per_step.values if stats else None


def _ablation(batch: BatchComparison, arm: str, build: str, base: str, confidence: float) -> AblationEffect | None:
    before, after = _stats_values(batch, base), _stats_values(batch, arm)
    if not before or not after:
        return None
    try:
        change: Change | None = relative_change(before, after, confidence)
        pct = change.pct  # type: ignore[union-attr]
    except ValueError:  # a single repeat: the ratio of the medians alone
        change = None
        pct = (_median(after) / _median(before) - 1) * 100
    head = batch.gpu_ms_change
    share = None
    if batch.verdict == "regression" and head is not None and head.pct > 0:
        share = pct / head.pct if build == "base" else (head.pct - pct) / head.pct
    return AblationEffect(arm=arm, batch_size=batch.batch_size, build=build, pct=pct, change=change,  # type: ignore[arg-type]
                          share_of_head=share)


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def _launch_note(batch: BatchComparison, base: str, head: str, threshold_pct: float) -> LaunchNote | None:
    """By the interval rule at the batch size's own level: the end-to-end slowdown's lower bound
    is above the threshold, where the held GPU time decided no regression."""
    if batch.verdict in ("regression", "invalid") or batch.alpha_per_look is None or batch.gpu_ms_bounds is None:
        return None
    arms = {a.arm: a for a in batch.arms}
    b, h = arms.get(base), arms.get(head)
    if b is None or h is None or b.end_to_end_gpu_ms_per_step is None or h.end_to_end_gpu_ms_per_step is None:
        return None
    bounds = relative_change(b.end_to_end_gpu_ms_per_step.values, h.end_to_end_gpu_ms_per_step.values,
                             1 - 2 * (batch.alpha_of("end_to_end_ms") or batch.alpha_per_look))
    if Slowdown.of_time(bounds).low <= threshold_pct:
        return None
    return LaunchNote(batch_size=batch.batch_size, end_to_end=bounds, held=batch.gpu_ms_bounds)


def _profile_scale(batch: BatchComparison, change: TraceDiff | None, base: str, head: str) -> ProfileScale | None:
    if change is None or change.span_ms_per_step.delta is None:
        return None
    medians = {a.arm: a.gpu_ms_per_step.median for a in batch.arms}
    if base not in medians or head not in medians:
        return None
    timed, profiled = medians[head] - medians[base], change.span_ms_per_step.delta
    if timed <= 0 or profiled <= 0 or 1 / PROFILE_SCALE_FACTOR < profiled / timed < PROFILE_SCALE_FACTOR:
        return None
    return ProfileScale(batch_size=batch.batch_size, profiled_ms=profiled, timed_ms=timed)


def _slowdown_pct(batch: BatchComparison, metric: MetricKey) -> float:
    change = batch.bounds(metric)
    return 0.0 if change is None else Slowdown.of(change, metric).pct


def _felt(batch: BatchComparison, metric: MetricKey, thresholds: dict[MetricKey, float]) -> MetricKey | None:
    """Of FELT_METRICS, the larger slowdown whose whole interval is past its threshold and whose lower
    bound is past `metric`'s own figure, as time ratios: at the decision's level it is a
    slowdown, and a larger one than the title would give otherwise. None where neither is.
    (Past `metric`'s upper bound asks too much of few processes: on the H200 a compile mode that
    left CUDA graphs took tok/s down 68% (its slowdown's lower bound 19%) while GPU ms rose 17.6%,
    up to 31%, at 3 processes per arm.)"""
    decided = batch.bounds(metric)
    if decided is None:
        return None
    ceiling = time_ratio(Slowdown.of(decided, metric).pct, metric)
    found: list[tuple[float, MetricKey]] = []
    for other in FELT_METRICS:
        change = batch.bounds(other)
        if other == metric or change is None:
            continue
        slowdown = Slowdown.of(change, other)
        if slowdown.low > thresholds[other] and time_ratio(slowdown.low, other) > ceiling:
            found.append((time_ratio(slowdown.pct, other), other))
    return max(found)[1] if found else None


def _headline(verdict: Verdict, batches: list[BatchComparison], diffs: dict[int, TraceDiff], causes: list[Cause],
              thresholds: dict[MetricKey, float], capture: CaptureChanges | None, ranks: list[RankCause]) -> Headline:
    threshold_pct = thresholds["gpu_ms"]
    fell_out = [size for size, d in sorted(diffs.items()) if d.launches is not None and d.launches.fell_out_of_graphs]
    place = _capture_place(capture)
    if verdict == "invalid":
        return Headline(verdict=verdict, capture=place)
    measured = [b for b in batches if b.gpu_ms_bounds is not None and b.tok_per_s_bounds is not None]
    if verdict == "pass":
        notable = [b for b in measured if b.gpu_ms_bounds.ci_low_pct > 0  # type: ignore[union-attr]
                   and b.gpu_ms_bounds.pct >= NOTABLE_SHARE * threshold_pct]  # type: ignore[union-attr]
        pick = max(notable or measured, key=lambda b: b.gpu_ms_bounds.pct, default=None)  # type: ignore[union-attr]
        return Headline(verdict=verdict, batch_size=pick.batch_size if pick else None, metric="gpu_ms",
                        change=pick.gpu_ms_bounds if pick else None, notable=bool(notable), capture=place,
                        fell_out=fell_out)
    deciding = [b for b in measured if b.verdict == verdict]
    if not deciding:
        return Headline(verdict=verdict, capture=place, fell_out=fell_out)
    sign = -1 if verdict == "improvement" else 1

    def metric_of(b: BatchComparison) -> MetricKey:
        return b.decided_by or "gpu_ms"

    worst = max(deciding, key=lambda b: sign * _slowdown_pct(b, metric_of(b)))
    metric = metric_of(worst)
    cause = next((c for c in causes if c.batch_size == worst.batch_size), None) if not worst.mix else None
    # of the ranks' findings at that size, the one that grew most against base's step
    ranked = max((r for r in ranks if r.batch_size == worst.batch_size and not worst.mix),
                 key=lambda r: r.share_of_step, default=None)
    felt = _felt(worst, metric, thresholds) if verdict == "regression" else None
    return Headline(
        verdict=verdict, batch_size=worst.batch_size, metric=metric, change=worst.bounds(metric),
        felt=felt, felt_change=worst.bounds(felt) if felt is not None else None,
        others=len(deciding) - 1, cause=cause.kind if cause and cause.dominant else None,
        capture=place, fell_out=fell_out, rank_cause=ranked.kind if ranked is not None else None,
    )


def _capture_place(capture: CaptureChanges | None) -> CapturePlace | None:
    if capture is None or not capture.files:
        return None
    first = capture.files[0]
    hunk = first.hunks[0] if first.hunks else None
    return CapturePlace(path=first.path, lines=hunk.range.as_tuple() if hunk else None,
                        function=hunk.function if hunk else None)



