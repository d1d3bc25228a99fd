"""The decision rule: tokens must match, then a change must be significant and large."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from guard.compare._fingerprint import check_measurements
from guard.compare._hashes import first_mismatch
from guard.compare._agreement import agreement
from guard.compare._models import (
    UNHELD_SHARE, VERDICT_SEVERITY, Agreement, ArmStats, BatchComparison, Comparison, MetricKey, Verdict,
)
from guard.measure import (
    MOST_REPEATS, PASS_RATE, ArmMeasurement, RepeatResult, Spread, detectable_change_pct, relative_change,
    repeats_to_decide, repeats_to_rule_out, spread,
)


def compare(
    measurements: dict[str, ArmMeasurement],
    base: str,
    head: str,
    batch_sizes: list[int],
    threshold_pct: float,
    confidence: float,
    alpha: float = 0.01,
    tok_threshold_pct: float | None = None,
    reference: str | None = None,
) -> Comparison:
    """`threshold_pct` applies to GPU ms per step, `tok_threshold_pct` (default the same) to tok/s.
    `reference` names where forced runs' input ids came from."""
    reasons = [
        f"arm '{name}' has no results: {m.error}" for name, m in measurements.items() if m.error and not m.repeats
    ] + [
        f"arm '{name}' failed after {len(m.repeats)} repeats: {m.error}"
        for name, m in measurements.items()
        if m.error and m.repeats
    ]
    fingerprints = check_measurements(measurements)
    reasons += fingerprints.invalid_reasons
    rule = _Rule(threshold_pct, tok_threshold_pct or threshold_pct, alpha, confidence)
    batches = [_compare_batch(measurements, base, head, bs, rule, reference) for bs in batch_sizes]
    hash_matches = [b.hash_match for b in batches if b.hash_match is not None]
    verdict: Verdict = "invalid" if reasons else most_severe([b.verdict for b in batches])
    return Comparison(
        verdict=verdict,
        reasons=reasons + [r for b in batches for r in b.reasons],
        hash_match=all(hash_matches) if hash_matches else None,
        threshold_pct=threshold_pct,
        tok_threshold_pct=rule.tok_pct,
        alpha=alpha,
        confidence=confidence,
        batches=batches,
        warnings=fingerprints.warnings,
        gpu_fingerprint=fingerprints.summary,
    )


def confirm_near_threshold(
    first: Comparison, confirm: bool, both_rounds: Callable[[Comparison], Comparison | None]
) -> tuple[Comparison, int, bool]:
    """The confirmation rule: the first round decides, unless it is near a threshold and
    `confirm` is on; then `both_rounds(first)` measures (or looks up) a second round and
    compares the two together. Returns the deciding comparison, the rounds it covers, and
    whether a second round was wanted but `both_rounds` had none (the first one stands)."""
    if not (confirm and first.near_threshold):
        return first, 1, False
    both = both_rounds(first)
    if both is None:
        return first, 1, True
    return both, 2, False


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


@dataclass(frozen=True)
class _Metric:
    key: MetricKey
    label: str
    verdict: Verdict
    slowdown: _Slowdown
    threshold: float
    spreads: list[Spread]  # base, head


def _why_undecided(
    metrics: list[_Metric], at_threshold: list[MetricKey], arms: tuple[str, str], repeats: int, rule: _Rule
) -> list[str]:
    """Per undecided metric, what keeps it open: a significant slowdown at its threshold (and the
    repeats that would tell which side it is on), or the noise (and what would quiet it)."""
    why = []
    for m in metrics:
        if m.key in at_threshold:
            n = repeats_to_decide([s.values for s in m.spreads], m.slowdown.pct, m.threshold, rule.confidence)
            count = f"more than {MOST_REPEATS}" if n is None else f"about {n}"
            why.append(
                f"{m.label} is slower (p < {rule.alpha:g}), and its interval holds the {m.threshold:g}% threshold: "
                f"the slowdown is significant, whether it reaches the threshold is not decided. Telling "
                f"{m.slowdown.pct:+.2f}% from {m.threshold:g}% at this spread takes {count} repeats per arm "
                f"(this run: {repeats})."
            )
    noisy = [m for m in metrics if m.verdict == "inconclusive" and m.key not in at_threshold]
    if noisy:
        spread_text = "; ".join(
            f"{m.label} spread {arms[0]} {m.spreads[0].spread_pct:.2f}%, {arms[1]} {m.spreads[1].spread_pct:.2f}%"
            for m in noisy
        )
        why.append(
            f"A slowdown of {' and '.join(m.label for m in noisy)} past its threshold is possible but not "
            f"significant at p < {rule.alpha:g}. Over the repeats, {spread_text} (max - min over median). "
            + _what_would_decide([(m.label, m.spreads, m.threshold) for m in noisy], repeats, rule.confidence)
        )
    return why


def most_severe(verdicts: list[Verdict]) -> Verdict:
    for verdict in VERDICT_SEVERITY:
        if verdict in verdicts:
            return verdict
    return "invalid"


def _arm_stats(arm: str, repeats: list[RepeatResult], batch_size: int) -> ArmStats:
    runs = [r.run_for(batch_size) for r in repeats]
    end_to_end = [r.end_to_end_gpu_ms_per_step for r in runs]
    host = [r.host_ms_per_step for r in runs]
    forced = all(r.forced for r in runs)
    unheld = [r.unheld_steps for r in runs] if runs[0].timer == "cuda_event" else []
    return ArmStats(
        arm=arm,
        repeats=len(runs),
        gpu_ms_per_step=spread([r.gpu_ms_per_step for r in runs]),
        tok_per_s=spread([r.tok_per_s for r in runs]),
        end_to_end_gpu_ms_per_step=spread(end_to_end) if None not in end_to_end else None,  # type: ignore[arg-type]
        host_ms_per_step=spread(host) if None not in host else None,  # type: ignore[arg-type]
        timer=runs[0].timer,
        sha256=runs[0].sha256,
        deterministic=None if forced else len({r.sha256 for r in runs}) == 1,
        steps=runs[0].steps,
        unheld_steps=unheld,
        outran_hold=bool(unheld) and sum(unheld) > UNHELD_SHARE * runs[0].steps * len(unheld),
    )


@dataclass(frozen=True)
class _Rule:
    gpu_pct: float
    tok_pct: float
    alpha: float
    confidence: float
    # tok/s gates only where the run can detect its threshold; False: it always gates, the
    # rule reports decided before the roles existed were made by
    tok_roles: bool = True


def _compare_batch(
    measurements: dict[str, ArmMeasurement], base: str, head: str, batch_size: int, rule: _Rule,
    reference: str | None = None,
) -> BatchComparison:
    usable = {name: m.repeats for name, m in measurements.items() if m.repeats}
    arms = [_arm_stats(name, repeats, batch_size) for name, repeats in usable.items()]
    if base not in usable or head not in usable:
        return BatchComparison(batch_size=batch_size, verdict="invalid", reasons=_unforced_reasons(
            usable, batch_size), arms=arms)
    runs = {name: [r.run_for(batch_size) for r in repeats] for name, repeats in usable.items()}
    if any(run.forced for arm_runs in runs.values() for run in arm_runs):
        agreed = agreement(runs, base, reference or "reference")
        head_agreement = agreed.arm(head)
        if agreed.unforced or head_agreement is None or head_agreement.output_changed:
            # the render layer says which arm ran free, or where the head's output changed
            return BatchComparison(batch_size=batch_size, verdict="invalid", arms=arms, agreement=agreed)
        return _compare_timings(batch_size, arms, base, head, rule, agreement=agreed)

    reasons = _unforced_reasons(usable, batch_size)
    base_run = usable[base][0].run_for(batch_size)
    head_run = usable[head][0].run_for(batch_size)
    hash_match = base_run.sha256 == head_run.sha256
    mismatch = None
    if not hash_match:
        mismatch = first_mismatch(base_run.tokens, head_run.tokens)
        where = f" first at step {mismatch.step}, sequence {mismatch.sequence}" if mismatch else ""
        reasons.append(
            f"batch size {batch_size}: output tokens differ between {base} and {head}{where}; "
            "the runs are not like for like, so their timings are not compared"
        )
    if reasons:
        return BatchComparison(
            batch_size=batch_size, verdict="invalid", reasons=reasons, arms=arms,
            hash_match=hash_match, mismatch=mismatch,
        )
    return _compare_timings(batch_size, arms, base, head, rule, hash_match=True)


def _unforced_reasons(usable: dict[str, list[RepeatResult]], batch_size: int) -> list[str]:
    """Free-running arms whose repeats generated different tokens: the workload is not deterministic."""
    reasons = []
    for name, repeats in usable.items():
        first = repeats[0].run_for(batch_size)
        for other in repeats[1:]:
            run = other.run_for(batch_size)
            if run.sha256 != first.sha256:
                where = first_mismatch(first.tokens, run.tokens)
                at = f" (first at step {where.step}, sequence {where.sequence})" if where else ""
                reasons.append(
                    f"batch size {batch_size}: arm '{name}' is not deterministic: repeat {other.repeat + 1} "
                    f"generated other tokens than repeat {repeats[0].repeat + 1}{at}"
                )
                break
    return reasons


def _compare_timings(
    batch_size: int, arms: list[ArmStats], base: str, head: str, rule: _Rule,
    hash_match: bool | None = None, agreement: Agreement | None = None,
) -> BatchComparison:
    reasons: list[str] = []
    by_name = {a.arm: a for a in arms}
    too_few = [name for name in (base, head) if by_name[name].repeats < 2]
    if too_few:
        reasons.append(
            f"batch size {batch_size}: arm '{too_few[0]}' finished fewer than 2 repeats, "
            "too few to estimate a change"
        )
        return BatchComparison(batch_size=batch_size, verdict="invalid", reasons=reasons, arms=arms,
                               hash_match=hash_match, agreement=agreement)
    confidence = rule.confidence
    gpu_change = relative_change(
        by_name[base].gpu_ms_per_step.values, by_name[head].gpu_ms_per_step.values, confidence
    )
    tok_change = relative_change(by_name[base].tok_per_s.values, by_name[head].tok_per_s.values, confidence)
    e2e_base, e2e_head = by_name[base].end_to_end_gpu_ms_per_step, by_name[head].end_to_end_gpu_ms_per_step
    e2e_change = (
        relative_change(e2e_base.values, e2e_head.values, confidence) if e2e_base and e2e_head else None
    )
    host_base, host_head = by_name[base].host_ms_per_step, by_name[head].host_ms_per_step
    host_change = (
        relative_change(host_base.values, host_head.values, confidence)
        if host_base and host_head and min(host_base.values + host_head.values) > 0 else None
    )
    gpu = _Slowdown(gpu_change.pct, gpu_change.ci_low_pct, gpu_change.ci_high_pct, gpu_change.p_value)
    tok = _Slowdown(-tok_change.pct, -tok_change.ci_high_pct, -tok_change.ci_low_pct, tok_change.p_value)
    tok_values = [by_name[name].tok_per_s.values for name in (base, head)]
    tok_detectable = (detectable_change_pct(tok_values, min(len(v) for v in tok_values), confidence)
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
        # A significant slowdown left undecided sits at the threshold: the noise is not what
        # keeps it open, so the spread's advice (repeats for an unchanged commit) does not apply.
        at_threshold = [m.key for m in metrics if m.verdict == "inconclusive" and m.slowdown.p_value < rule.alpha]
        changes = (
            f"batch size {batch_size}: undecided. GPU ms per step changed {gpu_change.pct:+.2f}% "
            f"({confidence:.0%} interval {gpu_change.interval()}, "
            f"p = {gpu_change.p_value:.3g}) and tok/s {tok_change.pct:+.2f}% "
            f"({tok_change.interval()}, p = {tok_change.p_value:.3g})."
        )
        why = _why_undecided(metrics, at_threshold, (base, head), by_name[base].repeats, rule)
        reasons.append(" ".join([changes, *why]))
    thresholds = (rule.gpu_pct, rule.tok_pct)
    marginal = any(v == "regression" and m.low < t for v, m, t in zip(verdicts, (gpu, tok), thresholds))
    return BatchComparison(
        batch_size=batch_size, verdict=verdict, reasons=reasons, arms=arms,
        gpu_ms_change=gpu_change, tok_per_s_change=tok_change, end_to_end_gpu_ms_change=e2e_change,
        host_ms_change=host_change,
        gpu_ms_verdict=verdicts[0], tok_per_s_verdict=verdicts[1], at_threshold=at_threshold,
        tok_per_s_gates=tok_gates, tok_per_s_detectable_pct=tok_detectable,
        tok_per_s_repeats_to_gate=None if tok_gates else repeats_to_rule_out(tok_values, rule.tok_pct, confidence),
        hash_match=hash_match, agreement=agreement,
        near_threshold=verdict == "inconclusive" or marginal,
    )


@dataclass(frozen=True)
class _Slowdown:
    """A metric's change as a slowdown in percent (positive is slower), with its interval."""

    pct: float
    low: float
    high: float
    p_value: float

    def verdict(self, threshold_pct: float, alpha: float) -> Verdict:
        """Significance before magnitude: a change counts when p < alpha AND it is at least
        the threshold; a change that could be past the threshold but is not shown is
        inconclusive."""
        if self.p_value < alpha and self.pct >= threshold_pct:
            return "regression"
        if self.p_value < alpha and -self.pct >= threshold_pct:
            return "improvement"
        if self.high >= threshold_pct:
            return "inconclusive"
        return "pass"

    def shown_past(self, threshold_pct: float) -> Verdict:
        """An informational metric's verdict: a change counts only when its whole interval is
        past the threshold; anything else passes, as its noise cannot decide."""
        if self.low >= threshold_pct:
            return "regression"
        if -self.high >= threshold_pct:
            return "improvement"
        return "pass"
