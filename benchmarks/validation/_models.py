"""What a validation run hands between its stages and writes down, as typed records."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, field_validator

from guard.compare import Verdict
from guard.explain import CauseKind
from guard.measure import Change
from guard.report._words import CAUSE

Injection = Literal["none", "idle", "kernel"]
DecisionRole = Literal["as run", "own", "floor", "default"]

# The cause a pair of each injection must get (the report's explanation, guard/explain).
SPLIT_ONLY = 0.0  # the idle setting that means: two graphs, no host wait (the split alone)
EXPECTED_CAUSE: dict[str, CauseKind] = {"idle": "idle_between_kernels", "kernel": "slower_kernels"}
# Records written before the cause was a typed field hold the title's words for it.
_CAUSE_BY_WORDS: dict[str, CauseKind] = {words: kind for kind, words in CAUSE.items()}


class Kind(BaseModel):
    """One sort of pair: what the head commit injects and the slowdown it is sized to."""

    model_config = ConfigDict(frozen=True)

    name: str
    injection: Injection
    target_pct: float  # 0 for A/A

    @property
    def expected_cause(self) -> CauseKind | None:
        return EXPECTED_CAUSE.get(self.injection)


KINDS: tuple[Kind, ...] = (
    Kind(name="aa", injection="none", target_pct=0.0),
    Kind(name="idle-1", injection="idle", target_pct=1.0),
    Kind(name="kernel-1", injection="kernel", target_pct=1.0),
    Kind(name="idle-0.5", injection="idle", target_pct=0.5),
    Kind(name="kernel-0.5", injection="kernel", target_pct=0.5),
)
KIND_BY_NAME = {k.name: k for k in KINDS}


class RunSettings(BaseModel):
    """The settings every measurement of one validation run shares; a resumed run must match them."""

    model_config = ConfigDict(frozen=True)

    batch_size: int
    steps: int
    warmup_steps: int
    profile_steps: int
    profile_repeats: int  # processes per arm and round that run the profiled pass (0: all)
    repeats: int  # processes per arm per round
    options: dict[str, Any]  # workload options, besides the injected ones
    options_toml: str  # the same, as written into the config
    build: Literal["venv", "none"]
    confirm: bool
    alpha: float
    confidence: float
    timeout_s: float


class SizingPoint(BaseModel):
    """One engine setting measured for sizing, in fresh processes without the profiler."""

    label: str
    setting: Literal["base", "split", "idle", "kernel"]
    idle_us: float | None = None
    long_kv_layers: int | None = None
    gpu_ms_per_step: list[float] = []  # each process's median over its timed steps
    # the same processes' end-to-end pass, timed by CUDA events without the hold (host launch
    # included), and the held steps the host was still launching when the hold ran out
    end_to_end_gpu_ms_per_step: list[float] = []
    unheld_steps: list[int] = []
    process_s: list[float] = []  # wall time of each process, for estimates
    timer: str | None = None
    sha256: str | None = None
    tokens_match_base: bool | None = None
    change_pct: float | None = None  # median against the unsplit base's median
    error: str | None = None


class TokenCheck(BaseModel):
    """A long_kv_layers setting run once, to see whether the base's tokens survive it."""

    long_kv_layers: int
    tokens_match_base: bool | None
    change_pct: float | None  # one process: a rough check of the prediction, not a figure
    error: str | None = None


class InjectionSize(BaseModel):
    """The setting chosen for one injected kind, and how it was chosen."""

    kind: str
    injection: Injection
    target_pct: float
    setting: float | None  # idle_us (0: the split alone) or long_kv_layers; None when none was usable
    predicted_pct: float | None  # the sizing curve's change at the setting
    how: Literal["interpolated", "extrapolated", "clamped", "measured", "none"]
    note: str = ""
    token_checks: list[TokenCheck] = []


class Sizing(BaseModel):
    long_kv_len: int  # the KV cache length of the long layers
    base_ms_per_step: float
    split_pct: float | None  # what the split alone adds (two graphs, no wait)
    repeats: int
    points: list[SizingPoint]
    injections: list[InjectionSize]
    environment: dict[str, Any] = {}
    duration_s: float

    def injection(self, kind: str) -> InjectionSize | None:
        return next((i for i in self.injections if i.kind == kind), None)


class ArmValues(BaseModel):
    """One arm's per-repeat figures at the measured batch size, in the order they ran."""

    arm: str
    timer: str
    sha256: str
    deterministic: bool | None  # None: the inputs were forced (the agreement judges the tokens)
    gpu_ms_per_step: list[float]
    tok_per_s: list[float]


class TraceSplit(BaseModel):
    """How the profiled pass splits the change per step (ms), base -> head."""

    idle_ms: float | None
    busy_from_counts_ms: float
    busy_from_durations_ms: float
    kernel_counts_identical: bool


class PairRecord(BaseModel):
    """One `guard run` of base against an injected (or A/A) head: one line of pairs.jsonl."""

    pair_id: str
    kind: str
    injection: Injection
    index: int
    target_pct: float
    setting: float | None  # idle_us (0: the split alone) or long_kv_layers of the head; None for A/A
    predicted_pct: float | None
    batch_size: int
    steps: int
    verdict: Verdict
    reasons: list[str] = []
    warnings: list[str] = []
    threshold_pct: float
    tok_threshold_pct: float
    alpha: float
    confidence: float
    gpu_ms_change: Change | None = None
    tok_per_s_change: Change | None = None
    # the report's dominant cause of the batch size (explanation.causes); None when none dominates or no trace
    cause: CauseKind | None = None
    title: str | None = None  # the comment's title line, for a reader (None in records made before it was kept)
    capture_changed: bool | None = None  # the diff touched CUDA graph capture, as the guard found it
    traced: bool = False  # the profiled pass gave a base -> head trace diff
    trace_split: TraceSplit | None = None
    rounds: int
    repeats: int  # per arm per round
    arms: list[ArmValues] = []
    base_sha: str
    head_sha: str
    gpu: str | None = None
    gpu_uuid: str | None = None
    duration_s: float
    finished_at: str

    @field_validator("cause", mode="before")
    @classmethod
    def _cause_of_older_records(cls, value: Any) -> Any:
        return _CAUSE_BY_WORDS.get(value, value) if isinstance(value, str) else value


class KindSummary(BaseModel):
    kind: str
    target_pct: float
    expected_cause: CauseKind | None
    pairs: int
    verdicts: dict[str, int]
    regressions: int
    right_cause: int  # regressions tagged with the expected cause
    traced: int
    detection_rate: float | None
    right_cause_rate: float | None
    median_gpu_ms_change_pct: float | None
    median_tok_per_s_change_pct: float | None
    median_duration_s: float | None


class Criterion(BaseModel):
    name: str
    status: Literal["met", "not met", "incomplete"]
    detail: str


class Decision(BaseModel):
    """The pairs decided under one pair of thresholds."""

    label: str
    role: DecisionRole = "as run"
    gpu_ms_pct: float | None  # None: each pair's own (they may differ between resumed runs)
    tok_per_s_pct: float | None
    kinds: list[KindSummary]
    criteria: list[Criterion]
    verdicts: dict[str, Verdict]  # pair_id -> verdict
    notes: list[str] = []


class Summary(BaseModel):
    settings: RunSettings | None
    planned: dict[str, int]  # kind -> pairs asked for
    done: int
    complete: bool
    environment: dict[str, Any]
    sizing: Sizing | None
    thresholds: dict[str, float] | None  # from the calibration
    calibration: dict[str, Any] | None
    decisions: list[Decision]
    pairs: list[PairRecord]
