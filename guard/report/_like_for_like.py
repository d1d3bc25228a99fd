"""The comment's words on whether the arms did the same work: forced inputs and how often the
outputs agreed with the reference, from the comparison's `Agreement` of each batch size."""

from __future__ import annotations

from guard._markdown import text
from guard.compare import Agreement, ArmAgreement, BatchComparison
from guard.report import _words as words
from guard.report._schema import Report


def _forced(decided: list[BatchComparison]) -> list[tuple[BatchComparison, Agreement]]:
    return [(b, b.agreement) for b in decided if b.agreement is not None]


def agreement_sentence(decided: list[BatchComparison], base: str, head: str) -> str:
    """What the forcing says of the `decided` batch sizes' work (the mix's too), for a comparison
    that was made: exact, or noise."""
    forced = _forced(decided)
    if not forced or any(b.verdict == "invalid" for b, _ in forced):
        return ""
    source = text(forced[0][1].reference)
    changed = [(b.batch_size, a, arm) for b, a in forced for arm in a.arms if arm.numerics_changed]
    if changed:
        size, agreement, arm = changed[0]
        base_arm = agreement.arm(base)
        base_most = max(base_arm.disagreements) if base_arm else 0
        counts = ", ".join(str(d) for d in arm.disagreements)
        return (f"Every step's input was forced from {source}, so the work is like for like. The {text(arm.arm)}'s "
                f"arithmetic changed: {words.at_size(size)} every one of its processes disagrees with the reference "
                f"more often than base's own ({counts} of {arm.compared} outputs, against at most {base_most}), a "
                "rounding-level difference such as another kernel or fusion gives in bf16, "
                + (_margin_clause(agreement, arm) if agreement.margin_floor else
                   f"under the {arm.min_excess / arm.compared:.0%} of outputs at which the guard calls the output "
                   "changed."))
    if all(a.exact for _, a in forced):
        flips = [(b.batch_size, arm) for b, a in forced for arm in a.arms if arm.some_disagree]
        if not flips:
            return (f"Every step's input was forced from {source}, and every process of every arm reproduced its "
                    "tokens exactly, so the work is like for like.")
        size, arm = flips[0]
        dirty = sum(1 for d in arm.disagreements if d)
        return (f"Every step's input was forced from {source}, so the work is like for like; every base process "
                f"reproduced its tokens exactly, while {dirty} of {len(arm.disagreements)} {text(arm.arm)} processes "
                f"disagreed with them (at most {max(arm.disagreements)} of {arm.compared} outputs, "
                f"{words.size(size)}): "
                f"not in every process, so not a change of output, but {text(arm.arm)}'s tokens may not be "
                "deterministic.")
    every = [arm for _, a in forced for arm in a.arms]
    lowest = min(100 - arm.most_pct for arm in every)
    most = {name: max((arm.most_pct for arm in every if arm.arm == name), default=0.0)
            for name in (base, head)}
    margins = next((a for _, a in forced if a.margin_floor), None)
    return (f"Every step's input was forced from {source}: forced alike, each process's own greedy tokens agree "
            f"with it on {lowest:.1f}% of steps or more, and base's own processes disagree with it as often as "
            f"head's (up to {most[base]:.1f}% and {most[head]:.1f}%), so this is numerical noise "
            "(near-ties in the argmax) and the work is like for like."
            + (" " + _confident_note(margins, head) if margins else ""))


def _floor_text(agreement: Agreement) -> str:
    floor = agreement.margin_floor
    assert floor is not None
    return f"{floor.ulps:g} {floor.dtype} ulps"


def _margin_clause(agreement: Agreement, arm: ArmAgreement) -> str:
    """Why a numerics change is not a change of output under the margin rule."""
    confident = ", ".join(str(c) for c in arm.confident or [])
    return (f"not another function: where the reference's top logit led its runner-up by more than "
            f"{_floor_text(agreement)} ({arm.confident_compared} of the {arm.compared} outputs), its processes "
            f"disagreed {confident} times, no more often than base's.")


def _confident_note(agreement: Agreement, head: str) -> str:
    """The margin rule's figures beside the noise sentence."""
    arm = agreement.arm(head)
    if arm is None or arm.confident is None:
        return ""
    confident = ", ".join(str(c) for c in arm.confident)
    return (f"Where the reference's top logit led its runner-up by more than {_floor_text(agreement)} "
            f"({arm.confident_compared} of {arm.compared} outputs), which rounding does not move, the head's "
            f"processes disagreed {confident} times.")


def agreement_reasons(report: Report) -> list[str]:
    """Why a forced comparison is not valid: an arm that ran free, or a head whose output changed."""
    reasons = []
    for batch, agreement in _forced(report.decided()):
        if batch.verdict != "invalid":
            continue
        size = batch.batch_size
        for name in agreement.unforced:
            reasons.append(
                f"{words.size(size)}: the {text(name)} arm's workload takes no input ids (`step(tokens)`), so it ran "
                f"free while the other arms were forced from {text(agreement.reference)}: not like for like"
            )
        head = agreement.arm(report.head)
        if head is not None and head.output_changed:
            reasons.append(f"{words.size(size)}: {changed_text(report, agreement, head)}")
    return reasons


def changed_text(report: Report, agreement: Agreement, arm: ArmAgreement) -> str:
    """The head's output changed: how its disagreements compare with base's, and the first one."""
    first = arm.first_disagreement
    where = (f" (first at step {first.step}, sequence {first.sequence}: {first.found} where the reference has "
             f"{first.expected})" if first else "")
    counts = ", ".join(str(d) for d in arm.disagreements)
    name, reference = text(arm.arm), text(agreement.reference)
    if agreement.margin_floor is not None and arm.confident is not None:
        return _changed_by_margins(report, agreement, arm)
    if agreement.exact:
        return (f"the output of {name} changed: forced with the same inputs, every base process reproduced "
                f"{reference} exactly, and {name}'s processes disagreed with it on {counts} of "
                f"{arm.compared} outputs{where}; the runs are not like for like, so their timings are not compared")
    base = agreement.arm(report.base)
    base_counts = ", ".join(str(d) for d in base.disagreements) if base else "?"
    return (f"the output of {name} changed: forced with the same inputs, its processes disagreed with "
            f"{reference} on {counts} of {arm.compared} outputs, every one more often than base's own "
            f"processes ({base_counts}), {arm.excess:.1f} more on average (the rule asks {arm.min_excess:g}){where}; "
            "this is more than numerical noise, so the timings are not compared")


def _changed_by_margins(report: Report, agreement: Agreement, arm: ArmAgreement) -> str:
    first = arm.first_confident
    where = (f" (first at step {first.step}, sequence {first.sequence}: {first.found} where the reference has "
             f"{first.expected}, whose top logit led by {first.margin_ulps:.0f} ulps)" if first else "")
    base = agreement.arm(report.base)
    base_counts = ", ".join(str(c) for c in (base.confident or [])) if base else "?"
    confident = ", ".join(str(c) for c in arm.confident or [])
    return (f"the output of {text(arm.arm)} changed: forced with the same inputs, every one of its processes chose "
            f"another token where the reference's top logit led its runner-up by more than {_floor_text(agreement)}, "
            f"which rounding does not move ({confident} of those {arm.confident_compared} outputs, against "
            f"{base_counts} in base's processes){where}; the runs are not like for like, so their timings are not "
            "compared")


def reference_note(error: str | None) -> str:
    """A failed reference pass (its `error`): the processes ran free."""
    if not error:
        return ""
    return (f"The reference pass of base failed ({text(error)}), so no step's input was "
            "forced and the tokens had to match exactly.")


def forcing_hint(forced: bool, decided: list[BatchComparison]) -> str:
    """For a free-running workload (not `forced`) whose tokens differed at a `decided` batch size,
    between repeats of one arm or between base and head: no seed fixes that in bf16, forcing
    does, and it takes two lines."""
    if forced:
        return ""
    differed = any(b.hash_match is False or any(a.deterministic is False for a in b.arms) for b in decided)
    if not differed:
        return ""
    return ("The workload runs free, so its tokens must match exactly; in bf16 near-ties in the argmax break "
            "differently from process to process, which no seed fixes. A workload whose step takes this step's "
            "input ids is forced with one reference in every process instead: `def step(self, tokens=None):` and, "
            "first in it, `if tokens is not None: self.input_ids.copy_(tokens)` (docs/workload-protocol.md).")
