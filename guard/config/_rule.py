"""The rule a verdict is decided by, as one record: each metric's threshold and where it came
from, the error level and the looks it is spent over, the confidence shown, the calibrated
spreads the bounds may borrow, and what a verdict at the threshold sets. A run makes it from
its config (`Rule.of_config`), a report read back states it (`Report.rule`), and the compare
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
  improvement, and a rise not told from the threshold passes (docs/decision-rule.md).

The record and its arithmetic (how alpha is split) live here, below the compare stage: they
import nothing but `math`, so every stage above can take the rule without taking another's.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict

from guard.config._models import MeasureConfig
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
# as reports write them
_SOURCES_ORDER: tuple[MetricKey, ...] = ("gpu_ms", "tok_per_s", "end_to_end_ms", "instructions")
# What a verdict at the threshold sets (`measure.at_threshold`): neutral, or failing
AtThreshold = Literal["neutral", "fail"]

RULE_VERSION = 4
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


class Threshold(BaseModel):
    """One metric's threshold in percent, and where it came from."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    pct: float
    source: ThresholdSource | None = None  # None: a report from before sources were kept


class Rule(BaseModel):
    """The settings a verdict is decided by. Floats are kept as given (a stored report's may be
    out of range: the recheck says so, compare/_recheck.py)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    gpu_ms: Threshold
    tok_per_s: Threshold
    end_to_end_ms: Threshold | None  # None: not decided (a report from before it was: alpha over 2 metrics)
    # host instructions per step; None: not decided (rule 3 and before)
    instructions: Threshold | None = None
    alpha: float
    confidence: float  # of the intervals shown beside the verdict (`Change`), not the decision's
    looks: int = 1  # the looks alpha is spent over
    decided_sizes: int = 1  # the batch sizes (and the mix) alpha is split over
    look: int = 1  # the round being decided, from 1
    # the calibration's spreads, borrowed where the run's agrees with them (compare/_borrow.py)
    spreads: tuple[CalibratedSpread, ...] = ()
    at_threshold: AtThreshold = "neutral"
    version: int = RULE_VERSION  # which rule (this module's docstring); 1: schema 7's reports

    @classmethod
    def of_config(cls, measure: MeasureConfig, calibrated: Thresholds | None = None) -> Rule:
        """The rule a run decides by: `measure`'s settings at its thresholds, or at those of the
        thresholds file it names (`calibrated`, with the spreads it kept). The one place a metric
        without a threshold of its own takes GPU ms's: tok/s from the config (threshold_pct is
        both), end-to-end ms without measure.end_to_end_threshold_pct, and either where the file
        wrote it none (its source then `gpu_ms_fallback`)."""
        source: ThresholdSource
        held: ThresholdSource
        if calibrated is None:
            gpu, source, held = measure.threshold_pct, "configured", "configured"
            own = {"tok_per_s": None, "end_to_end_ms": measure.end_to_end_threshold_pct}
        else:
            gpu, source, held = calibrated.gpu_ms_pct, "calibrated", "gpu_ms_fallback"
            own = {"tok_per_s": calibrated.tok_per_s_pct, "end_to_end_ms": calibrated.end_to_end_ms_pct}
        others = {metric: Threshold(pct=gpu, source=held) if pct is None else Threshold(pct=pct, source=source)
                  for metric, pct in own.items()}
        return cls(gpu_ms=Threshold(pct=gpu, source=source), **others,
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
        """Where each metric's threshold came from, as a report keeps them (`threshold_sources`,
        GPU ms, tok/s, then end-to-end ms); None where one is not known (a report from before)."""
        decided = self.thresholds()
        known = {m: source for m in _SOURCES_ORDER if m in decided and (source := decided[m].source) is not None}
        return known if len(known) == len(decided) else None

    @property
    def metrics_per_look(self) -> int:
        """The metrics alpha is split over by rule 1: those the rule decides."""
        return len(self.thresholds())

    @property
    def alpha_per_look(self) -> float:
        """The error each one-sided bound of this look may make (`alpha_per_look()`)."""
        return alpha_per_look(self.alpha, self.looks, self.decided_sizes, self.metrics_per_look, look=self.look,
                              version=self.version)

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
