"""The figures of one profiled pass over several ranks, as the report keeps them: plain numbers.

How they are computed is guard/trace/_ranks.py; this module needs only pydantic.

Every figure of a rank is a duration within that rank's own trace: no timestamp of one
process is ever compared with another's, so clocks that differ between processes do not matter.
Steps are aligned by index: step k of every rank is the same decode step, since each rank runs
the same collectives in the same order.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from guard.trace._figures import StepsRule, TraceWarning

# What a rank's activities are: GPU kernels, or on a CPU-only trace (gloo) the host's ops
ActivityKind = Literal["gpu_kernels", "host_ops"]

RankWarningKind = Literal[
    "step_counts_differ",  # the ranks' traces hold different step counts: the first `steps` of each are aligned
    "no_communication",  # `rank`'s trace holds no communication activity: no overlap, no wait
    "activities_differ",  # some ranks' traces hold GPU kernels, others only host ops
    "world_sizes_differ",  # in a diff: base and head ran with other rank counts (base_ranks, head_ranks)
]


class RankWarning(BaseModel):
    kind: RankWarningKind
    rank: int | None = None
    steps: int | None = None
    steps_by_rank: dict[int, int] | None = None
    base_ranks: int | None = None
    head_ranks: int | None = None


class RankStepSeries(BaseModel):
    """One rank's own figures, step by step (aligned steps only).

    compute: time in which a compute activity runs (union over streams or threads);
    communication: likewise for communication activities; overlap: time in which both run;
    exposed communication: communication - overlap; span: first activity start to last end;
    idle: span minus the time in which any activity runs; gap: the sum of the gaps between
    consecutive activities of each stream (thread); wait: this rank's communication time
    beyond the least of any rank with communication in the step: the time it waited for the slowest."""

    activities: list[int]
    communication_activities: list[int]
    compute_ms: list[float]
    communication_ms: list[float]
    overlap_ms: list[float]
    exposed_communication_ms: list[float]
    span_ms: list[float]
    idle_ms: list[float]
    gap_ms: list[float]
    wait_ms: list[float]


class RankFigures(BaseModel):
    """One rank over the aligned steps: medians over steps, counts as means per step."""

    rank: int
    source: str
    activities: ActivityKind
    steps_rule: StepsRule
    activities_per_step: float
    communication_per_step: dict[str, float]  # communication activities by name, per step
    compute_ms_per_step: float
    communication_ms_per_step: float
    overlap_share: float | None  # overlap / communication time over all steps; None without communication
    exposed_communication_ms_per_step: float
    span_ms_per_step: float
    idle_ms_per_step: float
    gap_ms_per_step: float
    median_gap_us: float | None
    wait_ms_per_step: float
    straggler_steps: int  # steps in which the others waited for this rank
    # host launches per step (GPU traces): a rank that fell out of its graphs launches its kernels itself
    graph_launches_per_step: float = 0.0
    kernel_launches_per_step: float = 0.0
    per_step: RankStepSeries
    warnings: list[TraceWarning]  # its trace's own, from the reader and the step split


class RankTraces(BaseModel):
    """One profiled pass of every rank. Per step, the ranks' figures give the step's:

    step_ms: the slowest rank's span, as a step lasts until its slowest rank is done;
    wait_ms: the longest any rank waited for the slowest (the largest communication time
    minus the least: the rank that arrives last at the collectives waits least in them);
    straggler: the rank whose communication time was the least, when the others waited for
    it more than STRAGGLER_MIN_WAIT_SHARE of the step, else None;
    exposed_communication_ms: communication not overlapped by compute and not spent waiting
    (per rank: exposed - wait, at least 0), the median over ranks;
    overlapped_communication_ms: communication hidden behind compute, the median over ranks."""

    profile_steps: int
    steps: int  # aligned steps: the least any rank's trace holds
    ranks: list[RankFigures]  # by rank
    step_ms: list[float]
    wait_ms: list[float]
    exposed_communication_ms: list[float]
    overlapped_communication_ms: list[float]
    straggler: list[int | None]
    step_ms_per_step: float
    wait_ms_per_step: float
    exposed_communication_ms_per_step: float
    overlapped_communication_ms_per_step: float
    communication_ms_per_step: float  # per step the mean over ranks, then the median over steps
    overlap_share: float | None  # overlap / communication time, over every rank and step
    warnings: list[RankWarning]
