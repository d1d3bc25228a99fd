"""One profiled pass over several ranks: each rank's trace split into steps, its communication
apart from its compute, and the ranks set side by side step by step.

A rank's trace is split by the single-trace rule (guard/trace/_steps.py). Its activities are
its GPU kernels; a trace without kernels (a CPU-only run, gloo) is taken as host work instead:
the outermost CPU ops of each thread and gloo's collectives, each in the step range
(`guard.step` or `ProfilerStep#N`) in which it starts. guard/trace/_comms.py says which are
communication.

The ranks are compared by durations only (see guard/trace/_rank_figures.py): a rank's wait
for the slowest is its communication time beyond the least of any rank in the same step, since
a collective's kernel (or gloo's work) runs until every rank has joined: the rank that arrives
last waits least in it, and every other rank's collectives are longer by the time it waited.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from guard._errors import TraceError
from guard._types import MAX_TRACE_BYTES
from guard.trace._analyze import (
    GRAPH_LAUNCH_API,
    KERNEL_LAUNCH_API,
    NS_PER_MS,
    NS_PER_US,
    _api_calls_per_step,
    _gaps_ns,
    _Work,
    _running_max_in_segments,
    _segment_starts,
    _stream_index,
    _union_and_span_ns,
    launches_per_step,
)
from guard.trace._comms import is_communication_host_op, is_communication_kernel
from guard.trace._figures import StepsRule, TraceWarning
from guard.trace._model import KERNEL, RangeTable, Trace
from guard.trace._rank_figures import ActivityKind, RankFigures, RankStepSeries, RankTraces, RankWarning
from guard.trace._read import read_trace
from guard.trace._steps import GUARD_STEP_RANGE, PROFILER_STEP_PREFIX, _step_ranges, _window_of, assign_steps

# A step has a straggler when some rank waited for it longer than this share of the step:
# below, which rank arrived last is the timer's and the scheduler's noise
STRAGGLER_MIN_WAIT_SHARE = 0.02


def analyze_ranks(traces: dict[int, Path], profile_steps: int, max_bytes: int = MAX_TRACE_BYTES) -> RankTraces:
    """`traces[rank]` is that rank's trace of one profiled pass of `profile_steps` steps."""
    if not traces:
        raise TraceError("no rank traces to analyse: give one trace per rank of the profiled pass")
    if profile_steps < 1:
        raise TraceError(f"profile steps must be at least 1, not {profile_steps}")
    measured = {rank: _measure(read_trace(path, max_bytes, host_ops=True), profile_steps)
                for rank, path in sorted(traces.items())}
    warnings = []
    counts = {rank: m.steps for rank, m in measured.items()}
    steps = min(counts.values())
    if len(set(counts.values())) > 1:
        warnings.append(RankWarning(kind="step_counts_differ", steps=steps, steps_by_rank=counts))
    if len({m.activities for m in measured.values()}) > 1:
        warnings.append(RankWarning(kind="activities_differ"))
    warnings += [RankWarning(kind="no_communication", rank=rank)
                 for rank, m in measured.items() if not np.any(m.communication_ns[:steps] > 0)]

    ranks = list(measured)
    communication_ns = np.stack([measured[r].communication_ns[:steps] for r in ranks])
    overlap_ns = np.stack([measured[r].overlap_ns[:steps] for r in ranks])
    exposed_ns = communication_ns - overlap_ns
    span_ns = np.stack([measured[r].span_ns[:steps] for r in ranks])
    # a rank without communication in a step joined no collective there: it is no one's measure
    joined = np.where(communication_ns > 0, communication_ns, np.inf)
    least_ns = joined.min(axis=0)
    wait_ns = np.where(communication_ns > 0, communication_ns - np.where(np.isfinite(least_ns), least_ns, 0), 0)
    step_ns = span_ns.max(axis=0)
    step_wait_ns = wait_ns.max(axis=0)
    has_straggler = step_wait_ns > STRAGGLER_MIN_WAIT_SHARE * step_ns
    last_in = joined.argmin(axis=0)  # ties go to the lowest rank
    straggler = [ranks[i] if has else None for i, has in zip(last_in.tolist(), has_straggler.tolist())]
    beyond_wait_ns = np.median(np.maximum(exposed_ns - wait_ns, 0), axis=0)
    overlapped_ns = np.median(overlap_ns, axis=0)

    figures = [
        _rank_figures(rank, measured[rank], steps, wait_ns[i], sum(s == rank for s in straggler))
        for i, rank in enumerate(ranks)
    ]
    total_communication_ns = float(communication_ns.sum())
    return RankTraces(
        profile_steps=profile_steps,
        steps=steps,
        ranks=figures,
        step_ms=_ms(step_ns),
        wait_ms=_ms(step_wait_ns),
        exposed_communication_ms=_ms(beyond_wait_ns),
        overlapped_communication_ms=_ms(overlapped_ns),
        straggler=straggler,
        step_ms_per_step=_median_ms(step_ns),
        wait_ms_per_step=_median_ms(step_wait_ns),
        exposed_communication_ms_per_step=_median_ms(beyond_wait_ns),
        overlapped_communication_ms_per_step=_median_ms(overlapped_ns),
        communication_ms_per_step=_median_ms(communication_ns.mean(axis=0)),
        overlap_share=(float(overlap_ns.sum()) / total_communication_ns
                       if total_communication_ns > 0 else None),
        warnings=warnings,
    )


@dataclass(frozen=True)
class _Activities:
    """A rank's activities in steps, as parallel arrays: kernels, or outermost host ops."""

    step: np.ndarray
    start_ns: np.ndarray
    end_ns: np.ndarray
    lane: np.ndarray  # stream (of a device) or host thread, as an index
    name_id: np.ndarray
    names: list[str]
    communication: np.ndarray  # bool


@dataclass(frozen=True)
class _Measured:
    """One rank's figures per step, in ns, before the ranks are aligned."""

    source: str
    activities: ActivityKind
    rule: StepsRule
    steps: int
    count: np.ndarray
    communication_count: np.ndarray
    compute_ns: np.ndarray
    communication_ns: np.ndarray
    overlap_ns: np.ndarray
    span_ns: np.ndarray
    idle_ns: np.ndarray
    gap_ns: np.ndarray
    activity: _Activities
    graph_launches_per_step: float = 0.0
    kernel_launches_per_step: float = 0.0
    warnings: list[TraceWarning] = field(default_factory=list)


def _measure(trace: Trace, profile_steps: int) -> _Measured:
    if np.any(trace.gpu.kind == KERNEL):
        return _measure_kernels(trace, profile_steps)
    return _measure_host(trace)


def _measure_kernels(trace: Trace, profile_steps: int) -> _Measured:
    assignment = assign_steps(trace, profile_steps)
    gpu = trace.gpu
    keep = (gpu.kind == KERNEL) & (assignment.step_of_activity >= 0)
    _, lane, _ = _stream_index(gpu.device[keep], gpu.stream[keep])
    is_communication = np.array([is_communication_kernel(name) for name in gpu.names], dtype=bool)
    activity = _Activities(
        step=assignment.step_of_activity[keep],
        start_ns=gpu.start_ns[keep],
        end_ns=gpu.end_ns[keep],
        lane=lane,
        name_id=gpu.name_id[keep],
        names=gpu.names,
        communication=is_communication[gpu.name_id[keep]] if len(gpu.names) else np.zeros(0, dtype=bool),
    )
    warnings = [*trace.warnings, *assignment.warnings]
    if assignment.dropped_activities:
        warnings.append(TraceWarning(kind="outside_steps", count=assignment.dropped_activities))
    if len(np.unique(gpu.device[keep])) > 1:
        warnings.append(TraceWarning(kind="several_devices"))
    calls = _api_calls_per_step(trace, assignment)
    return _per_step(trace.source, "gpu_kernels", assignment.rule, assignment.steps, activity, warnings,
                     launches_per_step(calls, GRAPH_LAUNCH_API), launches_per_step(calls, KERNEL_LAUNCH_API))


def _measure_host(trace: Trace) -> _Measured:
    """A CPU-only trace: the outermost ops of each thread, and the collectives gloo runs on its own threads."""
    windows = _step_ranges(trace.ranges)
    if windows is None:
        raise TraceError(
            f"cannot tell the steps apart in {trace.source}: a trace without GPU kernels is split by its "
            f"'{GUARD_STEP_RANGE}' or '{PROFILER_STEP_PREFIX}N' ranges, and it has none; record each step in one "
            "(torch.profiler with a schedule and prof.step(), or record_function)"
        )
    ops = trace.host_ops if trace.host_ops is not None else _empty_ranges()
    collectives = np.array([is_communication_host_op(name) for name in trace.ranges.names], dtype=bool)
    marked = collectives[trace.ranges.name_id] if len(trace.ranges.names) else np.zeros(0, dtype=bool)
    names = [*ops.names, *trace.ranges.names]
    start_ns = np.concatenate([ops.start_ns, trace.ranges.start_ns[marked]])
    end_ns = np.concatenate([ops.end_ns, trace.ranges.end_ns[marked]])
    tid = np.concatenate([ops.tid, trace.ranges.tid[marked]])
    name_id = np.concatenate([ops.name_id, trace.ranges.name_id[marked] + len(ops.names)]).astype(np.int64)

    outermost = _outermost(start_ns, end_ns, tid)
    step = _window_of(start_ns, *windows)
    keep = outermost & (step >= 0)
    if not np.any(keep):
        raise TraceError(
            f"no CPU op of {trace.source} falls inside a step range; was the profiler recording CPU activity "
            "during the steps?"
        )
    # steps are aligned by index across ranks: a step without work stays, as the others hold it too
    is_communication = np.array([is_communication_host_op(name) for name in names], dtype=bool)
    _, lane = np.unique(tid[keep], return_inverse=True)
    activity = _Activities(
        step=step[keep],
        start_ns=start_ns[keep],
        end_ns=end_ns[keep],
        lane=lane.reshape(-1),
        name_id=name_id[keep],
        names=names,
        communication=is_communication[name_id[keep]],
    )
    return _per_step(trace.source, "host_ops", "annotation", len(windows[0]), activity, list(trace.warnings))


def _empty_ranges() -> RangeTable:
    empty = np.empty(0, dtype=np.int64)
    return RangeTable(start_ns=empty, end_ns=empty, tid=empty, name_id=np.empty(0, dtype=np.int32), names=[])


def _outermost(start_ns: np.ndarray, end_ns: np.ndarray, tid: np.ndarray) -> np.ndarray:
    """True for the ops that no earlier op of their thread encloses (an op inside aten::matmul is its part)."""
    if len(start_ns) == 0:
        return np.zeros(0, dtype=bool)
    order = np.lexsort((-end_ns, start_ns, tid))  # an enclosing op before the ops it holds
    first = _segment_starts(tid[order])
    inside = np.zeros(len(order), dtype=bool)
    latest_end_ns = _running_max_in_segments(end_ns[order], first)
    inside[1:] = ~first[1:] & (start_ns[order][1:] < latest_end_ns[:-1])
    outermost = np.empty(len(order), dtype=bool)
    outermost[order] = ~inside
    return outermost


def _per_step(source: str, activities: ActivityKind, rule: StepsRule, steps: int, activity: _Activities,
              warnings: list[TraceWarning], graph_launches: float = 0.0, kernel_launches: float = 0.0) -> _Measured:
    comm = activity.communication
    all_ns, span_ns = _union_span_ns(activity, np.ones(len(comm), dtype=bool), steps)
    communication_ns, _ = _union_span_ns(activity, comm, steps)
    compute_ns, _ = _union_span_ns(activity, ~comm, steps)
    gap_ns, _ = _lane_gaps_ns(activity, steps)
    return _Measured(
        source=source,
        activities=activities,
        rule=rule,
        steps=steps,
        count=np.bincount(activity.step, minlength=steps),
        communication_count=np.bincount(activity.step[comm], minlength=steps),
        compute_ns=compute_ns,
        communication_ns=communication_ns,
        # what runs while both run: |compute| + |communication| - |either|
        overlap_ns=np.maximum(compute_ns + communication_ns - all_ns, 0),
        span_ns=span_ns,
        idle_ns=span_ns - all_ns,
        gap_ns=gap_ns,
        activity=activity,
        graph_launches_per_step=graph_launches,
        kernel_launches_per_step=kernel_launches,
        warnings=warnings,
    )


def _union_span_ns(activity: _Activities, rows: np.ndarray, steps: int) -> tuple[np.ndarray, np.ndarray]:
    """Per step, the time in which at least one of the `rows` runs, and their span."""
    if not np.any(rows):
        return np.zeros(steps), np.zeros(steps)
    step = activity.step[rows]
    zeros = np.zeros(len(step), dtype=np.int64)
    part = _Work(step=step, kind=zeros, start_ns=activity.start_ns[rows], end_ns=activity.end_ns[rows],
                 device=zeros, stream=activity.lane[rows], name_id=zeros)
    return _union_and_span_ns(part, steps)


def _lane_gaps_ns(activity: _Activities, steps: int) -> tuple[np.ndarray, np.ndarray]:
    """The sum per step of the gaps between consecutive activities of a lane, and every gap."""
    if len(activity.step) == 0:
        return np.zeros(steps), np.zeros(0, dtype=np.int64)
    lanes = int(activity.lane.max()) + 1
    order = np.lexsort((activity.start_ns, activity.lane, activity.step))
    step = activity.step[order]
    first = _segment_starts(step * lanes + activity.lane[order])
    gaps = _gaps_ns(activity.start_ns[order], activity.end_ns[order], first)
    is_gap = ~first & (gaps >= 0)  # a negative one is an overlap on the lane, not a gap
    return np.bincount(step[is_gap], weights=gaps[is_gap], minlength=steps), gaps[is_gap]


def _rank_figures(rank: int, m: _Measured, steps: int, wait_ns: np.ndarray, straggler_steps: int) -> RankFigures:
    cut = slice(0, steps)
    communication_ns = m.communication_ns[cut]
    overlap_ns = m.overlap_ns[cut]
    exposed_ns = communication_ns - overlap_ns
    activity = _first_steps(m.activity, steps)
    by_name: dict[str, int] = {}
    ids, counts = np.unique(activity.name_id[activity.communication], return_counts=True)
    for name_id, n in zip(ids.tolist(), counts.tolist()):
        name = activity.names[name_id]
        by_name[name] = by_name.get(name, 0) + n
    total_communication_ns = float(communication_ns.sum())
    _, gaps_ns = _lane_gaps_ns(activity, steps)
    return RankFigures(
        rank=rank,
        source=m.source,
        activities=m.activities,
        steps_rule=m.rule,
        activities_per_step=float(m.count[cut].sum()) / steps,
        communication_per_step={name: n / steps for name, n in sorted(by_name.items(), key=lambda kv: (-kv[1], kv[0]))},
        compute_ms_per_step=_median_ms(m.compute_ns[cut]),
        communication_ms_per_step=_median_ms(communication_ns),
        overlap_share=float(overlap_ns.sum()) / total_communication_ns if total_communication_ns > 0 else None,
        exposed_communication_ms_per_step=_median_ms(exposed_ns),
        span_ms_per_step=_median_ms(m.span_ns[cut]),
        idle_ms_per_step=_median_ms(m.idle_ns[cut]),
        gap_ms_per_step=_median_ms(m.gap_ns[cut]),
        median_gap_us=float(np.median(gaps_ns)) / NS_PER_US if len(gaps_ns) else None,
        wait_ms_per_step=_median_ms(wait_ns),
        straggler_steps=straggler_steps,
        graph_launches_per_step=m.graph_launches_per_step,
        kernel_launches_per_step=m.kernel_launches_per_step,
        per_step=RankStepSeries(
            activities=m.count[cut].tolist(),
            communication_activities=m.communication_count[cut].tolist(),
            compute_ms=_ms(m.compute_ns[cut]),
            communication_ms=_ms(communication_ns),
            overlap_ms=_ms(overlap_ns),
            exposed_communication_ms=_ms(exposed_ns),
            span_ms=_ms(m.span_ns[cut]),
            idle_ms=_ms(m.idle_ns[cut]),
            gap_ms=_ms(m.gap_ns[cut]),
            wait_ms=_ms(wait_ns),
        ),
        warnings=m.warnings,
    )


def _first_steps(activity: _Activities, steps: int) -> _Activities:
    """The activities of the first `steps` steps: those all ranks hold."""
    kept = activity.step < steps
    return _Activities(activity.step[kept], activity.start_ns[kept], activity.end_ns[kept], activity.lane[kept],
                       activity.name_id[kept], activity.names, activity.communication[kept])


def _ms(values_ns: np.ndarray) -> list[float]:
    return (np.asarray(values_ns, dtype=np.float64) / NS_PER_MS).tolist()


def _median_ms(values_ns: np.ndarray) -> float:
    return float(np.median(values_ns)) / NS_PER_MS if len(values_ns) else 0.0
