"""What the comment states, as facts: the cause of each slower batch size with its shares, the
ablation arms' effects with their intervals, launch-time and profiler-scale notes, and the
headline. The render layer words them; nothing here is a sentence."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from guard.compare import MetricKey, Verdict
from guard.measure import Change
from guard.trace import BeforeAfter

# no_cuda_graph: head replays no graph where base did; idle: most of the change is idle time
# between kernels; kernels_added / slower_kernels: most of it is in kernels added or in longer
# kernels; host_time: tok/s fell far more than GPU time rose; mixed: no part dominates
CauseKind = Literal["no_cuda_graph", "idle_between_kernels", "kernels_added", "slower_kernels", "host_time", "mixed"]


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
    kernels_per_step: BeforeAfter | None = None
    slower_kernels: list[SlowerKernel] = []
    host: HostTime | None = None


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


class Headline(BaseModel):
    """The facts of the title: which batch size, which metric, how much, and why."""

    verdict: Verdict
    batch_size: int | None = None  # the worst batch size of the deciding verdict
    metric: MetricKey | None = None  # the metric that decided it (gpu_ms for a pass)
    change: Change | None = None  # its change, between the bounds it was decided on
    others: int = 0  # more batch sizes with the same verdict
    cause: CauseKind | None = None  # where the named batch size's time went
    capture: CapturePlace | None = None  # the first change to CUDA graph capture
    fell_out: list[int] = []  # batch sizes whose decode fell out of its CUDA graphs
    # a pass whose step time rose by at least NOTABLE_SHARE of the threshold, lower bound above 0
    notable: bool = False


class Explanation(BaseModel):
    headline: Headline
    causes: list[Cause] = []  # per slower batch size (regression or at threshold)
    ablations: list[AblationEffect] = []
    launch_notes: list[LaunchNote] = []
    profile_scales: list[ProfileScale] = []
