"""Analysing one trace: its figures per step, then summarised over steps.

A step's GPU work is every activity assigned to it: its kernels, and its copies (memcpy) and
memsets, which the same code makes in their place where a tensor is contiguous (a copy at batch
size 1 is often a copy kernel at 2). Times, gaps and the figures by name measure all of them,
so that a copy added is work added, not idle time between kernels; the counts per step keep
kernels, copies and memsets apart.

Counts (kernels, API calls) are means over steps, total / steps, so that a count that
differs in one step shows. Times are medians over steps, with the p90 beside them. Gaps
are measured per stream within a step: an activity's start minus the latest end of the
earlier activities of its stream; a negative gap is an overlap and is counted apart.

Everything runs on the columnar arrays in integer nanoseconds; only the figures handed
out are floats (us or ms), unrounded.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from guard.trace._figures import GapFigures, KernelFigures, P90OverSteps, StepSeries, StreamFigures, TraceFigures
from guard.trace._figures import GpuActivityKind, TraceWarning
from guard.trace._model import KERNEL, MEMCPY, MEMSET, GpuTable, Trace
from guard.trace._steps import StepAssignment, assign_steps

NS_PER_US = 1_000
NS_PER_MS = 1_000_000
TAIL_FRACTION = 0.01  # the largest 1% of a step's gaps: where a few added boundaries show


def analyze(trace: Trace, steps: int | None = None) -> TraceFigures:
    """Split `trace` into decode steps (see guard.trace._steps) and measure each."""
    assignment = assign_steps(trace, steps)
    step_count = assignment.steps
    work = _work_in_steps(trace.gpu, assignment.step_of_activity)
    streams, gaps, gap_series = _stream_figures(work, step_count)
    per_step = _step_series(trace.gpu, assignment.step_of_activity, work, step_count, gap_series)
    api_calls = _api_calls_per_step(trace, assignment)
    return TraceFigures(
        source=trace.source,
        format=trace.format,
        steps=step_count,
        steps_rule=assignment.rule,
        launches_per_step=assignment.launches_per_step,
        kernels_per_step=sum(per_step.kernels) / step_count,
        memcpys_per_step=sum(per_step.memcpys) / step_count,
        memsets_per_step=sum(per_step.memsets) / step_count,
        busy_ms_per_step=float(np.median(per_step.busy_ms)),
        union_ms_per_step=float(np.median(per_step.union_ms)),
        span_ms_per_step=float(np.median(per_step.span_ms)),
        idle_ms_per_step=float(np.median(per_step.idle_ms)),
        p90=P90OverSteps(
            busy_ms_per_step=float(np.percentile(per_step.busy_ms, 90)),
            union_ms_per_step=float(np.percentile(per_step.union_ms, 90)),
            span_ms_per_step=float(np.percentile(per_step.span_ms, 90)),
            idle_ms_per_step=float(np.percentile(per_step.idle_ms, 90)),
        ),
        streams=streams,
        gaps=gaps,
        api_calls_per_step=api_calls,
        graph_launches_per_step=launches_per_step(api_calls, GRAPH_LAUNCH_API),
        kernel_launches_per_step=launches_per_step(api_calls, KERNEL_LAUNCH_API),
        kernels=_kernel_figures(work, trace.gpu.names, step_count),
        per_step=per_step,
        dropped_activities=assignment.dropped_activities,
        warnings=_warnings(trace, assignment, per_step.kernels, work),
    )


def _work_in_steps(gpu: GpuTable, step: np.ndarray) -> _Work:
    """The GPU activities that `step` (each activity's step, -1 for none) puts in a step."""
    in_step = step >= 0
    return _Work(  # the step's GPU work: kernels, copies and memsets
        step=step[in_step],
        kind=gpu.kind[in_step],
        start_ns=gpu.start_ns[in_step],
        end_ns=gpu.end_ns[in_step],
        device=gpu.device[in_step],
        stream=gpu.stream[in_step],
        name_id=gpu.name_id[in_step],
    )


def _step_series(
    gpu: GpuTable, step: np.ndarray, work: _Work, step_count: int, gap_series: tuple[np.ndarray, np.ndarray]
) -> StepSeries:
    """Each step's counts, busy, union, span and idle time, and its gap figures `gap_series` in ms."""
    busy_ns = np.bincount(work.step, weights=work.end_ns - work.start_ns, minlength=step_count)
    union_ns, span_ns = _union_and_span_ns(work, step_count)
    return StepSeries(
        kernels=_count_kind(gpu.kind, step, KERNEL, step_count).tolist(),
        memcpys=_count_kind(gpu.kind, step, MEMCPY, step_count).tolist(),
        memsets=_count_kind(gpu.kind, step, MEMSET, step_count).tolist(),
        busy_ms=(busy_ns / NS_PER_MS).tolist(),
        union_ms=(union_ns / NS_PER_MS).tolist(),
        span_ms=(span_ns / NS_PER_MS).tolist(),
        idle_ms=((span_ns - union_ns) / NS_PER_MS).tolist(),
        gap_ms=(gap_series[0] / NS_PER_MS).tolist(),
        largest_1pct_gaps_ms=(gap_series[1] / NS_PER_MS).tolist(),
    )


def _warnings(trace: Trace, assignment: StepAssignment, kernels: list[int], work: _Work) -> list[TraceWarning]:
    """The trace's and the step split's warnings, then what the steps' work shows."""
    warnings = [*trace.warnings, *assignment.warnings]
    if assignment.dropped_activities:
        warnings.append(TraceWarning(kind="outside_steps", count=assignment.dropped_activities))
    if assignment.launches_per_step == 1 and min(kernels) != max(kernels):
        warnings.append(TraceWarning(kind="uneven_graph_steps", kernels_min=min(kernels), kernels_max=max(kernels)))
    if len(np.unique(work.device)) > 1:
        warnings.append(TraceWarning(kind="several_devices"))
    return warnings


@dataclass(frozen=True)
class _Work:
    """The GPU activities (kernels, copies, memsets) that fall in a step, as parallel arrays
    (in the trace's start order)."""

    step: np.ndarray
    kind: np.ndarray  # KERNEL, MEMCPY, MEMSET
    start_ns: np.ndarray
    end_ns: np.ndarray
    device: np.ndarray
    stream: np.ndarray
    name_id: np.ndarray


def _count_kind(kind: np.ndarray, step: np.ndarray, wanted: int, step_count: int) -> np.ndarray:
    return np.bincount(step[(kind == wanted) & (step >= 0)], minlength=step_count)


def _segment_starts(segment: np.ndarray) -> np.ndarray:
    """True where a sorted segment id array begins a new segment."""
    first = np.ones(len(segment), dtype=bool)
    first[1:] = segment[1:] != segment[:-1]
    return first


def _running_max_in_segments(values_ns: np.ndarray, first: np.ndarray) -> np.ndarray:
    """Inclusive running maximum that restarts where `first` is True."""
    segment_rank = np.cumsum(first) - 1
    low = values_ns.min()
    width = int(values_ns.max() - low) + 1
    if (int(segment_rank[-1]) + 1) * width < 2**62:
        # Lift each segment above every earlier one, so one accumulate never crosses a boundary.
        lift = segment_rank * width
        return np.maximum.accumulate(values_ns - low + lift) - lift + low
    out = np.empty_like(values_ns)
    bounds = [*np.flatnonzero(first).tolist(), len(values_ns)]
    for begin, stop in zip(bounds[:-1], bounds[1:]):
        out[begin:stop] = np.maximum.accumulate(values_ns[begin:stop])
    return out


def _gaps_ns(start_ns: np.ndarray, end_ns: np.ndarray, first: np.ndarray) -> np.ndarray:
    """Start minus the latest end before it in the segment; rows sorted by (segment, start).
    The first row of a segment has no gap; its value is meaningless and masked by callers."""
    latest_end_ns = _running_max_in_segments(end_ns, first)
    gaps = np.empty_like(start_ns)
    gaps[0] = 0
    gaps[1:] = start_ns[1:] - latest_end_ns[:-1]
    return gaps


def _union_and_span_ns(work: _Work, step_count: int) -> tuple[np.ndarray, np.ndarray]:
    order = np.lexsort((work.start_ns, work.step))
    step = work.step[order]
    start_ns = work.start_ns[order]
    end_ns = work.end_ns[order]
    first = _segment_starts(step)
    gaps = _gaps_ns(start_ns, end_ns, first)
    # An activity adds to the union only what runs past every earlier one of its step.
    covered_from_ns = np.where(first | (gaps > 0), start_ns, start_ns - gaps)
    union_ns = np.bincount(step, weights=np.maximum(end_ns - covered_from_ns, 0), minlength=step_count)
    last = np.append(np.flatnonzero(first)[1:] - 1, len(step) - 1)
    span_ns = np.zeros(step_count)
    span_ns[step[last]] = _running_max_in_segments(end_ns, first)[last] - start_ns[first]
    return union_ns, span_ns


def _stream_figures(work: _Work, step_count: int
                    ) -> tuple[list[StreamFigures], GapFigures, tuple[np.ndarray, np.ndarray]]:
    stream_keys, stream_index, first_seen = _stream_index(work.device, work.stream)
    stream_count = len(stream_keys)
    order = np.lexsort((work.start_ns, stream_index, work.step))
    step = work.step[order]
    stream = stream_index[order]
    first = _segment_starts(step * stream_count + stream)
    gaps = _gaps_ns(work.start_ns[order], work.end_ns[order], first)
    overlap = ~first & (gaps < 0)
    is_gap = ~first & (gaps >= 0)
    gap_ns, gap_step, gap_stream = gaps[is_gap], step[is_gap], stream[is_gap]

    kernels_per_stream = np.bincount(stream_index, minlength=stream_count)
    overlaps_per_stream = np.bincount(stream[overlap], minlength=stream_count)
    by_stream = np.lexsort((gap_ns, gap_stream))
    sorted_gap_ns = gap_ns[by_stream]
    bounds = np.searchsorted(gap_stream[by_stream], np.arange(stream_count + 1))
    rank = np.lexsort((first_seen, -kernels_per_stream))
    streams = []
    for s in rank.tolist():  # one pass per stream: a handful, never per kernel
        stats = _gap_stats_us(sorted_gap_ns[bounds[s] : bounds[s + 1]])
        streams.append(
            StreamFigures(
                device=int(stream_keys[s][0]),
                stream=int(stream_keys[s][1]),
                kernels_per_step=kernels_per_stream[s] / step_count,
                median_gap_us=stats[0],
                p90_gap_us=stats[1],
                mean_gap_us=stats[2],
                max_gap_us=stats[3],
                overlaps_per_step=overlaps_per_stream[s] / step_count,
            )
        )

    gap_sum_ns = np.bincount(gap_step, weights=gap_ns, minlength=step_count)
    tail_sum_ns = _largest_gaps_sum_ns(gap_ns, gap_step, step_count)
    pooled = _gap_stats_us(np.sort(gap_ns))
    gap_figures = GapFigures(
        gaps_per_step=len(gap_ns) / step_count,
        median_gap_us=pooled[0],
        p90_gap_us=pooled[1],
        mean_gap_us=pooled[2],
        max_gap_us=pooled[3],
        gap_ms_per_step=float(np.median(gap_sum_ns)) / NS_PER_MS,
        largest_1pct_gaps_ms_per_step=float(np.median(tail_sum_ns)) / NS_PER_MS,
        overlaps_per_step=int(np.count_nonzero(overlap)) / step_count,
    )
    return streams, gap_figures, (gap_sum_ns, tail_sum_ns)


def _stream_index(device: np.ndarray, stream: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Distinct (device, stream) pairs, each activity's pair index, and where each pair first
    appears in the activities' start order."""
    # One int64 key per pair: unique() over rows (axis=0) is several times slower
    devices, device_index = np.unique(device, return_inverse=True)
    streams, stream_index = np.unique(stream, return_inverse=True)
    pair_key = device_index.reshape(-1).astype(np.int64) * len(streams) + stream_index.reshape(-1)
    unique_keys, first_seen, index = np.unique(pair_key, return_index=True, return_inverse=True)
    keys = np.stack([devices[unique_keys // len(streams)], streams[unique_keys % len(streams)]], axis=1)
    return keys, index.reshape(-1), first_seen


def _gap_stats_us(sorted_gap_ns: np.ndarray) -> tuple[float | None, float | None, float | None, float | None]:
    """Median, p90, mean and max in us; all None when there is no gap."""
    if len(sorted_gap_ns) == 0:
        return None, None, None, None
    median, p90 = np.percentile(sorted_gap_ns, [50, 90])
    return (
        float(median) / NS_PER_US,
        float(p90) / NS_PER_US,
        float(sorted_gap_ns.mean()) / NS_PER_US,
        float(sorted_gap_ns[-1]) / NS_PER_US,
    )


def _largest_gaps_sum_ns(gap_ns: np.ndarray, gap_step: np.ndarray, step_count: int) -> np.ndarray:
    """Per step, the sum of its largest 1% of gaps (at least one gap when it has any)."""
    order = np.lexsort((-gap_ns, gap_step))
    step = gap_step[order]
    per_step = np.bincount(step, minlength=step_count)
    wanted = np.ceil(per_step * TAIL_FRACTION).astype(np.int64)
    rank_in_step = np.arange(len(step)) - np.searchsorted(step, step)
    keep = rank_in_step < wanted[step]
    return np.bincount(step[keep], weights=gap_ns[order][keep], minlength=step_count)


# The runtime and driver calls that launch work, as the PyTorch profiler and Nsight Systems
# name them (Nsight appends a version: cudaGraphLaunch_v10000, cudaLaunchKernel_v7000).
GRAPH_LAUNCH_API = re.compile(r"^(?:cuda|cu|hip)GraphLaunch")
KERNEL_LAUNCH_API = re.compile(r"^(?:cudaLaunchKernel|cuLaunchKernel|cudaLaunchCooperativeKernel|hipLaunchKernel"
                               r"|hipModuleLaunchKernel|hipExtModuleLaunchKernel)")


def launches_per_step(api_calls_per_step: dict[str, float], api: re.Pattern[str]) -> float:
    return sum(count for name, count in api_calls_per_step.items() if api.match(name))


def _api_calls_per_step(trace: Trace, assignment: StepAssignment) -> dict[str, float]:
    """Calls that start inside each step's host window, by name, as a mean per step."""
    api = trace.api
    totals: dict[str, int] = {}
    for name_id in np.unique(api.name_id).tolist():  # one pass per API name, not per call
        call_start_ns = np.sort(api.start_ns[api.name_id == name_id])
        inside = np.searchsorted(call_start_ns, assignment.window_end_ns, side="right") - np.searchsorted(
            call_start_ns, assignment.window_start_ns, side="left"
        )
        count = int(np.maximum(inside, 0).sum())
        if count:
            name = api.names[name_id]
            totals[name] = totals.get(name, 0) + count
    ordered = sorted(totals.items(), key=lambda item: (-item[1], item[0]))
    return {name: count / assignment.steps for name, count in ordered}


def _kernel_figures(work: _Work, names: list[str], step_count: int) -> list[KernelFigures]:
    count = np.bincount(work.name_id, minlength=len(names))
    busy_ns = np.bincount(work.name_id, weights=work.end_ns - work.start_ns, minlength=len(names))
    kind_of = np.zeros(len(names), dtype=np.int8)
    kind_of[work.name_id] = work.kind  # a name is one kind's: a reader names copies and memsets apart
    by_name: dict[str, tuple[int, float, int]] = {}
    for name_id in np.flatnonzero(count).tolist():  # one pass per name
        name = names[name_id]
        seen_count, seen_busy, kind = by_name.get(name, (0, 0.0, int(kind_of[name_id])))
        by_name[name] = (seen_count + int(count[name_id]), seen_busy + float(busy_ns[name_id]), kind)
    figures = [
        KernelFigures(
            name=name,
            kind=_KIND_NAMES[kind],
            kernels_per_step=n / step_count,
            mean_duration_us=busy / n / NS_PER_US,
            busy_ms_per_step=busy / step_count / NS_PER_MS,
        )
        for name, (n, busy, kind) in by_name.items()
    ]
    return sorted(figures, key=lambda kernel: (-kernel.busy_ms_per_step, kernel.name))


_KIND_NAMES: dict[int, GpuActivityKind] = {KERNEL: "kernel", MEMCPY: "memcpy", MEMSET: "memset"}
