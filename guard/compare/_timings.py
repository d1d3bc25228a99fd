"""One batch size's timings decided: the arms' changes at the confidence shown, the slow
processes set aside and the calibrated spreads borrowed where the rule says, then the verdict by
the interval rule. The batch sizes (`_verdict.py`), the mix (`_mix.py`) and the recheck of a
stored report (`_recheck.py`) all decide through it."""

from __future__ import annotations

from guard.compare._interval import borrow_checks, decide_by_interval
from guard.compare._models import Agreement, ArmStats, BatchComparison
from guard.compare._reasons import Reason
from guard.compare._set_aside import kept_arm, slow_set_aside
from guard.config import Rule
from guard.measure import Change, PriorSpread, Spread, relative_change


def compare_timings(
    batch_size: int, arms: list[ArmStats], base: str, head: str, rule: Rule,
    hash_match: bool | None = None, agreement: Agreement | None = None,
) -> BatchComparison:
    """The arms' changes, at the confidence shown, then the verdict by `rule` (the batch-size
    mix's too, at batch size MIX_BATCH)."""
    by_name = {a.arm: a for a in arms}
    too_few = [name for name in (base, head) if by_name[name].repeats < 2]
    if too_few:
        reason = Reason(kind="too_few_repeats", batch_size=batch_size, arm=too_few[0],
                        repeats_done=by_name[too_few[0]].repeats)
        return BatchComparison(batch_size=batch_size, verdict="invalid", reasons=[reason], arms=arms,
                               hash_match=hash_match, agreement=agreement)
    confidence = rule.confidence
    aside = slow_set_aside(by_name[base], by_name[head], batch_size) if rule.sets_aside else []
    # from here on each metric's figures without its processes set aside: the changes shown and the bounds alike
    b, h = kept_arm(by_name[base], aside), kept_arm(by_name[head], aside)
    checks = borrow_checks(b, h, batch_size, rule)
    # a metric whose check passed pools the calibrated spread into the change shown, as into its bounds
    priors: dict[str, PriorSpread | None] = {check.metric: check.prior() for check in checks}

    def change(before: Spread | None, after: Spread | None, prior: PriorSpread | None = None) -> Change | None:
        return relative_change(before.values, after.values, confidence, prior=prior) if before and after else None

    host_timed = bool(b.host_ms_per_step and h.host_ms_per_step and min(
        b.host_ms_per_step.values + h.host_ms_per_step.values) > 0)  # host time may be 0: no ratio then
    measured = BatchComparison(
        batch_size=batch_size, verdict="invalid", arms=arms,
        gpu_ms_change=change(b.gpu_ms_per_step, h.gpu_ms_per_step, priors.get("gpu_ms")),
        tok_per_s_change=change(b.tok_per_s, h.tok_per_s, priors.get("tok_per_s")),
        end_to_end_gpu_ms_change=change(b.end_to_end_gpu_ms_per_step, h.end_to_end_gpu_ms_per_step,
                                        priors.get("end_to_end_ms")),
        host_ms_change=change(b.host_ms_per_step, h.host_ms_per_step) if host_timed else None,
        instructions_change=(  # at the level the verdicts' bounds are, as the table shows them
            relative_change(b.instructions_per_step.values, h.instructions_per_step.values, rule.bounds_confidence)
            if b.instructions_per_step and h.instructions_per_step else None),
        hash_match=hash_match, agreement=agreement, borrowed=checks, set_aside=aside,
    )
    return decide_by_interval(measured, b, h, rule)
