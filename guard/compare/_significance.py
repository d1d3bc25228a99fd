"""The significance rule, by which reports of schema 1 were decided: a change counted when
p < alpha and its point estimate was at least the threshold. The guard no longer decides by
it; it is kept so that a schema-1 report read back is decided again by the rule that made it.
"""

from __future__ import annotations

from dataclasses import dataclass

from guard.compare._models import BatchComparison, MetricKey, Verdict, most_severe
from guard.compare._rule import Rule
from guard.measure import MOST_REPEATS, PASS_RATE, Spread, detectable_change_pct, repeats_to_rule_out


@dataclass(frozen=True)
class _Slowdown:
    """A metric's change as a slowdown in percent (positive is slower), with its interval."""

    pct: float
    low: float
    high: float
    p_value: float

    def verdict(self, threshold_pct: float, alpha: float) -> Verdict:
        if self.p_value < alpha and self.pct >= threshold_pct:
            return "regression"
        if self.p_value < alpha and -self.pct >= threshold_pct:
            return "improvement"
        if self.high >= threshold_pct:
            return "inconclusive"
        return "pass"

    def shown_past(self, threshold_pct: float) -> Verdict:
        """An informational metric: a change counts only when its whole interval is past the threshold."""
        if self.low >= threshold_pct:
            return "regression"
        if -self.high >= threshold_pct:
            return "improvement"
        return "pass"


@dataclass(frozen=True)
class _Metric:
    key: MetricKey
    label: str
    verdict: Verdict
    slowdown: _Slowdown
    threshold: float
    spreads: list[Spread]  # base, head


def decide_by_significance(measured: BatchComparison, base: str, head: str, rule: Rule) -> BatchComparison:
    by_name = {a.arm: a for a in measured.arms}
    gpu_change, tok_change = measured.gpu_ms_change, measured.tok_per_s_change
    assert gpu_change is not None and tok_change is not None
    gpu = _Slowdown(gpu_change.pct, gpu_change.ci_low_pct, gpu_change.ci_high_pct, gpu_change.p_value)
    tok = _Slowdown(-tok_change.pct, -tok_change.ci_high_pct, -tok_change.ci_low_pct, tok_change.p_value)
    tok_values = [by_name[name].tok_per_s.values for name in (base, head)]
    tok_detectable = (detectable_change_pct(tok_values, min(len(v) for v in tok_values), rule.confidence)
                      if rule.tok_roles else None)
    tok_gates = tok_detectable is None or tok_detectable <= rule.tok_pct
    verdicts = (
        gpu.verdict(rule.gpu_pct, rule.alpha),
        tok.verdict(rule.tok_pct, rule.alpha) if tok_gates else tok.shown_past(rule.tok_pct),
    )
    verdict = most_severe(list(verdicts))
    at_threshold: list[MetricKey] = []
    if verdict == "inconclusive":
        metrics = [
            _Metric("gpu_ms", "GPU ms per step", verdicts[0], gpu, rule.gpu_pct,
                    [by_name[name].gpu_ms_per_step for name in (base, head)]),
            _Metric("tok_per_s", "tok/s", verdicts[1], tok, rule.tok_pct,
                    [by_name[name].tok_per_s for name in (base, head)]),
        ]
        at_threshold = [m.key for m in metrics if m.verdict == "inconclusive" and m.slowdown.p_value < rule.alpha]
    thresholds = (rule.gpu_pct, rule.tok_pct)
    marginal = any(v == "regression" and m.low < t for v, m, t in zip(verdicts, (gpu, tok), thresholds))
    return measured.model_copy(update={
        "verdict": verdict,
        "gpu_ms_verdict": verdicts[0], "tok_per_s_verdict": verdicts[1], "at_threshold": at_threshold,
        "tok_per_s_gates": tok_gates, "tok_per_s_detectable_pct": tok_detectable,
        "tok_per_s_repeats_to_gate": None if tok_gates else repeats_to_rule_out(tok_values, rule.tok_pct,
                                                                                 rule.confidence),
        "undecided": verdict == "inconclusive" or marginal,
    })


def _what_would_decide(undecided: list[tuple[str, list[Spread], float]], repeats: int, confidence: float) -> str:
    """How many repeats per arm would, at this spread, let a commit that changes nothing pass."""
    needed = []
    for label, spreads, threshold in undecided:
        n = repeats_to_rule_out([s.values for s in spreads], threshold, confidence)
        count = f"more than {MOST_REPEATS}" if n is None else f"about {n}"
        needed.append(f"{count} repeats per arm to pass a {threshold:g}% threshold in {label}")
    return (
        f"At this spread, an unchanged commit needs {' and '.join(needed)} {PASS_RATE:.0%} of the time "
        f"(this run: {repeats}); or quiet the runner, or set thresholds from `guard calibrate`"
    )


