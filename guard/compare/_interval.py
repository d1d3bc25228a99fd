"""The interval rule: each metric's slowdown between one-sided bounds, held against its threshold T.

Each bound is wrong at most `alpha_per_look` of the time: the run's alpha split (Bonferroni)
over the looks it may take (2 with a confirmation round), the 2 metrics and the batch sizes.
Per metric:
- regression: the lower bound of the slowdown is above T; improvement: the upper bound is below -T;
- pass: the upper bound is below T;
- otherwise undecided: at_threshold where the lower bound is above 0 (a slowdown is shown, its
  size is not told from T), inconclusive where it is not (no change and T both fit).
A metric that does not gate (tok/s, too noisy to detect T at this run's repeats) decides a
regression or an improvement only; undecided, it passes, so its noise never holds a verdict open.
A tok/s that detects only changes over UNMEASURABLE_FACTOR x its threshold and decided nothing
is not measurable here (`tok_per_s_measurable`): its interval is wider than any effect the run is
asked about, and the report leaves its row out.
A batch size takes its most severe metric's verdict and names that metric. p-values are kept
in the report beside the shown intervals; they decide nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from guard.compare._models import METRICS, UNDECIDED, BatchComparison, MetricKey, Verdict, most_severe
from guard.compare._rule import Rule
from guard.measure import Change, detectable_change_pct, relative_change, repeats_to_decide, repeats_to_rule_out


# tok/s is not measurable here where the smallest change it detects is over this many times its
# threshold. The H200 A/A pairs at a 1% threshold, 3 processes per arm: the compiled engines
# detect 154-199% (left out), the reference engine 11.7% (kept, informing); at 5% it is left out
# where it could not detect a 2x slowdown (docs/measurements/tok-per-s-windows-h200.md).
UNMEASURABLE_FACTOR = 20.0


@dataclass(frozen=True)
class Slowdown:
    """A change as a slowdown in percent (positive is slower), between its one-sided bounds."""

    pct: float
    low: float
    high: float

    @classmethod
    def of_time(cls, change: Change) -> Slowdown:
        return cls(change.pct, change.ci_low_pct, change.ci_high_pct)

    @classmethod
    def of_rate(cls, change: Change) -> Slowdown:
        """A rate (tok/s) falls when decode slows."""
        return cls(-change.pct, -change.ci_high_pct, -change.ci_low_pct)

    def verdict(self, threshold_pct: float, gates: bool) -> Verdict:
        if self.low > threshold_pct:
            return "regression"
        if self.high < -threshold_pct:
            return "improvement"
        if self.high < threshold_pct or not gates:
            return "pass"
        return "at_threshold" if self.low > 0 else "inconclusive"


def decide_by_interval(measured: BatchComparison, base: str, head: str, rule: Rule) -> BatchComparison:
    """`measured` (its arms and shown changes) decided by the interval rule at `rule.look`."""
    by_name = {a.arm: a for a in measured.arms}
    level = rule.bounds_confidence
    gpu_values = [by_name[name].gpu_ms_per_step.values for name in (base, head)]
    tok_values = [by_name[name].tok_per_s.values for name in (base, head)]
    gpu_bounds = relative_change(*gpu_values, level)
    tok_bounds = relative_change(*tok_values, level)
    # tok/s gates where an unchanged commit would pass it PASS_RATE of the time: its upper bound then
    # falls under the threshold, as the decision's own level asks
    tok_detectable = detectable_change_pct(tok_values, min(len(v) for v in tok_values), level)
    tok_gates = tok_detectable <= rule.tok_pct
    slowdowns = {"gpu_ms": Slowdown.of_time(gpu_bounds), "tok_per_s": Slowdown.of_rate(tok_bounds)}
    thresholds = {"gpu_ms": rule.gpu_pct, "tok_per_s": rule.tok_pct}
    values = {"gpu_ms": gpu_values, "tok_per_s": tok_values}
    verdicts: dict[MetricKey, Verdict] = {
        "gpu_ms": slowdowns["gpu_ms"].verdict(rule.gpu_pct, gates=True),
        "tok_per_s": slowdowns["tok_per_s"].verdict(rule.tok_pct, gates=tok_gates),
    }
    tok_measurable = (tok_detectable <= UNMEASURABLE_FACTOR * rule.tok_pct
                      or verdicts["tok_per_s"] in ("regression", "improvement"))
    verdict = most_severe(list(verdicts.values()))
    decided_by = next((m for m in METRICS if verdicts[m] == verdict), None) if verdict != "pass" else None
    needed = None
    if decided_by is not None and verdict in UNDECIDED:
        needed = repeats_to_decide(values[decided_by], slowdowns[decided_by].pct, thresholds[decided_by], level)
    return measured.model_copy(update={
        "verdict": verdict,
        "gpu_ms_verdict": verdicts["gpu_ms"],
        "tok_per_s_verdict": verdicts["tok_per_s"],
        "decided_by": decided_by,
        "tok_per_s_gates": tok_gates,
        "tok_per_s_detectable_pct": tok_detectable,
        "tok_per_s_measurable": tok_measurable,
        "tok_per_s_repeats_to_gate": None if tok_gates else repeats_to_rule_out(tok_values, rule.tok_pct, level),
        "alpha_per_look": rule.alpha_per_look,
        "look": rule.look,
        "gpu_ms_bounds": gpu_bounds,
        "tok_per_s_bounds": tok_bounds,
        "repeats_to_decide": needed,
        "at_threshold": [m for m in METRICS if verdicts[m] == "at_threshold"],
        "undecided": verdict in UNDECIDED,
    })
