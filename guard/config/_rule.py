"""The rule a verdict is decided by, as one record: each metric's threshold and where it came
from, the error level and the looks it is spent over, the confidence shown, the calibrated
spreads the bounds may borrow, and what a verdict at the threshold sets. A run makes it from
its config (`Rule.of_config`), a report keeps it whole (`Comparison.rule`), and the compare
stage, the recheck of a stored report and the render layer all take it.

Four versions of the rule are kept, so that a stored report is decided again by its own:
- 1 (schema 7's reports): alpha split evenly (Bonferroni) over every look the run might take
  (measure.max_rounds) x 3 metrics x the batch sizes, and a batch size takes its most severe
  metric's verdict;
- 2 (schema 8 on): alpha split over the looks the time budget can hold (planned from the first
  round's process times), by a Pocock-type spending function, x 2 families (GPU ms; end-to-end
  ms with tok/s, the two figures of one pass) x the batch sizes; within a batch size, what the
  user feels decides (`compare/_interval.batch_verdict`);
- 3 (schema 9 on): as 2, and the slow processes of base and head (by GPU ms) are set aside before
  deciding (`measure.set_aside`; `compare/_set_aside.py`), the pipeline measuring both arms again
  in their place after the first round;
- 4 (schema 11 on): as 3, and where every process of base and head counted its host instructions
  per step, a rise whose whole interval is past their threshold is a regression of host cost; a
  bound of the host family, at its level (alpha is split as in 2). They decide nothing else: no
  improvement, and a rise not told from the threshold passes (docs/decision-rule.md);
- 5 (schema 12 on): as 4, decided on what the user feels:
  - each process's figure is its mean over its timed steps, tok/s its tokens over its decode's
    time (the harness's, made again by the guard), so a stall adds to the figure decided;
  - end-to-end ms and tok/s always gate, each at its own threshold: the config's, or the larger
    of measure.threshold_pct and what the calibration says this runner resolves; an upper bound
    past it is never a pass (`felt_gates`);
  - within a batch size a felt regression stands over everything, and a felt improvement (no felt
    slowdown shown) over what GPU ms and host instructions say; only where the felt metrics decide
    no direction do those decide, as in 2-4 (`compare/_interval.batch_verdict`);
  - each family's alpha is split over the metrics it decides at the batch size (GPU ms alone;
    end-to-end ms, tok/s and host instructions where counted), so each bound has its own level
    (`alpha_per_bound`);
  - what a run could see (`caught_pct`) is stated at the upper 95% limit of its spread, not the
    spread itself.

The record and its arithmetic (how alpha is split) live here, below the compare stage: they
import nothing but `math`, so every stage above can take the rule without taking another's. The
record holds its own ranges, so a rule out of them (a stored report's, edited) is never made.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from guard.config._models import MAX_ROUNDS, MeasureConfig
from guard.config._thresholds import CalibratedSpread, Thresholds

# the metrics a verdict is decided on: GPU ms per step (held), end-to-end ms per step (unheld:
# the host's launch time included, as the user feels it; GPU only), tok/s, and the main thread's
# user-mode instructions per step in the end-to-end passes (rule 4, where every process counted them)
MetricKey = Literal["gpu_ms", "end_to_end_ms", "tok_per_s", "instructions"]
# in the order a tie between them is named: instructions last, named only where no time or rate decided
METRICS: tuple[MetricKey, ...] = ("gpu_ms", "end_to_end_ms", "tok_per_s", "instructions")

# Where a run's threshold for a metric came from: the config (measure.threshold_pct, and for
# end-to-end ms measure.end_to_end_threshold_pct; instructions' is always the config's,
# measure.instructions_threshold_pct), the thresholds file `guard calibrate` wrote,
# or that file's GPU ms threshold where it wrote none for the metric: tok/s too noisy to gate
# where it was calibrated; end-to-end ms too noisy or not measured there, or a file from before
# it was calibrated.
ThresholdSource = Literal["configured", "calibrated", "gpu_ms_fallback"]
# What a verdict at the threshold sets (`measure.at_threshold`): neutral, or failing
AtThreshold = Literal["neutral", "fail"]

RULE_VERSION = 5
# Version 1: every look tests each metric of every batch size, so the error level is split this
# many ways per look and batch size. tok/s and end-to-end ms count even where they only inform,
# as they can still decide a regression, and end-to-end ms where it was not measured (a CPU, the
# mix): the split is the rule's, the same whatever the run measured. (GPU ms, end-to-end ms and
# tok/s: rule 1 never decided instructions.)
METRICS_PER_LOOK = 3
# Version 2: GPU ms, and the pass the user feels (end-to-end ms and tok/s: one pass's two figures,
# which move together; from version 4 the host instructions counted in that pass too); alpha is
# split over these families, not the figures
FAMILIES_PER_LOOK = 2
# What the user feels: the end-to-end pass's step time and its tokens per second. From version 5
# they always gate, and a direction they decide stands over the device's figures.
FELT_METRICS: tuple[MetricKey, ...] = ("end_to_end_ms", "tok_per_s")
# The families alpha is split over (version 2 on): the device's figure, and the end-to-end pass's
# (host instructions are counted in that pass). From version 5 a family's share is split again
# over the metrics it decides at a batch size.
FAMILY: dict[MetricKey, str] = {"gpu_ms": "device", "end_to_end_ms": "host", "tok_per_s": "host",
                                "instructions": "host"}


def spent(alpha: float, looks: int, look: int) -> float:
    """Alpha spent by the end of look `look` of `looks`: a Pocock-type spending function (Lan and
    DeMets), alpha x ln(1 + (e - 1) x look / looks). It spends more at the first look than an even
    split would (62% of alpha there with 2 looks, 36% with 4, against 50% and 25%), where most
    verdicts are made, and all of alpha by the last."""
    if not 1 <= look <= looks:
        raise ValueError(f"look {look} of {looks}")
    return alpha * math.log(1 + (math.e - 1) * look / looks)


def alpha_per_look(alpha: float, looks: int, batch_sizes: int, metrics: int = METRICS_PER_LOOK, *,
                   look: int = 1, version: int = 1) -> float:
    """The error each one-sided bound of look `look` may make, so that the chance that any bound
    a verdict rests on is wrong stays at most `alpha` (Bonferroni over the looks, the metrics or
    families, and the batch sizes). Version 1: alpha split evenly over `looks` x `metrics` (2
    for a report from before end-to-end ms was decided) x `batch_sizes`. Version 2: the alpha the
    spending function spends at this look, split over FAMILIES_PER_LOOK x `batch_sizes`."""
    if looks < 1 or batch_sizes < 1:
        raise ValueError("needs at least one look and one batch size")
    if version == 1:
        return alpha / (looks * metrics * batch_sizes)
    at_look = spent(alpha, looks, look) - (spent(alpha, looks, look - 1) if look > 1 else 0.0)
    return at_look / (FAMILIES_PER_LOOK * batch_sizes)


def bounds_level(alpha_per_bound: float) -> float:
    """The two-sided level whose tails are each `alpha_per_bound`: its interval holds both bounds."""
    return 1 - 2 * alpha_per_bound


def felt_threshold(measure: MeasureConfig, metric: Literal["end_to_end_ms", "tok_per_s"],
                   calibrated: Thresholds | None) -> Threshold:
    """End-to-end ms's or tok/s's threshold: measure.end_to_end_threshold_pct where set (end-to-end
    ms alone has one of its own); otherwise the larger of measure.threshold_pct and what the
    calibration says this runner resolves (the file's threshold for the metric), so that an
    unchanged commit passes it as often as the calibration promised. Without a calibration,
    measure.threshold_pct: a runner too noisy for it leaves runs undecided, and says so."""
    if metric == "end_to_end_ms" and measure.end_to_end_threshold_pct is not None:
        return Threshold(pct=measure.end_to_end_threshold_pct, source="configured")
    resolved = None if calibrated is None else (
        calibrated.end_to_end_ms_pct if metric == "end_to_end_ms" else calibrated.tok_per_s_pct)
    if resolved is not None and resolved > measure.threshold_pct:
        return Threshold(pct=resolved, source="calibrated")
    return Threshold(pct=measure.threshold_pct, source="configured")


class Threshold(BaseModel):
    """One metric's threshold in percent, and where it came from."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    pct: float = Field(gt=0, allow_inf_nan=False)
    source: ThresholdSource | None = None  # None: a report from before sources were kept


class Rule(BaseModel):
    """The settings a verdict is decided by, each within its range; a report keeps it whole."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    gpu_ms: Threshold
    tok_per_s: Threshold
    end_to_end_ms: Threshold | None  # None: not decided (a report from before it was: alpha over 2 metrics)
    # host instructions per step; None: not decided (rule 3 and before)
    instructions: Threshold | None = None
    alpha: float = Field(gt=0, lt=0.5)
    # of the intervals shown beside the verdict (`Change`), not the decision's
    confidence: float = Field(gt=0.5, lt=1)
    looks: int = Field(default=1, ge=1, le=MAX_ROUNDS)  # the looks alpha is spent over
    decided_sizes: int = Field(default=1, ge=0)  # the batch sizes (and the mix) alpha is split over
    # the round being decided, from 1: each batch size states its own (`BatchComparison.look`), not the report
    look: int = Field(default=1, ge=1, exclude=True)
    # the calibration's spreads, borrowed where the run's agrees with them (compare/_borrow.py)
    spreads: tuple[CalibratedSpread, ...] = ()
    at_threshold: AtThreshold = "neutral"
    version: int = Field(default=RULE_VERSION, ge=1, le=RULE_VERSION)  # which rule (this module's docstring)

    @model_validator(mode="after")
    def _held_to_its_own(self) -> Rule:
        if self.tok_per_s.pct >= 100:
            raise ValueError("tok_per_s's threshold is under 100%: tok/s cannot fall by 100% or more")
        if self.gpu_ms.source == "gpu_ms_fallback":
            raise ValueError("gpu_ms's threshold is configured or calibrated, never held to another's")
        return self

    @classmethod
    def of_config(cls, measure: MeasureConfig, calibrated: Thresholds | None = None) -> Rule:
        """The rule a run decides by: `measure`'s settings at its thresholds, or at those of the
        thresholds file it names (`calibrated`, with the spreads it kept): GPU ms at the file's
        threshold or measure.threshold_pct, end-to-end ms and tok/s each at its own
        (`felt_threshold`)."""
        gpu = (Threshold(pct=measure.threshold_pct, source="configured") if calibrated is None
               else Threshold(pct=calibrated.gpu_ms_pct, source="calibrated"))
        others = {metric: felt_threshold(measure, metric, calibrated) for metric in ("tok_per_s", "end_to_end_ms")}
        return cls(gpu_ms=gpu, **others,
                   instructions=Threshold(pct=measure.instructions_threshold_pct, source="configured"),
                   alpha=measure.alpha,
                   confidence=measure.confidence, looks=measure.looks,
                   spreads=tuple(calibrated.spreads) if calibrated is not None else (),
                   at_threshold=measure.at_threshold)

    def thresholds(self) -> dict[MetricKey, Threshold]:
        """Each metric the rule decides, at its threshold (in METRICS order)."""
        every: dict[MetricKey, Threshold | None] = {
            "gpu_ms": self.gpu_ms, "end_to_end_ms": self.end_to_end_ms, "tok_per_s": self.tok_per_s,
            "instructions": self.instructions}
        return {metric: threshold for metric in METRICS if (threshold := every[metric]) is not None}

    def pcts(self) -> dict[MetricKey, float]:
        """Each metric the rule decides, its threshold in percent."""
        return {metric: threshold.pct for metric, threshold in self.thresholds().items()}

    def pct(self, metric: MetricKey) -> float:
        """The threshold in percent of a metric the rule decides."""
        return self.thresholds()[metric].pct

    def sources(self) -> dict[MetricKey, ThresholdSource] | None:
        """Where each metric's threshold came from; None where one is not known (a report from before)."""
        known = {m: t.source for m, t in self.thresholds().items() if t.source is not None}
        return known if len(known) == len(self.thresholds()) else None

    @property
    def metrics_per_look(self) -> int:
        """The metrics alpha is split over by rule 1: those the rule decides."""
        return len(self.thresholds())

    @property
    def alpha_per_look(self) -> float:
        """The error each one-sided bound of this look may make (`alpha_per_look()`)."""
        return alpha_per_look(self.alpha, self.looks, self.decided_sizes, self.metrics_per_look, look=self.look,
                              version=self.version)

    def alpha_per_bound(self, metric: MetricKey, decided: Collection[MetricKey]) -> float:
        """The error a one-sided bound of `metric` may make at this look, where `decided` are the
        metrics decided at its batch size: from version 5 its family's share (`alpha_per_look`)
        split over the family's metrics among them; before, the family's whole share."""
        if self.version < 5:
            return self.alpha_per_look
        return self.alpha_per_look / sum(1 for m in decided if FAMILY[m] == FAMILY[metric])

    def bound_level(self, metric: MetricKey, decided: Collection[MetricKey]) -> float:
        """The two-sided level of `metric`'s interval that the verdict was decided on."""
        return bounds_level(self.alpha_per_bound(metric, decided))

    @property
    def felt_gates(self) -> bool:
        """End-to-end ms and tok/s always gate: an upper bound past the threshold never passes, and
        a direction they decide stands over GPU ms and host instructions (rule 5)."""
        return self.version >= 5

    @property
    def sight_at_limit(self) -> bool:
        """What the run could see is stated at the upper limit of its spread (rule 5)."""
        return self.version >= 5

    @property
    def felt_decides(self) -> bool:
        """Within a batch size, a direction any metric decided stands over what another left
        undecided, and a slowdown shown by a metric that does not gate keeps it open."""
        return self.version >= 2

    @property
    def decides_instructions(self) -> bool:
        """Host instructions per step decide a regression wholly past their threshold (rule 4)."""
        return self.version >= 4 and self.instructions is not None

    @property
    def sets_aside(self) -> bool:
        """Slow processes of base and head are left out of each metric's figures before deciding."""
        return self.version >= 3

    @property
    def bounds_confidence(self) -> float:
        return bounds_level(self.alpha_per_look)

    def at_look(self, look: int) -> Rule:
        return self.model_copy(update={"look": look})
