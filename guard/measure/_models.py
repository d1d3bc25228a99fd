"""What one harness process reports, as typed data: the JSON the harness writes, its names those of
`Result` in harness/_protocol.py (tests/test_protocol.py holds these models to them)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from guard.harness import REFERENCE_FORMAT
from guard.measure._compiled import DynamoRecord


class TokenMismatch(BaseModel):
    """Where a token record first differs from another. `step` counts generated tokens from
    1, warmup steps included; `sequence` is the row of the batch."""

    model_config = ConfigDict(frozen=True)

    step: int
    sequence: int
    expected: int
    found: int


class MarginMismatch(TokenMismatch):
    """A disagreement where the reference's top logit led its runner-up by `margin_ulps`."""

    margin_ulps: float


LogitsDtype = Literal["bfloat16", "float16", "float32", "float64"]
# One step's (or one pass's) time as a process states it: the guard sums and divides these
StepMs = Annotated[float, Field(ge=0, allow_inf_nan=False)]


class MarginFloor(BaseModel):
    """The reference margin above which an output was confident (measure/_margins.py)."""

    model_config = ConfigDict(frozen=True)

    dtype: LogitsDtype  # of the reference's logits: the floor is in its ulps
    ulps: float


class WindowHost(BaseModel):
    """The host as one tok/s window closed: the CPU the process's main thread was on, that CPU's
    clock (cpufreq, where present) and its steal time since the window before (/proc/stat)."""

    model_config = ConfigDict(frozen=True)

    cpu: int | None = Field(default=None, ge=0)
    freq_khz: int | None = Field(default=None, ge=0)
    steal_ms: float | None = Field(default=None, ge=0, allow_inf_nan=False)


class HostUsage(BaseModel):
    """What the host did while one batch size's timed passes ran, as the process counted it
    (getrusage over all its threads, the timed passes alone): a process that was preempted
    shows involuntary switches; one that waited on the GPU, voluntary ones."""

    model_config = ConfigDict(frozen=True)

    voluntary_switches: int
    involuntary_switches: int
    user_s: float
    sys_s: float
    cpus: list[int] = []  # the CPUs its main thread was on at the start and end of each timed pass
    # one per tok/s window, in order: the host's state as the window closed
    windows: list[WindowHost] = []
    # the main thread's user-mode instructions per step (perf_event_open), the median over the
    # end-to-end passes (each pass's total / its steps); or why there was no counter
    instructions_per_step: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    instructions_per_step_passes: list[float] = []
    instructions_multiplexed: bool = False  # the kernel shared the counter: counts scaled from part of the time
    instructions_unavailable: Annotated[str, StringConstraints(max_length=300)] | None = None


class RankRun(BaseModel):
    """One rank's own figures of one pass (a batch size's or the mix's) of a process of several
    ranks, as the guard took them from that rank's result: the pass's own figures are then the
    slowest rank's, step by step (measure/_ranks.py)."""

    model_config = ConfigDict(frozen=True)

    rank: int
    gpu_ms_per_step: float  # the mean of its own timed steps
    step_ms: list[StepMs]
    host_ms_per_step: float | None = None  # the mean of its own
    tok_per_s: float  # its own tokens over its own decode time
    # as each timed step's ids reached its host (CLOCK_MONOTONIC ns, one clock for the host's
    # processes), and the median of how far behind the rank that finished the step first it did
    step_done_ns: list[int] = []
    finish_lag_us: float | None = None
    trace: str | None = None  # its profiled pass's trace, on a GPU
    workload: dict[str, Any] = {}  # its describe()
    # (step, sequence) outputs that differ from rank 0's, as the guard counted them, and the first
    disagreements: int = 0
    first_disagreement: TokenMismatch | None = None


class BatchRun(BaseModel):
    """One batch size in one process: a warmup, then timed passes of `steps` decode steps each
    (harness/_passes.py, `run_batch`)."""

    model_config = ConfigDict(frozen=True)

    batch_size: int
    steps: int
    warmup_steps: int
    timer: str  # "cuda_event" or "perf_counter"
    setup_s: float
    wall_s: float  # the first end-to-end pass
    # Every decided figure is a mean, computed by the guard from the lists below as it reads the
    # result (measure/_figures.py), never taken as the process wrote it; a stall counts in full.
    # tok/s: batch_size x steps x `timed_passes` over `timed_s`, the sum of `end_to_end_pass_ms`
    # (each end-to-end pass's decode time, the first first). Protocol 3 and older: the median of
    # `tok_per_s_windows`, the rates of windows of `window_s` or more of decode (now a diagnostic)
    tok_per_s: float
    end_to_end_pass_ms: list[StepMs] = []
    tok_per_s_windows: list[float] = []
    window_s: float | None = None
    timed_passes: int = 1
    timed_s: float | None = None
    passes_differing: int = 0  # passes after the first whose ids were not the first's (as the process says)
    warmup_s: float = 0.0  # untimed decode before the timed passes, besides warmup_steps
    warmup_settled: bool | None = None  # the warmup ended as its tok/s settled (False: at its limit); None: none
    gc_disabled: bool = False  # the garbage collector was off during the timed passes
    host: HostUsage | None = None
    # the mean over `step_ms`, the timed steps: on a GPU the held pass's CUDA events, on a CPU the
    # first end-to-end pass's wall times; the median beside it is a diagnostic
    gpu_ms_per_step: float
    gpu_ms_median_per_step: float | None = None
    step_ms: list[StepMs]
    # GPU only: the first end-to-end pass's CUDA events per step (host launch included), their
    # mean (what the user feels of a step) and, a diagnostic, their median
    end_to_end_gpu_ms: list[StepMs] = []
    end_to_end_gpu_ms_per_step: float | None = None
    end_to_end_gpu_ms_median_per_step: float | None = None
    hold_us: float = 0.0  # the GPU spin each timed step waited behind (CUDA), 0 without one
    unheld_steps: int = 0  # timed steps the host was still launching when the hold ran out
    # the host's enqueue time of each step of the GPU-timed pass, and its mean (CUDA only):
    # launch-bound time, which the held GPU figure leaves out and CUDA graphs remove
    host_ms: list[StepMs] = []
    host_ms_per_step: float | None = None
    tokens: list[list[int]]  # one row per step (warmup included), one id per sequence
    sha256: str
    workload: dict[str, Any] = {}
    trace: str | None = None  # gzipped profiler trace of the profiled pass, on a GPU
    profile_steps: int = 0
    # teacher forcing: every step's input came from the reference (the process says so); then
    # how many (step, sequence) outputs differed from it, out of how many, and the first, as
    # the guard counted them from `tokens` (measure/_disagreements.py), never as the process says
    forced: bool = False
    disagreements: int | None = None
    compared: int = 0
    first_disagreement: TokenMismatch | None = None
    # where the reference recorded its top two logits: the same for the outputs whose reference
    # margin was above `margin_floor` alone (measure/_margins.py); None: no margins
    margin_floor: MarginFloor | None = None
    confident_disagreements: int | None = None
    confident_compared: int = 0
    first_confident: MarginMismatch | None = None
    # several ranks: each one's own figures, and per rank the timed steps it finished last (the
    # figures above are then the slowest rank's per step; tokens and trace rank 0's)
    step_done_ns: list[int] = []  # as each timed step's ids reached the host (RankRun's)
    ranks: list[RankRun] = []
    slowest_steps: list[int] = []


class StepInfo(BaseModel):
    """What one step of the mix pass says it did (the workload's step_info()), as data: the
    arm's process ran it, so every field is bounded and aggregates are the guard's own."""

    model_config = ConfigDict(frozen=True)

    path: Literal["graph", "eager"] | None = None
    padded_to: int | None = Field(default=None, ge=1, le=1 << 16)  # rows computed, real ones included
    expert_tokens: list[Annotated[int, Field(ge=0, lt=1 << 31)]] | None = Field(default=None, min_length=1,
                                                                               max_length=4096)


class MixRun(BaseModel):
    """The batch-size mix pass of one process (harness/_mix_passes.py, `run_mix`). Its steps' sizes are
    not taken from it: the guard draws the same schedule (harness/_mix.py) and reads the step
    times against it."""

    model_config = ConfigDict(frozen=True)

    max_batch_size: int = Field(ge=1, le=1 << 16)
    steps: int
    warmup_steps: int
    timer: Literal["cuda_event", "perf_counter"]
    setup_s: float
    # the timed steps' rows (the guard's schedule) over the summed `end_to_end_step_ms`, computed by
    # the guard as it reads the result (measure/_figures.py); GPU ms is the mean over `step_ms`
    tok_per_s: float
    step_ms: list[StepMs]  # the timed steps: the end-to-end pass on a CPU, the GPU-timed pass on a GPU
    end_to_end_step_ms: list[StepMs] = []  # the end-to-end pass's steps (a CPU's: `step_ms` again)
    hold_us: float = 0.0  # the GPU spin each step of the GPU-timed pass waited behind, 0 without one
    step_info: list[StepInfo] | None = None  # one per timed step; None: the workload has no step_info()
    tokens: list[list[int]]  # the lead step (every row), then one row per schedule step, as wide as its batch
    workload: dict[str, Any] = {}
    warmup_s: float = 0.0  # the settling warmup before its timed steps, as for a fixed size
    warmup_settled: bool | None = None  # None: no settling warmup (warmup_max_s 0)
    trace: str | None = None  # gzipped profiler trace of its profiled pass, after every timed pass, on a GPU
    profile_steps: int = 0
    forced: bool = False
    disagreements: int | None = None  # counted by the guard, as for the fixed sizes
    compared: int = 0
    first_disagreement: TokenMismatch | None = None
    # at confident outputs alone, where the reference recorded the mix's top logits: as for a fixed size
    margin_floor: MarginFloor | None = None
    confident_disagreements: int | None = None
    confident_compared: int = 0
    first_confident: MarginMismatch | None = None
    step_done_ns: list[int] = []  # several ranks: as for a fixed size
    ranks: list[RankRun] = []
    slowest_steps: list[int] = []


class CacheOutcomes(BaseModel):
    """How often one of torch.compile's caches on disk had a graph (hit), had not (miss), or was not asked."""

    hit: int = 0
    miss: int = 0
    bypass: int = 0


class CompileStats(BaseModel):
    """What torch.compile cost one process (harness/_compile_stats.py): its seconds compiling
    frames, and its caches' outcomes; hits are graphs an earlier process of the arm compiled."""

    compile_s: float
    fx_graph: CacheOutcomes = CacheOutcomes()
    aot_autograd: CacheOutcomes = CacheOutcomes()


# The timed passes a harness process marks on the guard's pipe (guard/measure/_clock.py).
PassKind = Literal["end_to_end", "gpu_timed", "mix", "mix_gpu_timed"]


class SeenPass(BaseModel):
    """One timed pass as the guard saw it on its own clock: its kind and its seconds."""

    model_config = ConfigDict(frozen=True)

    kind: PassKind
    s: float


class ClockMisfit(BaseModel):
    """Why a process's timings were refused: they do not fit the passes the guard saw.
    `unpaired`: its marks did not pair up; `pass_count`: it claims another number of passes of
    `kind` than the guard saw; `over`: its step times of one pass group add up to more than the
    guard saw it take; `under`: to under FLOOR of it (its clock is not the guard's)."""

    model_config = ConfigDict(frozen=True)

    why: Literal["unpaired", "pass_count", "over", "under"]
    repeat: int | None = None  # the process (set by the runner)
    kind: PassKind | None = None
    batch_size: int | None = None  # None: the mix's passes, or why "unpaired"
    claimed_s: float | None = None
    seen_s: float | None = None
    claimed_passes: int | None = None
    seen_passes: int | None = None


class RepeatResult(BaseModel):
    """One fresh process of one arm."""

    model_config = ConfigDict(frozen=True)

    arm: str
    repeat: int
    environment: dict[str, Any]
    runs: list[BatchRun]
    mix: MixRun | None = None  # the batch-size mix pass, when the workload has a mix
    fingerprint: dict[str, Any] = {}  # {"before": {...}, "after": {...}} from harness/_fingerprint.py
    timings_s: dict[str, float] = {}  # seconds per phase inside the process: import torch, engine, passes...
    process_s: float | None = None  # the whole process, as the runner timed it: start-up included
    world_size: int = 1  # its ranks, one harness process each: their results merged (measure/_ranks.py)
    # what dynamo compiled by the end of its warmup (rank 0's); None: it never used torch.compile
    dynamo: DynamoRecord | None = Field(default=None, exclude_if=lambda value: value is None)
    # what torch.compile cost it and what the arm's compile cache gave (rank 0's); None: nothing compiled
    compile: CompileStats | None = Field(default=None, exclude_if=lambda value: value is None)
    # the guard's own clock over its timed passes (guard/measure/_clock.py), put there by the guard
    # over whatever the process wrote: whether it watched, and each pass as it saw it (None: the
    # marks did not pair up, or it did not watch: a container)
    clock_watched: bool = False
    seen_passes: list[SeenPass] | None = None

    def run_for(self, batch_size: int) -> BatchRun:
        for run in self.runs:
            if run.batch_size == batch_size:
                return run
        raise KeyError(batch_size)


class ArmMeasurement(BaseModel):
    """Every repeat of one arm, in the order they ran; `error` when a process failed."""

    arm: str
    repeats: list[RepeatResult] = []
    error: str | None = None
    log_tail: str = ""
    clock_misfit: ClockMisfit | None = None  # the failure was the guard's clock refusing a process


# Where a reference came from, as the comment names it: "base 1a2b3c4d" or a repository path.
# Letters, digits and . _ / - only, so a name read back from a report or a config cannot
# carry markdown (a link, an image, a heading) into the comment.
SourceLabel = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._/ -]{0,199}$")]


MAX_LOGIT = 1e9  # a logit read back from a process, or a file, is finite and no larger than this
Logit = Annotated[float, Field(allow_inf_nan=False, ge=-MAX_LOGIT, le=MAX_LOGIT)]


class TopLogits(BaseModel):
    """The reference's two largest logits of every output, per batch size and of the mix pass:
    per step, per sequence, (top, runner-up), in the dtype the workload's step_logits() gave them."""

    dtype: LogitsDtype
    batch_sizes: dict[int, list[list[tuple[Logit, Logit]]]]
    # the mix pass's, row for row as `ReferenceTokens.mix`; None: no mix, or a reference without them
    mix: list[list[tuple[Logit, Logit]]] | None = Field(default=None, exclude_if=lambda value: value is None)

    @model_validator(mode="after")
    def _sorted(self) -> TopLogits:
        passes = [*self.batch_sizes.values(), *([self.mix] if self.mix is not None else [])]
        if any(second > best for rows in passes for row in rows for best, second in row):
            raise ValueError("a runner-up logit is above its top one")
        return self


class ReferenceTokens(BaseModel):
    """The ids every measured process is forced with: per batch size, the output of each step
    of one free-running greedy pass (of the base build, or a file the team commits)."""

    format: str = REFERENCE_FORMAT
    source: SourceLabel  # where they came from: "base abc12345", or the file's path
    batch_sizes: dict[int, list[list[int]]]
    # the mix pass: the lead step's row (every row of the largest size), then one per schedule step
    mix: list[list[int]] | None = None
    # the top two logits of each output, where the workload gives its logits (step_logits())
    top_logits: TopLogits | None = Field(default=None, exclude_if=lambda value: value is None)

    @model_validator(mode="after")
    def _logits_match_the_ids(self) -> ReferenceTokens:
        if self.top_logits is not None:
            passes = [(f"batch size {size}", top, self.batch_sizes.get(size))
                      for size, top in self.top_logits.batch_sizes.items()]
            if self.top_logits.mix is not None:
                passes.append(("the mix", self.top_logits.mix, self.mix))
            for name, top, rows in passes:
                if rows is None or len(top) != len(rows) or any(len(t) != len(r) for t, r in zip(top, rows)):
                    raise ValueError(f"top_logits of {name} are not one pair per id")
        return self

    def top_for(self, batch_size: int) -> list[list[tuple[float, float]]] | None:
        return self.top_logits.batch_sizes.get(batch_size) if self.top_logits is not None else None

    def rows_for(self, batch_size: int) -> list[list[int]] | None:
        return self.batch_sizes.get(batch_size)
