"""What a validation run hands between its stages and writes down, as typed records."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from guard.compare import Verdict
from guard.config import Thresholds
from guard.explain import CauseKind
from guard.measure import Change, SlowProcesses

Injection = Literal["none", "idle", "kernel"]
DecisionRole = Literal["as run", "own", "floor", "default"]

# The cause a pair of each injection must get (the report's explanation, guard/explain).
SPLIT_ONLY = 0.0  # the idle setting that means: two graphs, no host wait (the split alone)
EXPECTED_CAUSE: dict[str, CauseKind] = {"idle": "idle_between_kernels", "kernel": "slower_kernels"}


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


# The rounds a pair could take in runs from before `max_rounds` was a setting: the first and
# one confirmation. Their settings.json has no `max_rounds` and reads as this.
ROUNDS_BEFORE_THE_SETTING = 2


class RunSettings(BaseModel):
    """The settings every measurement of one validation run shares; a resumed run must match them."""

    model_config = ConfigDict(frozen=True)

    batch_size: int
    steps: int
    warmup_steps: int
    profile_steps: int
    # processes per arm and round that run the profiled pass (0: all; None: a run from before the setting)
    profile_repeats: int | None = None
    repeats: int  # processes per arm per round
    options: dict[str, Any]  # workload options, besides the injected ones
    options_toml: str  # the same, as written into the config
    build: Literal["venv", "none"]
    confirm: bool
    alpha: float
    confidence: float
    timeout_s: float
    # rounds a pair may take, the first included (measure.max_rounds); runs from before the setting
    max_rounds: int = ROUNDS_BEFORE_THE_SETTING
    # workload.tok_per_s_min_s and workload.warmup_max_s of every process (None: the config's defaults)
    tok_per_s_min_s: float | None = None
    warmup_max_s: float | None = None


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


class PairRecord(BaseModel):
    """One line of pairs.jsonl: what the pair was asked to be and how long it took. Its figures
    are its report's (DIR/pairs/PAIR/report.json.gz), read back by `_pairs.load_pair`. Lines of
    older runs also hold a copy of their report's figures; they are ignored."""

    pair_id: str
    kind: str
    index: int
    setting: float | None  # idle_us (0: the split alone) or long_kv_layers of the head; None for A/A
    predicted_pct: float | None
    duration_s: float
    finished_at: str


class PairFacts(BaseModel):
    """What the summary states of one pair, from its report: the verdict as the report states it
    (a report of an older schema: as it ran), the changes, the dominant cause as this guard
    explains the report, and what the pair was asked to be."""

    pair_id: str
    kind: str
    injection: Injection
    setting: float | None
    predicted_pct: float | None
    batch_size: int
    verdict: Verdict
    threshold_pct: float
    tok_threshold_pct: float
    gpu_ms_change: Change | None = None
    tok_per_s_change: Change | None = None
    cause: CauseKind | None = None  # the report's dominant cause of the batch size; None: none dominates
    title: str
    capture_changed: bool | None  # the diff touched CUDA graph capture; None: the guard did not look (older reports)
    traced: bool  # the profiled pass gave a base -> head trace diff
    rounds: int
    gpu: str | None = None
    gpu_uuid: str | None = None
    duration_s: float


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


class FarRepeat(BaseModel):
    """A process of the calibration far from the rest of its side."""

    side: str
    repeat: int
    gpu_ms_per_step: float
    off_pct: float


class CalibratedGpuSpread(BaseModel):
    """GPU ms's spread within a side, its upper limit, and the threshold it supports."""

    sd_pct: float
    sd_limit_pct: float
    supported_pct: float


class CalibratedNoise(BaseModel):
    """One batch size of a calibration, as the summary states it."""

    batch_size: int
    gpu_ms_per_step: float
    gpu_ms_spread_pct: float
    gpu_ms_aa_ci_pct: tuple[float, float]
    gpu_ms: CalibratedGpuSpread | None = None  # none in calibrations before the spread limit
    gpu_ms_far_repeats: list[FarRepeat] = []


class CalibrationRecord(BaseModel):
    """calibration.json read back as data: what the summary states of it, from a calibration
    of any version the committed folders hold (`guard calibrate`'s, or the refusal the
    validation writes). Fields it does not state are left out."""

    repeats: int | None = None
    refused: str | None = None  # why `guard calibrate` suggested nothing: the pairs ran at the config's
    suggested: Thresholds | None = None
    noise: list[CalibratedNoise] = []
    slow: SlowProcesses | None = None  # none in calibrations before slow processes were named


class Summary(BaseModel):
    settings: RunSettings | None
    planned: dict[str, int]  # kind -> pairs asked for
    done: int
    complete: bool
    environment: dict[str, Any]
    sizing: Sizing | None
    thresholds: Thresholds | None  # from the calibration
    calibration: CalibrationRecord | None
    decisions: list[Decision]
    pairs: list[PairFacts]
