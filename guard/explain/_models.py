"""What the comment states, as facts: the cause of each slower batch size with its shares, the
ablation arms' effects with their intervals, launch-time and profiler-scale notes, and the
headline. The render layer words them; nothing here is a sentence."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from guard.compare import MetricKey, Verdict
from guard.measure import Change, GraphBreak
from guard.trace import BeforeAfter

# no_cuda_graph: head replays no graph where base did; idle: most of the change is idle time
# between kernels; kernels_added / slower_kernels: most of it is in kernels added or in longer
# kernels; host_time: tok/s fell far more than GPU time rose; mixed: no part dominates;
# padded_rows: busy time grew where each step computes more rows than base's (padding)
CauseKind = Literal["no_cuda_graph", "idle_between_kernels", "kernels_added", "slower_kernels", "host_time", "mixed",
                    "padded_rows"]


class TimeSplit(BaseModel):
    """How the profiled pass's extra time per step splits; shares of the parts that grew."""

    idle_ms: float
    counts_ms: float  # kernels added or removed
    durations_ms: float  # kernel durations
    idle_share: float
    counts_share: float
    durations_share: float


class SlowerKernel(BaseModel):
    name: str
    kernels_per_step: float | None
    mean_duration_us: BeforeAfter
    variant: bool  # the same function run as another variant (other template arguments)


class HostTime(BaseModel):
    """tok/s fell far more than GPU time per step rose: the time is on the host."""

    gpu_ms_pct: float
    tok_per_s_fall_pct: float


class Cause(BaseModel):
    batch_size: int
    kind: CauseKind
    dominant: bool  # one part carries at least DOMINANT_SHARE of the change (or the graphs went)
    split: TimeSplit | None = None  # from the profiled pass; None without a trace diff
    only_idle: bool = False  # kernel counts identical and no kernel slower: the kernels are not the cause
    # The step's work the head runs more of, per step, base -> head, whatever part of the time
    # dominates: kernels, copies (memcpy), memsets; None where it runs no more. kernels_per_step
    # is there for kernels_added whatever the count (schema 8 and before: for kernels_added alone)
    kernels_per_step: BeforeAfter | None = None
    memcpys_per_step: BeforeAfter | None = Field(default=None, exclude_if=lambda value: value is None)
    memsets_per_step: BeforeAfter | None = Field(default=None, exclude_if=lambda value: value is None)
    slower_kernels: list[SlowerKernel] = []
    host: HostTime | None = None
    # padded_rows: the rows each step computed, base -> head, as the mix's steps of this size
    # recorded them (step_info); the busy time grew with them
    rows: tuple[int, int] | None = Field(default=None, exclude_if=lambda value: value is None)  # no key for others


# Across the ranks of a slower batch size, from their profiled pass (guard/trace/_rank_diff.py):
# communication_not_overlapped, the collectives compute hid in base are exposed in head;
# rank_held_back, one rank joined the collectives last in most steps and the others' wait grew
RankCauseKind = Literal["communication_not_overlapped", "rank_held_back"]
# rank_held_back: the timed pass's straggler (each step's end on every rank) is the traced rank,
# another rank, or none
StragglerAgreement = Literal["same_rank", "other_rank", "none_timed"]


class RankCause(BaseModel):
    batch_size: int
    kind: RankCauseKind
    share_of_step: float  # the exposed communication's (or the wait's) growth over base's profiled step
    # communication_not_overlapped
    exposed_communication_ms_per_step: BeforeAfter | None = None
    overlap_share: BeforeAfter | None = None
    # rank_held_back: the rank the others waited for, in which share of head's profiled steps,
    # the longest wait for it, and the timed pass's straggler beside it
    rank: int | None = None
    straggler_share: float | None = None
    wait_ms_per_step: BeforeAfter | None = None
    fell_out_of_graphs: bool = False
    timed_straggler: int | None = None
    agreement: StragglerAgreement | None = None


class AblationEffect(BaseModel):
    arm: str
    batch_size: int
    build: Literal["base", "head"]  # whose build the arm reuses
    pct: float  # GPU ms per step against base
    change: Change | None  # at the report's confidence; None with a single repeat
    # of the head's slowdown, the share this arm takes back (head build) or reproduces (base
    # build); None unless the batch size is a regression that slowed step time
    share_of_head: float | None = None


class LaunchNote(BaseModel):
    """Timed as the decode loop runs it (launch time included), GPU time rose past the
    threshold by the interval rule, while the held GPU time did not decide a regression."""

    batch_size: int
    end_to_end: Change  # between the interval rule's bounds
    held: Change  # likewise


class ProfileScale(BaseModel):
    """The profiled step's change is out of scale with the timed pass's (a factor of 2 or more)."""

    batch_size: int
    profiled_ms: float
    timed_ms: float

    @property
    def ratio(self) -> float:
        return self.profiled_ms / self.timed_ms


class CapturePlace(BaseModel):
    path: str
    lines: tuple[int, int] | None = None
    function: str | None = None


# causes of a slower batch size whose time between kernels (or launches, or the host's work)
# more graphs per step account for: the GPU waits while the host runs the code between graphs
GRAPH_BREAK_CAUSES: tuple[CauseKind, ...] = ("idle_between_kernels", "no_cuda_graph", "host_time")


class CompiledCause(BaseModel):
    """Head's compiled decode breaks into more graphs than base's, or at new places, where a
    slower batch size's time went to idle between kernels, out of its CUDA graphs or onto the
    host (GRAPH_BREAK_CAUSES): the breaks account for it, as dynamo counted them in each arm."""

    graphs: tuple[int, int]  # base's most, head's most
    breaks_added: int  # distinct places
    first: GraphBreak | None = None  # the first break the head added, with its place and reason
    batch_sizes: list[int]  # the slower ones whose cause it accounts for


class DeviceRise(BaseModel):
    """An improvement decided by what the user feels, at a batch size (or the mix) whose GPU ms
    per step rose, its slowdown shown (rule 5): the device does more work per step, and the step
    is still faster end to end. Why, where the run recorded it: the rows each step computed at
    that size (step_info), or over the mix the share of computed rows no request asked for."""

    gpu_ms: Change  # GPU ms per step's change, between the bounds it was decided on
    rows: tuple[int, int] | None = None  # base -> head, where the head pads this size to more rows
    padding_waste: tuple[float, float] | None = None  # the mix: base -> head, where the head's is larger


class Headline(BaseModel):
    """The facts of the title: which batch size, which metric, how much, and why."""

    verdict: Verdict
    batch_size: int | None = None  # the worst batch size of the deciding verdict (MIX_BATCH: the mix)
    metric: MetricKey | None = None  # the metric that decided it (gpu_ms for a pass)
    change: Change | None = None  # its change, between the bounds it was decided on
    others: int = 0  # more batch sizes with the same verdict
    cause: CauseKind | None = None  # where the named batch size's time went
    capture: CapturePlace | None = None  # the first change to CUDA graph capture
    fell_out: list[int] = []  # batch sizes whose decode fell out of its CUDA graphs
    # what the ranks found at the named batch size, before `cause` (rank 0's own trace); no key for one process
    rank_cause: RankCauseKind | None = Field(default=None, exclude_if=lambda value: value is None)
    # a pass whose step time rose by at least NOTABLE_SHARE of the threshold, lower bound above 0
    notable: bool = False
    # the named batch size's time is accounted for by the head's graph breaks (CompiledCause); no key otherwise
    graph_breaks: bool = Field(default=False, exclude_if=lambda value: not value)
    # what the user feels, where it is a larger slowdown than `metric`'s: end-to-end ms per step or
    # tok/s at the named batch size, its whole interval past its threshold and its lower bound
    # past `metric`'s figure (as time ratios); the title and the first sentence lead with it
    felt: MetricKey | None = Field(default=None, exclude_if=lambda value: value is None)
    felt_change: Change | None = Field(default=None, exclude_if=lambda value: value is None)
    # an improvement by what the user feels where GPU ms per step rose (rule 5); no key otherwise
    device_rise: DeviceRise | None = Field(default=None, exclude_if=lambda value: value is None)


# The parts of the head's change over the batch-size mix (explain/_mix.py): graph_replay, a
# size that moved between a graph and eager (launch and host time); padding, rows computed that
# no request asked for; imbalance, expert capacity beyond the loads under imbalance I; kernel_time,
# the change at sizes whose path and computed rows are the same in both arms
MixPartKind = Literal["graph_replay", "padding", "imbalance", "kernel_time"]
# one part carries DOMINANT_SHARE of what grew, no part does (mixed), or the trace and the
# coverage figures point different ways (mixed_evidence)
MixCauseKind = Literal["graph_replay", "padding", "imbalance", "kernel_time", "mixed", "mixed_evidence"]
MixPath = Literal["graph", "eager", "mixed"]


class MixPart(BaseModel):
    kind: MixPartKind
    ms_per_step: float  # its change of the mix's GPU ms per step: each size's, times the size's share
    share: float  # of the parts that grew; 0 for a part that shrank
    batch_sizes: list[int] = []  # the sizes it came from


class RowCost(BaseModel):
    """The head's (or base's) ms per computed row on a path, read from its own sizes: the slope
    of GPU ms per step over padded_to across them, or with one such size its ms per row."""

    arm: str
    path: MixPath
    ms_per_row: float
    method: Literal["slope", "per_row"]
    padded_to: list[int]  # the computed-row counts it was read from


class MixSizeChange(BaseModel):
    """The evidence one size gives: what each arm computed for it, and its parts (weighted by share)."""

    batch_size: int
    share: float
    path: tuple[MixPath, MixPath]  # base, head
    padded_to: tuple[int, int]
    gpu_ms_per_step: tuple[float, float]
    imbalance: tuple[float | None, float | None] = (None, None)  # median I of its steps
    parts_ms: dict[MixPartKind, float]  # times its share


class TraceSide(BaseModel):
    """What the paired profiler traces say of the change: idle time (launch and host gaps)
    against GPU busy time, from the mix's own trace or the traced sizes of the mix by share."""

    source: Literal["mix", "batch_sizes"]
    batch_sizes: list[int] = []  # source batch_sizes: the traced sizes read
    idle_ms: float
    busy_ms: float
    idle_share: float  # of what grew
    busy_share: float
    material: bool = True  # its growth is at least CANDIDATE_SHARE of the mix parts': it can disagree


class MixAttribution(BaseModel):
    """The head's change in GPU ms per step over the batch-size mix, split into its parts."""

    base_ms_per_step: float  # the mix's, each arm's (mean over its steps, median over processes)
    head_ms_per_step: float
    pct: float  # of the two medians
    # between the bounds the compare stage decided the mix on; None: the mix was not decided
    change: Change | None = None
    slower: bool  # the mix's verdict is a regression or at threshold: only then is a cause named,
    # so a win is not blamed
    parts: list[MixPart]  # in MixPartKind's order
    unsplit_ms: float  # the arms' change less the parts' sum (the sizes' medians over processes against the whole's)
    row_costs: list[RowCost] = []
    sizes: list[MixSizeChange] = []
    trace: TraceSide | None = None
    cause: MixCauseKind | None = None  # None: not slower, or nothing to split
    candidates: list[MixPartKind] = []  # mixed, mixed_evidence: the hypotheses kept, largest first

    def part(self, kind: MixPartKind) -> MixPart:
        return next(p for p in self.parts if p.kind == kind)


class Explanation(BaseModel):
    headline: Headline
    causes: list[Cause] = []  # per slower batch size (regression or at threshold)
    ablations: list[AblationEffect] = []
    launch_notes: list[LaunchNote] = []
    profile_scales: list[ProfileScale] = []
    mix: MixAttribution | None = None  # None: no mix, or an arm's sizes without path and padded_to
    # per slower batch size of several ranks, what their profiled pass found (explain/_ranks.py); no key without
    ranks: list[RankCause] = Field(default_factory=list, exclude_if=lambda value: not value)
    # the head's decode compiled into more graphs where the time went between kernels; no key otherwise
    compiled: CompiledCause | None = Field(default=None, exclude_if=lambda value: value is None)
    # True where every profiled batch size replayed the same kernels and made the same API calls
    # (graph launches included) on both sides: what was captured did not change, whatever the diff
    # touched; None without a profiled pass (no key)
    capture_unchanged: bool | None = Field(default=None, exclude_if=lambda value: value is None)
