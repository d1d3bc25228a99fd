"""Why a comparison is not valid, in words: a few for the title and the status, a sentence for
the comment. The report's strings in them (arm names, an arm's error) are data: the sentence
escapes them; the short form is plain, and escaped where it is shown."""

from __future__ import annotations

from guard._markdown import text
from guard.compare import IDENTITY_FIELDS, Reason
from guard.measure import ClockMisfit
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
    if reason.kind == "clock_refused" and reason.clock is not None:
        return _clock_sentence(arm, reason.clock)
    if reason.kind == "ranks_disagree":
        return (f"{at}rank {reason.rank} of the {arm} arm generated other tokens than its rank 0{where}: every rank "
                "must return the whole batch's ids, the same on each (a tensor-parallel engine does)")
    done = words.plural(reason.repeats_done or 0, "repeat")
    return f"{at}the {arm} arm finished {done}, too few to estimate a change"


def _repeats(numbers: list[int]) -> str:
    return f"repeat {numbers[0]}" if len(numbers) == 1 else "repeats " + ", ".join(map(str, numbers))


_PASS_NAMES = {"end_to_end": "end-to-end pass", "gpu_timed": "GPU-timed pass", "mix": "batch-size mix pass",
               "mix_gpu_timed": "GPU-timed mix pass"}


def _clock_sentence(arm: str, misfit: ClockMisfit) -> str:
    """A process refused by the guard's clock (guard/measure/_clock.py), from the facts."""
    process = f"process {misfit.repeat + 1} of the {arm} arm" if misfit.repeat is not None else f"a {arm} process"
    name = _PASS_NAMES.get(misfit.kind or "", "timed pass")
    passes = words.plural(misfit.claimed_passes or 0, name, name + "es")
    where = (f"{_PASS_NAMES.get(misfit.kind or '', 'timed pass')}" + (f" at {words.size(misfit.batch_size)}"
             if misfit.batch_size is not None else ""))
    if misfit.why == "unpaired":
        told = "its marks of its timed passes on the guard's pipe did not pair up"
    elif misfit.why == "pass_count":
        told = f"its result claims {passes} and the guard saw {misfit.seen_passes}"
    elif misfit.why == "over":
        told = (f"its step times in the {where} add up to {misfit.claimed_s:.3f} s, more than the "
                f"{misfit.seen_s:.3f} s the guard saw the pass take")
    else:
        told = (f"its step times in the {where} add up to {misfit.claimed_s:.3f} s, where the guard saw the pass take "
                f"{misfit.seen_s:.3f} s: its clock is not the guard's (the workload may have replaced a timer)")
    return f"{process} was refused and the arm stopped: {told}. Its figures are not used"
