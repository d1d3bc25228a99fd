"""The interval rule: each metric's slowdown between one-sided bounds, held against its threshold T.

Each bound is wrong at most `alpha_per_look` of the time: the share of the run's alpha its
look spends (rule 2 on: a Pocock-type function over the looks the time budget holds), split
over the 2 families and the batch sizes (`guard/config/_rule.py`).
Per metric:
- regression: the lower bound of the slowdown is above T; improvement: the upper bound is below -T;
- pass: the upper bound is below T;
- otherwise undecided: at_threshold where the lower bound is above 0 (a slowdown is shown, its
  size is not told from T), inconclusive where it is not (no change and T both fit).
GPU ms per step always gates. tok/s and end-to-end ms per step (unheld: what the user feels,
the host's launch time included) gate where this run's processes could detect their T; where
they could not (too noisy at this run's repeats), an interval wholly past +T or -T still
decides that direction, and a slowdown they show (lower bound above 0) keeps the batch size
open (at_threshold); undecided without a slowdown shown, they pass, so their noise alone never
holds a verdict open.
Host instructions per step (rule 4, where every process of base and head counted them) decide a
regression where their whole interval is past +T, and nothing else: a fall is no faster decode
where the device bounds the step, and at their spread (far under 1%) any change of a few
instructions is shown, so a rise not told from T passes rather than keeping the batch size open.
Within a batch size, what any metric decided stands over what another left undecided
(`batch_verdict`): a regression first, then a slowdown shown, then an improvement, then
inconclusive. So a step whose end-to-end time fell by half is an improvement even where GPU ms
is too noisy to say, and a host-only slowdown is never passed while it shows.
A tok/s that detects only changes over UNMEASURABLE_FACTOR x its threshold and decided nothing
is not measurable here (`tok_per_s_measurable`): its interval is wider than any effect the run is
asked about, and the report leaves its row out.
Where the thresholds file kept the calibration's spreads, each metric's bounds pool the run's
spread with the calibrated one's upper limit, unless the run's own is past it (`_borrow.py`).
A batch size names the metric its verdict came from: for an improvement, what the user feels
(end-to-end ms, then tok/s) where it decided one. p-values are kept
in the report beside the shown intervals; they decide nothing.

Rule 5 (schema 12) decides what the user feels first (`Rule.felt_gates`): end-to-end ms and
tok/s always gate, each at its own threshold, so a felt upper bound past it never passes; within
a batch size a felt regression, then a felt improvement, stand over what GPU ms and host
instructions say, and a felt figure left undecided keeps an improvement GPU ms alone shows from
going green (`_felt_first`). Each bound's error is its family's share split over the family's
metrics decided at the batch size (`Rule.alpha_per_bound`), and what the run could see is stated
at the upper limit of its spread (SPREAD_LIMIT_CONFIDENCE).
"""

from __future__ import annotations

from dataclasses import dataclass

from guard.compare._borrow import Borrowing, borrowing
from guard.compare._models import UNDECIDED, VERDICT_SEVERITY, ArmStats, BatchComparison, MetricKey, Verdict
from guard.config import FELT_METRICS, METRICS, Rule
from guard.measure import (
    SPREAD_LIMIT_CONFIDENCE, Change, PriorSpread, detectable_change_pct, relative_change, repeats_to_decide,
    repeats_to_rule_out,
    caught_at_spread, smallest_caught_pct,
)


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

    @classmethod
    def of(cls, change: Change, metric: MetricKey) -> Slowdown:
        return cls.of_rate(change) if metric == "tok_per_s" else cls.of_time(change)

    def verdict(self, threshold_pct: float, gates: bool, shown_keeps_open: bool = True,
                rise_only: bool = False) -> Verdict:
        """`shown_keeps_open`: a slowdown shown (lower bound above 0) but not told from T is
        at_threshold even where the metric does not gate (False: it then passes, schema 7's rule).
        `rise_only`: a regression wholly past T, or a pass (host instructions)."""
        if self.low > threshold_pct:
            return "regression"
        if rise_only:
            return "pass"
        if self.high < -threshold_pct:
            return "improvement"
        if self.high < threshold_pct or not (gates or shown_keeps_open and self.low > 0):
            return "pass"
        return "at_threshold" if self.low > 0 else "inconclusive"


# Within one batch size: what a metric decided stands over what another left undecided, and a
# slowdown shown stands over an improvement (it keeps the batch size open for another round).
_WITHIN_SIZE: tuple[Verdict, ...] = ("regression", "at_threshold", "improvement", "inconclusive", "pass")
_FELT_FIRST: tuple[MetricKey, ...] = ("end_to_end_ms", "tok_per_s", "gpu_ms")


def batch_verdict(verdicts: dict[MetricKey, Verdict], felt_decides: bool = True, felt_gates: bool = False) -> tuple[
        Verdict, MetricKey | None]:
    """One batch size's verdict from its metrics', and the metric it came from (None for a
    pass). A regression or an undecided verdict names the first metric in METRICS order that
    gave it (GPU ms first: the device's figure explains the cause); an improvement names what the
    user feels where it decided one (end-to-end ms, then tok/s: one pass's two figures). `felt_decides` False: the
    most severe metric's verdict, named by the first metric that gave it (schema 7's rule).
    `felt_gates` (rule 5, `_felt_first`): what the user feels decides first."""
    if felt_gates and verdicts:
        return _felt_first(verdicts)
    order = _WITHIN_SIZE if felt_decides else VERDICT_SEVERITY
    verdict = next(v for v in order if v in verdicts.values()) if verdicts else "invalid"
    if verdict == "pass":
        return verdict, None
    order = _FELT_FIRST if verdict == "improvement" and felt_decides else METRICS
    return verdict, next(m for m in order if verdicts.get(m) == verdict)


def _felt_first(verdicts: dict[MetricKey, Verdict]) -> tuple[Verdict, MetricKey | None]:
    """Rule 5's verdict of a batch size, in this order:
    - a regression of a felt metric (end-to-end ms, tok/s);
    - an improvement of a felt metric, none showing a slowdown: over whatever GPU ms and host
      instructions say (a step the user gets 1.5x faster is an improvement where padding made
      each step 1% more GPU work; the comment says what the device figure did);
    - a regression of GPU ms or host instructions, where the felt metrics decided no direction;
    - a slowdown shown (at_threshold), by any metric;
    - a felt metric undecided: over an improvement GPU ms alone shows, so that a step the user
      may feel slower is never green;
    - an improvement of GPU ms; any metric undecided; else a pass.
    A regression or an undecided verdict names the first metric in METRICS order that gave it
    (GPU ms first: the device's figure explains the cause); an improvement, the first felt metric
    that did (else GPU ms)."""
    felt = {m: v for m, v in verdicts.items() if m in FELT_METRICS}

    def named(verdict: Verdict, among: dict[MetricKey, Verdict]) -> tuple[Verdict, MetricKey]:
        order = _FELT_FIRST if verdict == "improvement" else METRICS
        return verdict, next(m for m in order if among.get(m) == verdict)

    if "regression" in felt.values():
        return named("regression", verdicts)
    if "improvement" in felt.values() and "at_threshold" not in felt.values():
        return named("improvement", felt)
    for verdict, among in (("regression", verdicts), ("at_threshold", verdicts), ("inconclusive", felt),
                           ("improvement", verdicts), ("inconclusive", verdicts)):
        if verdict in among.values():
            return named(verdict, verdicts if verdict == "inconclusive" else among)
    return "pass", None


@dataclass(frozen=True)
class _Decided:
    """One metric held against its threshold: its bounds, whether it gates, its verdict."""

    values: list[list[float]]
    bounds: Change
    slowdown: Slowdown
    threshold_pct: float
    gates: bool
    detectable_pct: float | None
    verdict: Verdict
    level: float  # the two-sided level of `bounds`
    prior: PriorSpread | None = None  # the calibrated spread pooled in, where it was


def time_ratio(slowdown_pct: float, metric: MetricKey) -> float:
    """A slowdown as a ratio of step times, head over base: a rate that fell by 73% (a slowdown
    of 73) is a step 3.7 times as long; a time that rose 25% is 1.25."""
    return 1 / (1 - slowdown_pct / 100) if metric == "tok_per_s" else 1 + slowdown_pct / 100


def _decide(values: list[list[float]], threshold_pct: float, level: float, rate: bool, always: bool,
            borrowed: Borrowing | None = None, shown_keeps_open: bool = True, device: bool = False) -> _Decided:
    """A metric that gates `always` (GPU ms; from rule 5 end-to-end ms and tok/s too), or where an
    unchanged commit would pass it PASS_RATE of the time: its upper bound then falls under the
    threshold, as the decision's own level asks (tok/s, end-to-end ms to rule 4). `borrowed`: the
    calibrated spread's check, pooled in where it passed. What the run detects is stated for every
    metric but the `device`'s (GPU ms), whether it gates or not."""
    prior = borrowed.prior() if borrowed else None
    bounds = relative_change(*values, level, prior=prior)
    slowdown = Slowdown.of_rate(bounds) if rate else Slowdown.of_time(bounds)  # tok/s alone is a rate
    detectable = None if device else detectable_change_pct(values, min(len(v) for v in values), level, prior=prior)
    gates = always or detectable <= threshold_pct  # type: ignore[operator]
    return _Decided(values, bounds, slowdown, threshold_pct, gates, detectable,
                    slowdown.verdict(threshold_pct, gates=gates, shown_keeps_open=shown_keeps_open), level, prior)


def _to_decide(d: _Decided, rate: bool) -> int | None:
    """The processes per arm that would tell `d`'s change from its threshold at its spread: on the
    log scale of the figure itself, a rate's threshold being its fall by T (its slowdown's
    percent, past -100% for a rate that more than doubled, has no logarithm)."""
    if rate:
        return repeats_to_decide(d.values, d.bounds.pct, -d.threshold_pct, d.level, prior=d.prior)
    return repeats_to_decide(d.values, d.slowdown.pct, d.threshold_pct, d.level, prior=d.prior)


def _decide_rise(values: list[list[float]], threshold_pct: float, level: float) -> _Decided:
    """Host instructions per step: a regression where the whole interval is past the threshold,
    else a pass; every process kept (a neighbour slows a process, it does not change what the
    process executes), no calibrated spread."""
    bounds = relative_change(*values, level)
    slowdown = Slowdown.of_time(bounds)
    return _Decided(values, bounds, slowdown, threshold_pct, False, None,
                    slowdown.verdict(threshold_pct, gates=False, rise_only=True), level)


def _decided_values(base: ArmStats, head: ArmStats, rule: Rule) -> dict[MetricKey, list[list[float]]]:
    """Base's values and head's of each metric the rule decides: GPU ms and tok/s, end-to-end
    ms where the rule has its threshold and both arms measured it, and host instructions where
    the rule decides them and every process of both arms counted them."""
    values: dict[MetricKey, list[list[float]]] = {
        "gpu_ms": [base.gpu_ms_per_step.values, head.gpu_ms_per_step.values],
        "tok_per_s": [base.tok_per_s.values, head.tok_per_s.values]}
    ends = [base.end_to_end_gpu_ms_per_step, head.end_to_end_gpu_ms_per_step]
    if rule.end_to_end_ms is not None and None not in ends:
        values["end_to_end_ms"] = [e.values for e in ends]  # type: ignore[union-attr]
    counted = [base.instructions_per_step, head.instructions_per_step]
    if rule.decides_instructions and None not in counted:
        values["instructions"] = [c.values for c in counted]  # type: ignore[union-attr]
    return values


def borrow_checks(base: ArmStats, head: ArmStats, batch_size: int, rule: Rule) -> list[Borrowing]:
    """The check of the run's spread against the calibrated one, for each metric the rule decides
    and holds a spread for: the changes shown and the bounds pool in those that passed (not host
    instructions: their own spread is far under any threshold that matters)."""
    checks = (borrowing(v, m, batch_size, rule.spreads) for m, v in _decided_values(base, head, rule).items()
              if m != "instructions")
    return [check for check in checks if check is not None]


def decide_by_interval(measured: BatchComparison, base: ArmStats, head: ArmStats, rule: Rule) -> BatchComparison:
    """`measured` (its shown changes and its calibrated spreads' checks, `borrow_checks`) decided
    by the interval rule at `rule.look` on `base`'s figures and `head`'s (without the processes
    set aside, where the rule sets any aside). A metric whose check passed pools the calibrated
    spread into its bounds, as into the change shown beside them."""
    values = _decided_values(base, head, rule)
    decided: dict[MetricKey, _Decided] = {
        m: _decide_rise(v, rule.pct(m), rule.bound_level(m, values)) if m == "instructions" else
        _decide(v, rule.pct(m), rule.bound_level(m, values), rate=m == "tok_per_s",
                always=m == "gpu_ms" or rule.felt_gates, borrowed=measured.borrowing(m),
                shown_keeps_open=rule.felt_decides, device=m == "gpu_ms")
        for m, v in values.items()
    }
    verdicts = {m: decided[m].verdict for m in METRICS if m in decided}
    tok, end, counted = decided["tok_per_s"], decided.get("end_to_end_ms"), decided.get("instructions")
    # from rule 5 tok/s gates wherever it is measured: its row is always shown
    tok_measurable = (rule.felt_gates or tok.detectable_pct <= UNMEASURABLE_FACTOR * tok.threshold_pct  # type: ignore[operator]
                      or verdicts["tok_per_s"] in ("regression", "improvement"))
    verdict, decided_by = batch_verdict(verdicts, rule.felt_decides, rule.felt_gates)
    needed = fewest = None
    if decided_by is not None and verdict in UNDECIDED:
        # rule 5: what decides the batch size is every metric it left open, the one that needs most
        if rule.felt_gates:
            needs = [_to_decide(d, rate=m == "tok_per_s") for m, d in decided.items() if d.verdict in UNDECIDED]
        else:  # as rules 1 to 4 stated it: decided_by's alone, a rate's on its slowdown's scale
            by = decided[decided_by]
            needs = [repeats_to_decide(by.values, by.slowdown.pct, by.threshold_pct, by.level, prior=by.prior)]
        needed = None if None in needs else max(needs)  # type: ignore[type-var]
        within = [n for n in needs if n is not None]
        fewest = min(within) if within else None
    sight = {"at_spread_limit": SPREAD_LIMIT_CONFIDENCE} if rule.sight_at_limit else {}
    return measured.model_copy(update={
        "verdict": verdict,
        "gpu_ms_verdict": verdicts["gpu_ms"],
        "tok_per_s_verdict": verdicts["tok_per_s"],
        "decided_by": decided_by,
        "tok_per_s_gates": tok.gates,
        "tok_per_s_detectable_pct": tok.detectable_pct,
        "tok_per_s_measurable": tok_measurable,
        "tok_per_s_repeats_to_gate": None if tok.gates else repeats_to_rule_out(tok.values, tok.threshold_pct,
                                                                                 tok.level, prior=tok.prior),
        "end_to_end_verdict": end.verdict if end else None,
        "end_to_end_gates": end.gates if end else None,
        "end_to_end_detectable_pct": end.detectable_pct if end else None,
        "end_to_end_repeats_to_gate": (repeats_to_rule_out(end.values, end.threshold_pct, end.level,
                                                           prior=end.prior) if end and not end.gates else None),
        "end_to_end_bounds": end.bounds if end else None,
        "instructions_verdict": counted.verdict if counted else None,
        # at the level its verdict was decided at (rule 5: its own share of the host family's alpha)
        "instructions_change": counted.bounds if counted else measured.instructions_change,
        "alpha_per_look": rule.alpha_per_look,
        "alpha_per_bound": {m: rule.alpha_per_bound(m, values) for m in decided} if rule.version >= 5 else {},
        "look": rule.look,
        "gpu_ms_bounds": decided["gpu_ms"].bounds,
        "tok_per_s_bounds": tok.bounds,
        "repeats_to_decide": needed,
        "fewest_to_decide": fewest,
        "at_threshold": [m for m in verdicts if verdicts[m] == "at_threshold"],
        "undecided": verdict in UNDECIDED,
        "caught_pct": {m: smallest_caught_pct(d.values, min(len(v) for v in d.values), d.threshold_pct, d.level,
                                              prior=d.prior, **sight)
                       for m, d in decided.items()} if rule.version >= 2 else {},
        "expected_caught_pct": {
            c.metric: caught_at_spread((c.calibrated_sd_pct / 100) ** 2, min(len(v) for v in decided[c.metric].values),
                                       decided[c.metric].threshold_pct, decided[c.metric].level,
                                       extra_dof=c.calibrated_dof, **sight)
            for c in measured.borrowed if c.metric in decided} if rule.version >= 2 else {},
    })
