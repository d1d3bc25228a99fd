"""The figures of one trace, as the report keeps them: plain numbers, no arrays.

How they are computed is guard/trace/_analyze.py; this module needs only pydantic, so that
reading a report needs neither numpy nor the trace readers.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

# How the trace was split into steps: see guard/trace/_steps.py.
StepsRule = Literal["annotation", "graph_launch", "count"]

# What a reader or the step split left out or could not do, as a kind and its figures; the
# words for each are made where they are shown (`_text.py` for the terminal).
TraceWarningKind = Literal[
    "untimed_events",  # Kineto complete events without 'ts' or 'dur', skipped: count
    "untimed_gpu_records",  # Nsight GPU records CUPTI could not time, skipped: count
    "no_runtime_table",  # Nsight export without its CUDA runtime table: kernels link to no launch
    "corrupt_records",  # records of `table` dropped: count, why (and limit_s for too_long)
    "steps_ignored",  # --steps `steps` given, the trace marks `count` steps with host ranges
    "unlinked_activities",  # GPU activities with no matching API call, so no step: count
    "uneven_split",  # `count` kernels do not split evenly into `steps` steps
    "no_api_links",  # no GPU activity links to an API call: API calls per step not counted
    "empty_steps",  # `count` of `steps` steps hold no kernel and are left out
    "outside_steps",  # GPU activities that fall in no step, left out: count
    "uneven_graph_steps",  # one step per graph launch gives steps of kernels_min to kernels_max kernels
    "several_devices",  # kernels of several devices: union, span and idle are taken across them
    "different_step_rules",  # the two traces of a diff split their steps by other rules: base_rule, head_rule
]
RecordTable = Literal["gpu", "api", "range"]
CorruptBecause = Literal["end_before_start", "end_before_start_or_too_long"]


class TraceWarning(BaseModel):
    kind: TraceWarningKind
    arm: Literal["base", "head"] | None = None  # in a diff: whose trace it is about
    count: int | None = None
    steps: int | None = None
    table: RecordTable | None = None
    why: CorruptBecause | None = None
    limit_s: int | None = None  # the longest a GPU record may last
    kernels_min: int | None = None
    kernels_max: int | None = None
    base_rule: StepsRule | None = None
    head_rule: StepsRule | None = None


class StreamFigures(BaseModel):
    """One stream, over all steps. Gaps are None for a stream with one activity per step."""

    device: int
    stream: int
    kernels_per_step: float  # its activities: kernels, copies and memsets (see TraceFigures)
    median_gap_us: float | None
    p90_gap_us: float | None
    mean_gap_us: float | None
    max_gap_us: float | None
    overlaps_per_step: float


class GapFigures(BaseModel):
    """The gaps of all streams pooled. The tail (p90, max, largest 1%) shows idle time added
    at a few boundaries, which can leave the median unchanged."""

    gaps_per_step: float
    median_gap_us: float | None
    p90_gap_us: float | None
    mean_gap_us: float | None
    max_gap_us: float | None
    gap_ms_per_step: float  # median over steps of the sum of a step's gaps
    largest_1pct_gaps_ms_per_step: float  # median over steps of the sum of its largest 1% of gaps
    overlaps_per_step: float


# What a GPU activity is: a kernel, a copy (memcpy) or a memset
GpuActivityKind = Literal["kernel", "memcpy", "memset"]


class KernelFigures(BaseModel):
    """One kernel name, over all steps; a copy's or memset's name too ("Memcpy DtoD (Device ->
    Device)", "Memset (Device)"), as part of the step's GPU work, with its kind."""

    name: str
    kind: GpuActivityKind = Field(default="kernel", exclude_if=lambda value: value == "kernel")  # no key for a kernel
    kernels_per_step: float
    mean_duration_us: float
    busy_ms_per_step: float


class StepSeries(BaseModel):
    """Every step's own figures, in step order."""

    kernels: list[int]
    memcpys: list[int]
    memsets: list[int]
    busy_ms: list[float]
    union_ms: list[float]
    span_ms: list[float]
    idle_ms: list[float]
    gap_ms: list[float]
    largest_1pct_gaps_ms: list[float]


class P90OverSteps(BaseModel):
    busy_ms_per_step: float
    union_ms_per_step: float
    span_ms_per_step: float
    idle_ms_per_step: float


class TraceFigures(BaseModel):
    """What one trace says about a decode step. Its GPU work is its kernels, copies (memcpy) and
    memsets: busy, the sum of their durations; union, time in which at least one runs; span,
    first start to last end; idle, span - union; gaps, streams and `kernels` (by name) over all
    of them. The counts per step keep kernels, memcpys and memsets apart. (Reports of schema 8
    and before measured kernels alone: a copy's time was idle there.)"""

    source: str
    format: str
    steps: int
    steps_rule: StepsRule
    launches_per_step: int | None = Field(None, description="graph launches per step, rule graph_launch only")
    kernels_per_step: float
    memcpys_per_step: float
    memsets_per_step: float
    busy_ms_per_step: float
    union_ms_per_step: float
    span_ms_per_step: float
    idle_ms_per_step: float
    p90: P90OverSteps
    streams: list[StreamFigures] = Field(description="ranked: kernels per step descending, then first appearance")
    gaps: GapFigures
    api_calls_per_step: dict[str, float]
    # host launches per step, from the API calls: a step captured in CUDA graphs launches a few
    # graphs and almost no kernels; one that fell out of its graphs launches every kernel itself
    graph_launches_per_step: float = 0.0
    kernel_launches_per_step: float = 0.0
    kernels: list[KernelFigures] = Field(description="by name, busiest first")
    per_step: StepSeries
    dropped_activities: int
    warnings: list[TraceWarning]
