"""Why a comparison is not valid, in words: a few for the title and the status, a sentence for
the comment. The report's strings in them (arm names, an arm's error) are data: the sentence
escapes them; the short form is plain, and escaped where it is shown."""

from __future__ import annotations

from guard._markdown import text
from guard.compare import IDENTITY_FIELDS, Reason
from guard.report import _words as words

_FIELD = dict(IDENTITY_FIELDS)


def _field(reason: Reason) -> str:
    """The fingerprint field's name as the guard writes it; one it does not know, as text."""
    return _FIELD.get(reason.field or "") or text(reason.field or "a fingerprint field")


def reason_short(reason: Reason) -> str:
    return words.REASON_SHORT[reason.kind].format(
        arm=reason.arm or "", field=_field(reason), size=words.size(reason.batch_size),
        at_size=words.at_size(reason.batch_size))


def reason_sentence(reason: Reason) -> str:
    """One bullet of 'Why the comparison is not valid', as Markdown."""
    arm = text(reason.arm or "")
    at = f"{words.size(reason.batch_size)}: " if reason.batch_size is not None else ""
    where = (f", first at step {reason.step}, sequence {reason.sequence}" if reason.step is not None else "")
    if reason.kind == "arm_no_results":
        return f"the {arm} arm has no results: {text(reason.error or 'no error given')}"
    if reason.kind == "arm_failed":
        done = words.plural(reason.repeats_done or 0, "repeat")
        return f"the {arm} arm failed after {done}: {text(reason.error or 'no error given')}"
    if reason.kind == "arm_changed_between_repeats":
        seen = "; ".join(f"{text(s.value)} in {_repeats(s.repeats)}" for s in reason.seen)
        return (f"the {arm} arm changed {_field(reason)} between repeats ({seen}), so its repeats are not like "
                "for like: run every repeat on the same runner and software")
    if reason.kind == "arms_differ":
        seen = ", ".join(f"{text(s.arm or '')} {text(s.value)}" for s in reason.seen)
        return (f"the arms ran with a different {_field(reason)} ({seen}): run both arms on the same runner with "
                "the same software")
    if reason.kind == "tokens_differ":
        return (f"{at}the output tokens differ between base and head{where}, so the runs are not like for like "
                "and their timings are not compared")
    if reason.kind == "not_deterministic":
        return (f"{at}the {arm} arm is not deterministic: repeat {reason.repeat} generated other tokens than "
                f"repeat {reason.first_repeat}{where}")
    if reason.kind == "ranks_disagree":
        return (f"{at}rank {reason.rank} of the {arm} arm generated other tokens than its rank 0{where}: every rank "
                "must return the whole batch's ids, the same on each (a tensor-parallel engine does)")
    done = words.plural(reason.repeats_done or 0, "repeat")
    return f"{at}the {arm} arm finished {done}, too few to estimate a change"


def _repeats(numbers: list[int]) -> str:
    return f"repeat {numbers[0]}" if len(numbers) == 1 else "repeats " + ", ".join(map(str, numbers))
