"""The comparison's result: one section per batch size and an overall verdict."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel

from guard.measure import Change, Spread

Verdict = Literal["pass", "regression", "improvement", "inconclusive", "invalid"]

# The overall verdict is the most serious of the batch sizes', in this order.
VERDICT_SEVERITY: tuple[Verdict, ...] = ("invalid", "regression", "inconclusive", "improvement", "pass")


MetricKey = Literal["gpu_ms", "tok_per_s"]  # the two metrics a verdict is decided on


class TokenMismatch(BaseModel):
    """Where two token sequences first differ. `step` counts generated tokens from 1,
    warmup steps included; `sequence` is the row of the batch."""

    step: int
    sequence: int
    expected: int
    found: int


class ArmStats(BaseModel):
    arm: str
    repeats: int
    gpu_ms_per_step: Spread
    tok_per_s: Spread
    # CUDA-event time of the end-to-end pass, the host's launch time included (GPU only)
    end_to_end_gpu_ms_per_step: Spread | None = None
    timer: str
    sha256: str  # the token hash of the first repeat; `deterministic` says if all agree
    deterministic: bool


class BatchComparison(BaseModel):
    batch_size: int
    verdict: Verdict
    reasons: list[str] = []
    arms: list[ArmStats]
    gpu_ms_change: Change | None = None  # head vs base; positive is slower
    tok_per_s_change: Change | None = None  # head vs base; negative is slower
    end_to_end_gpu_ms_change: Change | None = None  # head vs base, launch time included; informative
    # each metric's own verdict; `verdict` is the more severe of the two (None in older reports)
    gpu_ms_verdict: Verdict | None = None
    tok_per_s_verdict: Verdict | None = None
    # the inconclusive metrics whose slowdown is significant: undecided because the change
    # sits at the threshold, not because it is lost in the noise
    at_threshold: list[MetricKey] = []
    hash_match: bool | None = None
    mismatch: TokenMismatch | None = None
    near_threshold: bool = False  # inconclusive, or a regression whose interval reaches under the threshold


class Comparison(BaseModel):
    verdict: Verdict
    reasons: list[str] = []
    hash_match: bool | None
    threshold_pct: float  # GPU ms per step
    tok_threshold_pct: float
    alpha: float
    confidence: float
    batches: list[BatchComparison]
    warnings: list[str] = []  # e.g. throttling or other processes during a repeat
    gpu_fingerprint: dict[str, Any] = {}  # what every repeat's GPU state shares

    @property
    def near_threshold(self) -> bool:
        return self.verdict != "invalid" and any(b.near_threshold for b in self.batches)
