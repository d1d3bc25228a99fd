"""The comparison's result: one section per batch size and an overall verdict."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

from guard.compare._borrow import Borrowing
from guard.compare._compiled import CompiledChange
from guard.compare._ranks import ArmRanks, RankChange
from guard.compare._reasons import Reason
from guard.compare._warnings import RunWarning
from guard.config import MetricKey, Rule
from guard.measure import (
    MIX_BATCH, Change, MarginFloor, MarginMismatch, SlowProcess, SourceLabel, Spread, TokenMismatch,
)

# at_threshold: a slowdown is shown, and its interval still holds the threshold after the last
# round; inconclusive: the interval holds both no change and the threshold (too noisy to show any).
Verdict = Literal["pass", "regression", "improvement", "at_threshold", "inconclusive", "invalid"]

# The overall verdict is the most serious of the batch sizes', in this order.
VERDICT_SEVERITY: tuple[Verdict, ...] = ("invalid", "regression", "at_threshold", "inconclusive", "improvement", "pass")
UNDECIDED: tuple[Verdict, ...] = ("at_threshold", "inconclusive")  # what another round could still decide


# Why a run took no further round: every batch size (and the mix) decided, the next round would
# not fit the time budget left, or the run took the most rounds it may (measure.max_rounds).
# futile (rule 5): the rounds left could not measure the processes any undecided batch size needs
RoundsStop = Literal["decided", "budget", "max_rounds", "futile"]


def most_severe(verdicts: list[Verdict]) -> Verdict:
    for verdict in VERDICT_SEVERITY:
        if verdict in verdicts:
            return verdict
    return "invalid"

# An arm's GPU-timed pass outran its hold when more than this share of its steps were still
# being launched as the hold ran out: their GPU time then includes the host's launch time.
UNHELD_SHARE = 0.05


class ArmStats(BaseModel):
    arm: str
    repeats: int
    gpu_ms_per_step: Spread
    tok_per_s: Spread
    # CUDA-event time of the end-to-end pass, the host's launch time included, its mean per process (GPU only)
    end_to_end_gpu_ms_per_step: Spread | None = None
    # the host's enqueue time per step in the GPU-timed pass, its mean per process (GPU only)
    host_ms_per_step: Spread | None = None
    # the main thread's user-mode instructions per step of the end-to-end passes, per process
    # (where every process had the hardware counter); no key without
    instructions_per_step: Spread | None = Field(default=None, exclude_if=lambda value: value is None)
    # where a process had no count: why, as the first such process said (no key where every one counted)
    instructions_unavailable: str | None = Field(default=None, max_length=300,
                                                 exclude_if=lambda value: value is None)
    timer: str
    sha256: str  # the token hash of the first repeat; `deterministic` says if all agree
    deterministic: bool | None  # None when the inputs were forced: then `Agreement` judges the tokens
    steps: int = 0  # timed steps per pass
    # per process, the GPU-timed steps whose launch outlasted the hold (their time includes host time)
    unheld_steps: list[int] = []

    # more than UNHELD_SHARE of its GPU-timed steps were unheld: decided when compared, kept
    outran_hold: bool = False
    # several ranks: each one's figures, a straggler, another path (_ranks.py); no key with one
    ranks: ArmRanks | None = Field(default=None, exclude_if=lambda value: value is None)

    @model_validator(mode="before")
    @classmethod
    def _decided_where_missing(cls, data: Any) -> Any:
        """Reports written before the field existed: decided from their own unheld counts."""
        if isinstance(data, dict) and "outran_hold" not in data and data.get("unheld_steps") and data.get("steps"):
            unheld = data["unheld_steps"]
            data = data | {"outran_hold": sum(unheld) > UNHELD_SHARE * data["steps"] * len(unheld)}
        return data

    @property
    def unheld_share(self) -> float:
        """Of all its GPU-timed steps, the share whose launch outlasted the hold."""
        return sum(self.unheld_steps) / (self.steps * len(self.unheld_steps)) if self.unheld_steps and self.steps else 0


class ArmAgreement(BaseModel):
    """One arm's processes, forced with the reference: how often their outputs disagreed."""

    arm: str
    disagreements: list[int]  # per process, in the order they ran
    compared: int  # (step, sequence) outputs compared per process
    output_changed: bool = False  # against base, by the rule in compare/_agreement.py: another function
    # every process disagrees more than every base one, by less than a change of output: rounding
    numerics_changed: bool = False
    # base is exact, and some of this arm's processes disagreed, not all: not a change by the rule
    some_disagree: bool = False
    excess: float = 0.0  # mean disagreements above base's (0 for base)
    min_excess: float = 0.0  # what the rule asks of `excess` for a change of output
    first_disagreement: TokenMismatch | None = None
    # where the reference recorded its top logits (Agreement.margin_floor): per process, the
    # disagreements at outputs whose reference margin was above the floor, of how many such
    # outputs, and the first; the margin rule decides `output_changed` from these
    confident: list[int] | None = Field(default=None, exclude_if=lambda value: value is None)
    confident_compared: int = Field(default=0, exclude_if=lambda value: value == 0)
    first_confident: MarginMismatch | None = Field(default=None, exclude_if=lambda value: value is None)

    @property
    def first_change(self) -> TokenMismatch | None:
        """Where the output changed: its first confident disagreement under the margin rule."""
        return self.first_confident if self.confident is not None else self.first_disagreement

    @property
    def most_pct(self) -> float:
        """The largest share of outputs that disagreed in one process, in percent."""
        return max(self.disagreements) / self.compared * 100 if self.compared else 0.0


class Agreement(BaseModel):
    """Teacher-forced runs of one batch size: every process decoded from the same inputs."""

    reference: SourceLabel  # where the forced ids came from
    exact: bool  # every base process reproduced the reference exactly
    arms: list[ArmAgreement]
    unforced: list[str] = []  # arms whose step() took no input ids, so they ran free: not like for like
    # the margin rule's floor, where every judged arm's confident disagreements were counted;
    # None: the count rule decided (no reference logits)
    margin_floor: MarginFloor | None = Field(default=None, exclude_if=lambda value: value is None)

    def arm(self, name: str) -> ArmAgreement | None:
        return next((a for a in self.arms if a.arm == name), None)


class BatchComparison(BaseModel):
    batch_size: int  # MIX_BATCH for the batch-size mix, decided like a batch size
    verdict: Verdict
    reasons: list[Reason] = []  # why it is invalid
    arms: list[ArmStats]
    gpu_ms_change: Change | None = None  # head vs base; positive is slower
    tok_per_s_change: Change | None = None  # head vs base; negative is slower
    end_to_end_gpu_ms_change: Change | None = None  # head vs base, launch time included
    host_ms_change: Change | None = None  # head vs base, host enqueue time per step; informative
    # head vs base, user-mode instructions per step: a host cost the machine's state does not
    # move, at the level of the verdict's bounds, every process kept (no key where an arm had no
    # counter); from rule 4 the bounds `instructions_verdict` was decided on
    instructions_change: Change | None = Field(default=None, exclude_if=lambda value: value is None)
    # rule 4: a rise whose whole interval is past measure.instructions_threshold_pct is a
    # regression, anything else a pass (never an improvement, never undecided); no key where it
    # was not decided: a process without the counter, or a report from before rule 4
    instructions_verdict: Verdict | None = Field(default=None, exclude_if=lambda value: value is None)
    # each metric's own verdict; `verdict` is the most severe of them (None for invalid)
    gpu_ms_verdict: Verdict | None = None
    tok_per_s_verdict: Verdict | None = None
    # the metric whose verdict `verdict` is (GPU ms on a tie); None for a pass, where every
    # gating metric ruled its threshold out, and for invalid
    decided_by: MetricKey | None = None
    # tok/s gates only where this run could detect a change of its threshold; otherwise it is
    # informational: a slowdown counts only when its whole interval is past the threshold, and
    # noise never leaves the verdict undecided (older reports: it gated)
    tok_per_s_gates: bool = True
    tok_per_s_detectable_pct: float | None = None  # smallest tok/s change this run detects (PASS_RATE power)
    tok_per_s_repeats_to_gate: int | None = None  # repeats per arm at which it would gate; None: over MOST_REPEATS
    # False: tok/s detects only changes over UNMEASURABLE_FACTOR x its threshold (_interval.py) and
    # decided nothing: its interval is wider than the effect it could show (no key when True)
    tok_per_s_measurable: bool = Field(default=True, exclude_if=lambda value: value)
    # end-to-end ms per step (GPU only), decided as tok/s is: it gates where this run could detect
    # a change of its threshold, else it informs. No keys where it was not decided (a CPU's step
    # time is already end to end; the mix; reports written before it was decided)
    end_to_end_verdict: Verdict | None = Field(default=None, exclude_if=lambda value: value is None)
    end_to_end_gates: bool | None = Field(default=None, exclude_if=lambda value: value is None)
    end_to_end_detectable_pct: float | None = Field(default=None, exclude_if=lambda value: value is None)
    end_to_end_repeats_to_gate: int | None = Field(default=None, exclude_if=lambda value: value is None)
    end_to_end_bounds: Change | None = Field(default=None, exclude_if=lambda value: value is None)
    # The interval rule's own figures (None for invalid):
    # the error each one-sided bound may make, alpha split over looks x metrics x batch sizes;
    alpha_per_look: float | None = None
    # rule 5: each metric's own, its family's share split over the family's metrics decided here
    # (`Rule.alpha_per_bound`); its bounds are at 1 - 2 x this. No key before rule 5.
    alpha_per_bound: dict[MetricKey, float] = Field(default={}, exclude_if=lambda value: not value)
    look: int = 1  # the round whose processes (with the earlier rounds') decided it
    # each change between its two one-sided bounds at alpha_per_look: an interval at
    # confidence 1 - 2 x alpha_per_look, the one the verdict was decided on
    gpu_ms_bounds: Change | None = None
    tok_per_s_bounds: Change | None = None
    # what this run could see: per metric decided, the smallest true slowdown, in percent, its
    # bounds would have called a regression PASS_RATE (95%) of the time at this run's spread,
    # processes and alpha_per_look (`measure.smallest_caught_pct`); no key in reports before it
    caught_pct: dict[MetricKey, float] = Field(default={}, exclude_if=lambda value: not value)
    # the same figure at the calibration's spread instead of the run's (its `borrowed` check's),
    # where the thresholds file kept one: what the calibration said these processes would see
    expected_caught_pct: dict[MetricKey, float] = Field(default={}, exclude_if=lambda value: not value)
    # undecided: processes per arm that would tell decided_by's change from its threshold at
    # this spread, were the change what this run measured (rule 5: the most any metric left open
    # needs); None: more than MOST_REPEATS, or decided
    repeats_to_decide: int | None = None
    # undecided: the fewest processes per arm that would decide any metric it left open (None: more
    # than MOST_REPEATS): what the rounds loop asks before a round (`could_decide`); not a fact of
    # the report (rule 5's repeats_to_decide is the most), so never written
    fewest_to_decide: int | None = Field(default=None, exclude=True)
    # the metrics whose slowdown is shown (the interval leaves no change out) and whose
    # interval still holds the threshold: undecided for that reason, not for noise
    at_threshold: list[MetricKey] = []
    hash_match: bool | None = None  # None when the inputs were forced: `agreement` says instead
    mismatch: TokenMismatch | None = None
    agreement: Agreement | None = None  # teacher-forced runs: how often outputs disagreed, and the rule's call
    undecided: bool = False  # the rule left it open at its look: a confirmation round, where one is left
    # several ranks: what the head's did that base's did not (_ranks.py); no key with one
    rank_change: RankChange | None = Field(default=None, exclude_if=lambda value: value is None)
    # each metric the calibration kept a spread for: the check of the run's spread against it,
    # and whether its bounds pooled it in (_borrow.py); no key without a calibrated spread
    borrowed: list[Borrowing] = Field(default=[], exclude_if=lambda value: not value)
    # the processes of base and head left out of every figure's change and bounds, slow in GPU ms
    # per step by `measure.set_aside` (decision rule 3, schema 9 on); no key where none was
    set_aside: list[SlowProcess] = Field(default=[], exclude_if=lambda value: not value)

    def borrowing(self, metric: MetricKey) -> Borrowing | None:
        return next((b for b in self.borrowed if b.metric == metric), None)

    def alpha_of(self, metric: MetricKey) -> float | None:
        """The error each one-sided bound of `metric` may make: its own from rule 5, else the look's."""
        return self.alpha_per_bound.get(metric, self.alpha_per_look)

    def bounds(self, metric: MetricKey) -> Change | None:
        """The metric's change between the bounds it was decided on."""
        return {"gpu_ms": self.gpu_ms_bounds, "end_to_end_ms": self.end_to_end_bounds,
                "tok_per_s": self.tok_per_s_bounds, "instructions": self.instructions_change}[metric]

    @property
    def mix(self) -> bool:
        """This is the batch-size mix's comparison."""
        return self.batch_size == MIX_BATCH


class Comparison(BaseModel):
    """The verdict and what it was decided on; a report is a comparison with the run around it."""

    verdict: Verdict
    reasons: list[Reason] = []  # why it is invalid
    hash_match: bool | None
    # what decided it: each metric's threshold and where it came from, alpha over the looks the run
    # could take (2 with a confirmation round) and the batch sizes, the confidence of the intervals
    # shown, the calibration's spreads the bounds could borrow, and the at-threshold policy
    rule: Rule
    batch_sizes: list[BatchComparison]
    warnings: list[RunWarning] = []  # about the runs: throttling, other processes, missing fingerprints
    gpu_fingerprint: dict[str, Any] = {}  # the NVML fingerprint fields every repeat shares
    # the batch-size mix, decided like a batch size and counted in `verdict` and in alpha's
    # split; None: the run had no mix (or its report predates the mix's verdict)
    # (no key without one: a report without a mix is what schema 5 wrote, byte for byte)
    mix_comparison: BatchComparison | None = Field(default=None, exclude_if=lambda value: value is None)
    # what dynamo compiled in base's processes and head's (compare/_compiled.py); no key where
    # neither used torch.compile
    compiled: CompiledChange | None = Field(default=None, exclude_if=lambda value: value is None)

    @model_validator(mode="after")
    def _mix_is_the_mix(self) -> "Comparison":
        if any(b.mix for b in self.batch_sizes):
            raise ValueError(f"batch_sizes holds batch size {MIX_BATCH}, the mix's: it is mix_comparison")
        if self.mix_comparison is not None and not self.mix_comparison.mix:
            raise ValueError(f"mix_comparison is not the mix's: its batch size is {MIX_BATCH}")
        return self

    def decided(self) -> list[BatchComparison]:
        """Everything the verdict was decided over: the batch sizes, then the mix."""
        return self.batch_sizes + ([self.mix_comparison] if self.mix_comparison is not None else [])

    @property
    def undecided_sizes(self) -> list[int]:
        """The batch sizes another round would measure: none when the comparison is invalid."""
        return [] if self.verdict == "invalid" else [b.batch_size for b in self.batch_sizes if b.undecided]

    @property
    def mix_undecided(self) -> bool:
        """Another round would measure the mix."""
        return self.verdict != "invalid" and self.mix_comparison is not None and self.mix_comparison.undecided
