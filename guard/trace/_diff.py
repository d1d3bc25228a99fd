"""Compare the figures of a base and a head trace: like for like first (kernel, copy and memset
counts and API calls), then where the time per step went (idle between kernels, kernel
durations, kernels added or removed; a copy or memset counts as a kernel of its name here)."""

from __future__ import annotations

from itertools import zip_longest

from pydantic import BaseModel, Field

from guard.trace._figures import GpuActivityKind, KernelFigures, StreamFigures, TraceFigures, TraceWarning

SLOWER_RATIO = 1.05  # a kernel is slower when its mean duration grew by more than 5% ...
SLOWER_MIN_US = 0.1  # ... and by more than 0.1 us: below that it is the timer's grain
COUNT_TOLERANCE = 1e-9  # counts per step are ratios of integers; equal ones compare equal


class BeforeAfter(BaseModel):
    before: float | None
    after: float | None
    delta: float | None  # after - before


class StreamChange(BaseModel):
    rank: int  # 0 is the stream with the most kernels per step
    base_stream: int | None
    head_stream: int | None
    kernels_per_step: BeforeAfter
    median_gap_us: BeforeAfter
    p90_gap_us: BeforeAfter
    mean_gap_us: BeforeAfter


class GapChange(BaseModel):
    """The gaps of all streams pooled."""

    median_gap_us: BeforeAfter
    p90_gap_us: BeforeAfter
    mean_gap_us: BeforeAfter
    max_gap_us: BeforeAfter
    gap_ms_per_step: BeforeAfter
    largest_1pct_gaps_ms_per_step: BeforeAfter


class KernelChange(BaseModel):
    name: str
    kind: GpuActivityKind = Field(default="kernel", exclude_if=lambda value: value == "kernel")  # no key for a kernel
    kernels_per_step: BeforeAfter
    mean_duration_us: BeforeAfter
    busy_ms_per_step: BeforeAfter


class LaunchChange(BaseModel):
    """Host launches per step, base -> head. `fell_out_of_graphs`: head launches fewer CUDA
    graphs and more kernels itself, so part of its decode step no longer replays a graph."""

    graph_launches_per_step: BeforeAfter
    kernel_launches_per_step: BeforeAfter
    fell_out_of_graphs: bool = False


class TraceDiff(BaseModel):
    base_source: str
    head_source: str
    steps: BeforeAfter
    # the same kernels per step, name by name, and the same copies and memsets (by their names,
    # `KernelFigures`; reports of schema 8 and before: kernels alone)
    kernel_counts_identical: bool
    api_calls_identical: bool  # the same API calls per step, name by name
    kernels_per_step: BeforeAfter
    # copies (memcpy) and memsets per step, counted apart from kernels; None (no key) in reports
    # whose figures timed kernels alone (schema 8 and before)
    memcpys_per_step: BeforeAfter | None = Field(default=None, exclude_if=lambda value: value is None)
    memsets_per_step: BeforeAfter | None = Field(default=None, exclude_if=lambda value: value is None)
    api_calls_changed: dict[str, BeforeAfter]
    launches: LaunchChange | None = None  # None in reports written before launches were counted
    busy_ms_per_step: BeforeAfter
    union_ms_per_step: BeforeAfter
    span_ms_per_step: BeforeAfter
    idle_ms_per_step: BeforeAfter
    gaps: GapChange
    # paired by rank (kernels per step, then first appearance): stream ids differ between two
    # processes' traces of the same graph
    streams: list[StreamChange]
    base_streams: int
    head_streams: int
    kernels_added: list[KernelChange]
    kernels_removed: list[KernelChange]
    # Kernels swapped for another variant of themselves (the same function, other template
    # arguments), as libraries do when a shape changes: one entry per kernel family whose
    # count per step is unchanged, named by the family: the kernels per step that moved, the
    # mean duration of the variant(s) they left and went to, and the family's busy time. Their
    # time counts as a duration change, not as kernels added or removed.
    kernels_replaced: list[KernelChange] = []
    kernels_slower: list[KernelChange]
    kernels_faster: list[KernelChange]
    # Busy time per step split by cause; the two sum to the change of mean busy time.
    busy_ms_per_step_from_counts: float
    busy_ms_per_step_from_durations: float
    # of the streams with gaps in both traces, those whose median gap moved as the pooled one did
    streams_with_gaps: int
    streams_gaps_same_way: int
    # the pooled gaps' change times head's kernels per step: what the wider gaps add to a step
    # (issue 775's sum), by the median gap's change and by the mean's; None unless gaps widened
    gap_ms_per_step_by_median: float | None
    gap_ms_per_step_by_mean: float | None
    warnings: list[TraceWarning]  # the trace readers' own, each with its arm


def diff(base: TraceFigures, head: TraceFigures) -> TraceDiff:
    """What changed from `base` to `head`, two traces of the same workload."""
    warnings = [w.model_copy(update={"arm": arm}) for arm, figures in (("base", base), ("head", head))
                for w in figures.warnings]
    if base.steps_rule != head.steps_rule:
        warnings.append(TraceWarning(kind="different_step_rules", base_rule=base.steps_rule,
                                     head_rule=head.steps_rule))

    kernel_changes = _kernel_changes(base.kernels, head.kernels)
    replaced, kernel_changes = _fold_variants(kernel_changes)
    added = [k for k in kernel_changes if grew(k.kernels_per_step)]
    removed = [k for k in kernel_changes if grew(k.kernels_per_step, sign=-1)]
    slower = [k for k in kernel_changes if _slower(k.mean_duration_us.before, k.mean_duration_us.after)]
    faster = [k for k in kernel_changes if _slower(k.mean_duration_us.after, k.mean_duration_us.before)]
    from_counts_ms, from_durations_ms = _busy_by_cause(kernel_changes)

    api_names = sorted(base.api_calls_per_step.keys() | head.api_calls_per_step.keys())
    api_changed = {
        name: _pair(base.api_calls_per_step.get(name, 0.0), head.api_calls_per_step.get(name, 0.0))
        for name in api_names
        if not _same(base.api_calls_per_step.get(name, 0.0), head.api_calls_per_step.get(name, 0.0))
    }
    streams = _pair_streams(base.streams, head.streams)

    gaps = GapChange(
        median_gap_us=_pair(base.gaps.median_gap_us, head.gaps.median_gap_us),
        p90_gap_us=_pair(base.gaps.p90_gap_us, head.gaps.p90_gap_us),
        mean_gap_us=_pair(base.gaps.mean_gap_us, head.gaps.mean_gap_us),
        max_gap_us=_pair(base.gaps.max_gap_us, head.gaps.max_gap_us),
        gap_ms_per_step=_pair(base.gaps.gap_ms_per_step, head.gaps.gap_ms_per_step),
        largest_1pct_gaps_ms_per_step=_pair(
            base.gaps.largest_1pct_gaps_ms_per_step, head.gaps.largest_1pct_gaps_ms_per_step
        ),
    )
    by_median, by_mean = _gap_sum(gaps, head.kernels_per_step)
    return TraceDiff(
        base_source=base.source,
        head_source=head.source,
        steps=_pair(base.steps, head.steps),
        kernel_counts_identical=not added and not removed and not replaced,
        api_calls_identical=not api_changed,
        kernels_per_step=_pair(base.kernels_per_step, head.kernels_per_step),
        memcpys_per_step=_pair(base.memcpys_per_step, head.memcpys_per_step),
        memsets_per_step=_pair(base.memsets_per_step, head.memsets_per_step),
        api_calls_changed=api_changed,
        launches=_launches(base, head),
        busy_ms_per_step=_pair(base.busy_ms_per_step, head.busy_ms_per_step),
        union_ms_per_step=_pair(base.union_ms_per_step, head.union_ms_per_step),
        span_ms_per_step=_pair(base.span_ms_per_step, head.span_ms_per_step),
        idle_ms_per_step=_pair(base.idle_ms_per_step, head.idle_ms_per_step),
        gaps=gaps,
        streams=streams,
        base_streams=len(base.streams),
        head_streams=len(head.streams),
        kernels_added=added,
        kernels_removed=removed,
        kernels_replaced=replaced,
        kernels_slower=slower,
        kernels_faster=faster,
        busy_ms_per_step_from_counts=from_counts_ms,
        busy_ms_per_step_from_durations=from_durations_ms,
        streams_with_gaps=len(_with_gaps(streams)),
        streams_gaps_same_way=_same_way(gaps.median_gap_us, streams),
        gap_ms_per_step_by_median=by_median,
        gap_ms_per_step_by_mean=by_mean,
        warnings=warnings,
    )


def _pair(before: float | None, after: float | None) -> BeforeAfter:
    delta = after - before if before is not None and after is not None else None
    return BeforeAfter(before=before, after=after, delta=delta)


def _same(before: float, after: float) -> bool:
    return abs(after - before) <= COUNT_TOLERANCE * max(1.0, abs(before))


def grew(change: BeforeAfter, sign: int = 1) -> bool:
    """The count per step rose (fell, with `sign` -1) by more than the ratios' grain; a missing
    side is none."""
    before, after = change.before or 0.0, change.after or 0.0
    return not _same(before, after) and (after - before) * sign > 0


def _slower(before_us: float | None, after_us: float | None) -> bool:
    if before_us is None or after_us is None:
        return False
    return after_us > before_us * SLOWER_RATIO and after_us - before_us > SLOWER_MIN_US


def _kernel_changes(base: list[KernelFigures], head: list[KernelFigures]) -> list[KernelChange]:
    """One entry per kernel name of either trace, largest change of busy time first."""
    before = {k.name: k for k in base}
    after = {k.name: k for k in head}
    changes = []
    for name in before.keys() | after.keys():
        b, a = before.get(name), after.get(name)
        changes.append(
            KernelChange(
                name=name,
                kind=(b or a).kind,  # type: ignore[union-attr]  # the name is one of theirs
                kernels_per_step=_pair(b.kernels_per_step if b else 0.0, a.kernels_per_step if a else 0.0),
                mean_duration_us=_pair(b.mean_duration_us if b else None, a.mean_duration_us if a else None),
                busy_ms_per_step=_pair(b.busy_ms_per_step if b else 0.0, a.busy_ms_per_step if a else 0.0),
            )
        )
    return sorted(changes, key=_by_busy_change)


def kernel_family(name: str) -> str:
    """A kernel's name without its template arguments and parameter list (every bracketed
    part): the variants of one function share it."""
    kept, depth = [], 0
    for ch in name:
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth = max(0, depth - 1)
        elif depth == 0:
            kept.append(ch)
    words = "".join(kept).split()  # a return type, if any, then the qualified name
    return words[-1].lstrip(":") if words and words[-1].lstrip(":") else name


def _fold_variants(changes: list[KernelChange]) -> tuple[list[KernelChange], list[KernelChange]]:
    """(replaced, changes with each replaced family as one entry). A family is replaced when
    the counts of its names move (some up, some down) and its kernels per step do not. A
    replaced entry is the kernels that moved: how many per step, and the mean duration of
    the variants they left and of those they went to."""
    families: dict[tuple[str, str], list[KernelChange]] = {}
    for k in changes:  # a copy's variants are copies: a kind's families apart from another's
        families.setdefault((k.kind, kernel_family(k.name)), []).append(k)
    replaced, folded = [], []
    for (kind, family), members in families.items():
        rose = [(k, k.kernels_per_step.delta or 0.0) for k in members if grew(k.kernels_per_step)]
        fell = [(k, -(k.kernels_per_step.delta or 0.0)) for k in members if grew(k.kernels_per_step, sign=-1)]
        count_before = sum(k.kernels_per_step.before or 0.0 for k in members)
        count_after = sum(k.kernels_per_step.after or 0.0 for k in members)
        if not (fell and rose and count_before > 0 and _same(count_before, count_after)):
            folded += members
            continue
        busy_before = sum(k.busy_ms_per_step.before or 0.0 for k in members)
        busy_after = sum(k.busy_ms_per_step.after or 0.0 for k in members)
        folded.append(KernelChange(
            name=family,
            kind=kind,
            kernels_per_step=_pair(count_before, count_after),
            mean_duration_us=_pair(busy_before * 1000 / count_before, busy_after * 1000 / count_after),
            busy_ms_per_step=_pair(busy_before, busy_after),
        ))
        moved = sum(d for _, d in rose)
        left_us = sum((k.mean_duration_us.before or 0.0) * d for k, d in fell) / sum(d for _, d in fell)
        went_us = sum((k.mean_duration_us.after or 0.0) * d for k, d in rose) / moved
        replaced.append(KernelChange(
            name=family,
            kind=kind,
            kernels_per_step=_pair(moved, moved),
            mean_duration_us=_pair(left_us, went_us),
            busy_ms_per_step=_pair(busy_before, busy_after),
        ))
    return sorted(replaced, key=_by_busy_change), sorted(folded, key=_by_busy_change)


def _by_busy_change(k: KernelChange) -> tuple[float, str]:
    return -abs(k.busy_ms_per_step.delta or 0.0), k.name


def _busy_by_cause(changes: list[KernelChange]) -> tuple[float, float]:
    """Split the change of busy ms per step into kernels added or removed (count change at
    the old duration, or the whole of a new or vanished name) and duration changes (the
    new count at the duration change)."""
    from_counts_us = 0.0
    from_durations_us = 0.0
    for k in changes:  # one pass per kernel name
        count_before, count_after = k.kernels_per_step.before or 0.0, k.kernels_per_step.after or 0.0
        duration_before, duration_after = k.mean_duration_us.before, k.mean_duration_us.after
        if duration_before is None:
            from_counts_us += count_after * (duration_after or 0.0)
        elif duration_after is None:
            from_counts_us -= count_before * duration_before
        else:
            from_counts_us += (count_after - count_before) * duration_before
            from_durations_us += count_after * (duration_after - duration_before)
    return from_counts_us / 1000, from_durations_us / 1000


def _pair_streams(base: list[StreamFigures], head: list[StreamFigures]) -> list[StreamChange]:
    pairs = []
    for rank, (b, a) in enumerate(zip_longest(base, head)):
        pairs.append(
            StreamChange(
                rank=rank,
                base_stream=b.stream if b else None,
                head_stream=a.stream if a else None,
                kernels_per_step=_pair(b.kernels_per_step if b else 0.0, a.kernels_per_step if a else 0.0),
                median_gap_us=_pair(b.median_gap_us if b else None, a.median_gap_us if a else None),
                p90_gap_us=_pair(b.p90_gap_us if b else None, a.p90_gap_us if a else None),
                mean_gap_us=_pair(b.mean_gap_us if b else None, a.mean_gap_us if a else None),
            )
        )
    return pairs


def _with_gaps(streams: list[StreamChange]) -> list[StreamChange]:
    return [s for s in streams if s.median_gap_us.delta is not None]


def _same_way(median_gap_us: BeforeAfter, streams: list[StreamChange]) -> int:
    if not median_gap_us.delta:
        return 0
    return sum(1 for s in _with_gaps(streams) if (s.median_gap_us.delta or 0.0) * median_gap_us.delta > 0)


def _gap_sum(gaps: GapChange, kernels_per_step: float) -> tuple[float | None, float | None]:
    """(by the median gap's change, by the mean's), in ms per step; None unless gaps widened."""
    median_delta_us, mean_delta_us = gaps.median_gap_us.delta, gaps.mean_gap_us.delta
    if median_delta_us is None or mean_delta_us is None:
        return None, None
    if median_delta_us < 0 or mean_delta_us < 0 or (median_delta_us == 0 and mean_delta_us == 0):
        return None, None
    return median_delta_us * kernels_per_step / 1000, mean_delta_us * kernels_per_step / 1000


def _launches(base: TraceFigures, head: TraceFigures) -> LaunchChange:
    graphs = _pair(base.graph_launches_per_step, head.graph_launches_per_step)
    kernels = _pair(base.kernel_launches_per_step, head.kernel_launches_per_step)
    fell_out = (
        base.graph_launches_per_step > 0
        and head.graph_launches_per_step < base.graph_launches_per_step - COUNT_TOLERANCE
        and head.kernel_launches_per_step > base.kernel_launches_per_step + COUNT_TOLERANCE
    )
    return LaunchChange(graph_launches_per_step=graphs, kernel_launches_per_step=kernels, fell_out_of_graphs=fell_out)
