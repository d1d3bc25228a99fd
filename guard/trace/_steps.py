"""Which decode step each GPU activity belongs to.

Three rules, tried in order:

- "annotation": host ranges named `guard.step` (the guard's harness wraps every profiled
  step in one) or else `ProfilerStep#N`. An activity belongs to the range that contains
  the start of the API call that launched it (same correlation id).
- "graph_launch": one step per `cudaGraphLaunch`, or per `launches / steps` consecutive
  launches when the caller gives `steps` (piecewise capture: one graph per layer). A
  step's host window runs from its first launch's start to its last launch's end.
- "count": the caller's step count; the kernels, in start order, are split into that
  many equal consecutive groups, and a step's GPU window runs from its first kernel's
  start to its last kernel's end.

Activities that fall in no step are dropped and counted; steps without a kernel are left
out with a warning.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from guard._errors import TraceError
from guard.trace._figures import StepsRule, TraceWarning
from guard.trace._model import KERNEL, ApiTable, RangeTable, Trace

GUARD_STEP_RANGE = "guard.step"
PROFILER_STEP_PREFIX = "ProfilerStep#"
# Runtime spelling first: a trace holding both would otherwise count each launch twice.
GRAPH_LAUNCH_PREFIXES = ("cudaGraphLaunch", "cuGraphLaunch")


@dataclass(frozen=True)
class StepAssignment:
    rule: StepsRule
    step_of_activity: np.ndarray  # int64 per row of trace.gpu; -1 when in no step
    # The host window of each step: API calls that start inside it are the step's calls.
    # An empty window (start > end) has no calls; it happens when nothing links GPU to host.
    window_start_ns: np.ndarray
    window_end_ns: np.ndarray
    launches_per_step: int | None = None
    warnings: list[TraceWarning] = field(default_factory=list)

    @property
    def steps(self) -> int:
        return len(self.window_start_ns)

    @property
    def dropped_activities(self) -> int:
        return int(np.count_nonzero(self.step_of_activity < 0))


def assign_steps(trace: Trace, steps: int | None = None) -> StepAssignment:
    """Assign every GPU activity of `trace` to a step; `steps` is the caller's step count."""
    if steps is not None and steps < 1:
        raise TraceError(f"--steps must be at least 1, not {steps}")
    if not np.any(trace.gpu.kind == KERNEL):
        raise TraceError(f"{trace.source} holds no GPU kernels: was the profiler recording CUDA activity?")

    ranges = _step_ranges(trace.ranges)
    if ranges is not None:
        assignment = _by_host_windows(trace, "annotation", *ranges)
        if steps is not None and steps != assignment.steps:
            assignment.warnings.append(TraceWarning(kind="steps_ignored", steps=steps, count=assignment.steps))
    elif np.any(launches := _graph_launch_mask(trace.api)):
        assignment = _by_graph_launch(trace, launches, steps)
    elif steps is not None:
        assignment = _by_count(trace, steps)
    else:
        raise TraceError(
            f"cannot tell the decode steps apart in {trace.source}: it has no '{GUARD_STEP_RANGE}' or "
            f"'{PROFILER_STEP_PREFIX}N' ranges and no cudaGraphLaunch calls; pass --steps N, "
            "the number of decode steps it holds"
        )
    return _without_empty_steps(trace, assignment)


def _launch_times_ns(trace: Trace) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For each GPU activity, the start and end of the API call that launched it, and
    whether one was found. Where a correlation id repeats, the earliest call wins: it is
    the outermost one (a runtime call around its driver call)."""
    api, gpu = trace.api, trace.gpu
    start = np.zeros(len(gpu), dtype=np.int64)
    end = np.zeros(len(gpu), dtype=np.int64)
    known = np.zeros(len(gpu), dtype=bool)
    linked = api.correlation >= 0
    if not np.any(linked) or len(gpu) == 0:
        return start, end, known
    correlation = api.correlation[linked]
    order = np.lexsort((api.start_ns[linked], correlation))
    unique_correlation, first = np.unique(correlation[order], return_index=True)
    call_start = api.start_ns[linked][order][first]
    call_end = api.end_ns[linked][order][first]
    at = np.minimum(np.searchsorted(unique_correlation, gpu.correlation), len(unique_correlation) - 1)
    known = (unique_correlation[at] == gpu.correlation) & (gpu.correlation >= 0)
    start[known] = call_start[at[known]]
    end[known] = call_end[at[known]]
    return start, end, known


def _window_of(times_ns: np.ndarray, window_start_ns: np.ndarray, window_end_ns: np.ndarray) -> np.ndarray:
    """Index of the window (sorted by start, not overlapping) that contains each time; -1 if none."""
    index = np.searchsorted(window_start_ns, times_ns, side="right") - 1
    inside = index >= 0
    inside[inside] = times_ns[inside] <= window_end_ns[index[inside]]
    return np.where(inside, index, -1)


def _step_ranges(ranges: RangeTable) -> tuple[np.ndarray, np.ndarray] | None:
    """Start and end of the host ranges that mark steps, `guard.step` preferred."""
    for wanted in (lambda name: name == GUARD_STEP_RANGE, lambda name: name.startswith(PROFILER_STEP_PREFIX)):
        ids = [i for i, name in enumerate(ranges.names) if wanted(name)]
        mask = np.isin(ranges.name_id, ids)
        if np.any(mask):
            order = np.argsort(ranges.start_ns[mask], kind="stable")
            return ranges.start_ns[mask][order], ranges.end_ns[mask][order]
    return None


def _graph_launch_mask(api: ApiTable) -> np.ndarray:
    for prefix in GRAPH_LAUNCH_PREFIXES:
        ids = [i for i, name in enumerate(api.names) if name.startswith(prefix)]
        mask = np.isin(api.name_id, ids)
        if np.any(mask):
            return mask
    return np.zeros(len(api), dtype=bool)


def _by_host_windows(trace: Trace, rule: StepsRule, window_start_ns: np.ndarray, window_end_ns: np.ndarray,
                     launches_per_step: int | None = None) -> StepAssignment:
    call_start_ns, _, known = _launch_times_ns(trace)
    step = np.where(known, _window_of(call_start_ns, window_start_ns, window_end_ns), -1)
    warnings = []
    if not np.all(known):
        warnings.append(TraceWarning(kind="unlinked_activities", count=int(np.count_nonzero(~known))))
    return StepAssignment(rule, step, window_start_ns, window_end_ns, launches_per_step, warnings)


def _by_graph_launch(trace: Trace, launches: np.ndarray, steps: int | None) -> StepAssignment:
    launch_start_ns = trace.api.start_ns[launches]
    launch_end_ns = trace.api.end_ns[launches]
    count = len(launch_start_ns)
    if steps is not None and count % steps != 0:
        raise TraceError(
            f"{trace.source} has {count} cudaGraphLaunch calls, which do not split into --steps {steps} "
            "equal groups; pass the number of decode steps the trace holds"
        )
    per_step = count // steps if steps is not None else 1
    return _by_host_windows(
        trace, "graph_launch", launch_start_ns[::per_step], launch_end_ns[per_step - 1 :: per_step], per_step
    )


def _by_count(trace: Trace, steps: int) -> StepAssignment:
    gpu = trace.gpu
    kernel_rows = np.flatnonzero(gpu.kind == KERNEL)
    kernel_rows = kernel_rows[np.argsort(gpu.start_ns[kernel_rows], kind="stable")]
    kernels = len(kernel_rows)
    if steps > kernels:
        raise TraceError(f"--steps {steps} is more than the {kernels} kernels in {trace.source}")
    warnings = []
    if kernels % steps:
        warnings.append(TraceWarning(kind="uneven_split", count=kernels, steps=steps))
    # Consecutive groups as equal as the count allows: kernel i goes to step i * steps // kernels.
    kernel_step = np.arange(kernels, dtype=np.int64) * steps // kernels
    first = np.searchsorted(kernel_step, np.arange(steps))
    gpu_start_ns = gpu.start_ns[kernel_rows][first]
    gpu_end_ns = np.maximum.reduceat(gpu.end_ns[kernel_rows], first)

    step = _window_of(gpu.start_ns, gpu_start_ns, gpu_end_ns)  # memcpy and memset by GPU time
    step[kernel_rows] = kernel_step

    # The host window: from the first to the last call that launched the step's activities.
    call_start_ns, call_end_ns, known = _launch_times_ns(trace)
    window_start_ns = np.full(steps, np.iinfo(np.int64).max, dtype=np.int64)
    window_end_ns = np.full(steps, np.iinfo(np.int64).min, dtype=np.int64)
    linked = known & (step >= 0)
    np.minimum.at(window_start_ns, step[linked], call_start_ns[linked])
    np.maximum.at(window_end_ns, step[linked], call_end_ns[linked])
    if not np.any(linked):
        warnings.append(TraceWarning(kind="no_api_links"))
    return StepAssignment("count", step, window_start_ns, window_end_ns, None, warnings)


def _without_empty_steps(trace: Trace, assignment: StepAssignment) -> StepAssignment:
    kernel_steps = assignment.step_of_activity[(trace.gpu.kind == KERNEL) & (assignment.step_of_activity >= 0)]
    has_kernels = np.bincount(kernel_steps, minlength=assignment.steps) > 0
    if not np.any(has_kernels):
        raise TraceError(
            f"no kernel of {trace.source} falls inside a step ({assignment.steps} found by rule "
            f"'{assignment.rule}'); check the step ranges, or pass --steps N"
        )
    if np.all(has_kernels):
        return assignment
    new_index = np.where(has_kernels, np.cumsum(has_kernels) - 1, -1)
    step = assignment.step_of_activity
    step = np.where(step >= 0, new_index[np.maximum(step, 0)], -1)
    empty = int(np.count_nonzero(~has_kernels))
    return StepAssignment(
        assignment.rule,
        step,
        assignment.window_start_ns[has_kernels],
        assignment.window_end_ns[has_kernels],
        assignment.launches_per_step,
        [*assignment.warnings, TraceWarning(kind="empty_steps", count=empty, steps=assignment.steps)],
    )
