"""The comment's title, under TITLE_LIMIT characters: what got slower, by how much, the cause,
and the capture change; from the report's headline facts."""

from __future__ import annotations

from pathlib import PurePosixPath

from guard._markdown import visible
from guard.compare import BatchComparison, MetricKey
from guard.report import _words as words
from guard.report._reason_text import reason_short
from guard.report._roles import the_threshold
from guard.report._schema import Report

TITLE_LIMIT = 120
SUBJECT_LEAST = 12  # a commit subject is cut to make room, never below this many characters


def title(report: Report) -> str:
    """Plain text, escaped where it is rendered: the verdict and its figure first, then the
    head commit, then as many of the cause, a fall out of CUDA graphs and the capture change
    as fit; the commit subject is cut to SUBJECT_LEAST before any of them is left out."""
    head = report.arm(report.head)
    lead, extras = _parts(report)
    sha = words.short_sha(head.sha)

    def line(subject: str, kept: list[str]) -> str:
        change = f"{subject} ({sha})" if subject else sha
        return lead.format(change=change) + "".join(kept)

    subject = visible(head.subject)  # the title is plain text where it is shown: no control reorders it
    for kept in (extras[:n] for n in range(len(extras), -1, -1)):
        if len(line(subject, kept)) < TITLE_LIMIT:
            return line(subject, kept)
        fixed = len(lead.format(change=f" ({sha})") + "".join(kept))  # all but the subject
        room = TITLE_LIMIT - 1 - fixed - 3  # and "..."
        if room >= SUBJECT_LEAST:
            return line(_cut(subject, room), kept)
    short = line(_cut(subject, SUBJECT_LEAST), [])
    return short if len(short) < TITLE_LIMIT else short[: TITLE_LIMIT - 4] + "..."


def _cut(subject: str, room: int) -> str:
    """The subject's words that fit in `room` characters, then '...'; never part of a word
    (none where its first word is longer than `room`)."""
    if len(subject) <= room:
        return subject
    kept = subject[:room] if subject[room].isspace() else subject[:room].rpartition(" ")[0]
    kept = kept.rstrip(" ,;:-")
    return kept + "..." if kept else ""


def _parts(report: Report) -> tuple[str, list[str]]:
    """The title's lead, with '{change}' where the head commit goes, and its optional tails."""
    h = report.explanation.headline
    gpu = report.gpu_timed()
    capture = []
    if h.capture is not None:
        where = PurePosixPath(h.capture.path).name + (f":{h.capture.lines[0]}" if h.capture.lines else "")
        capture = [f"; capture changed at {where}"]
    fell = [f"; decode fell out of CUDA graphs at {words.sizes(h.fell_out)}"] if h.fell_out else []
    if h.verdict == "invalid":
        first = report.reasons[0] if report.reasons else None
        why = reason_short(first) if first else _invalid_batch(report.decided(), report.head)
        return "Invalid comparison for {change}: " + _braces(why), []
    if h.batch_size is None or h.change is None or h.metric is None:
        return f"Decode speed with {{change}}: {words.verdict(h.verdict)}", fell
    name = words.metric(h.metric, gpu)
    at = words.at_size(h.batch_size)
    if h.verdict == "regression":
        # what the user feels leads where it is the larger slowdown (explain's `felt`)
        metric, change = (h.felt, h.felt_change) if h.felt is not None and h.felt_change is not None else (
            h.metric, h.change)
        moved = words.slower(change, metric)
        cause = [f": {words.CAUSE[h.cause]}"] if h.cause and not (h.cause == "no_cuda_graph" and h.fell_out) else []
        if h.rank_cause is not None:  # across the ranks: what rank 0's own trace says is its part of it
            cause = [f": {words.RANK_CAUSE[h.rank_cause]}"]
        if metric == "instructions":  # the host's work, not a time: named as what it is
            return f"Decode host work up {moved} {at} (instructions) with {{change}}", cause + fell + capture
        if words.large(change, metric):  # twice as slow or more: felt whatever the figure, named below
            return f"Decode {moved} slower {at} with {{change}}", cause + fell + capture
        if metric == "end_to_end_ms":
            return f"Decode {moved} slower end to end {at} with {{change}}", cause + fell + capture
        return f"Decode {moved} slower {at}{_by(metric)} with {{change}}", cause + fell + capture
    moved = words.pct(abs(h.change.pct), 1).lstrip("+")
    by = _by(h.metric)
    if h.verdict == "improvement":  # what the user feels, where it decided it (compare's decided_by)
        gain = words.faster(h.change, h.metric)
        if gain.endswith("x"):  # twice as fast or more: felt whatever the figure, named below
            return f"Decode {gain} faster {at} with {{change}}", fell
        if h.metric == "end_to_end_ms":
            return f"Decode {gain} faster end to end {at} with {{change}}", fell
        return f"Decode {gain} faster {at}{by} with {{change}}", fell
    if h.verdict == "at_threshold":  # shown, and not told from the threshold: not ruled out
        return (f"Decode slowdown at {the_threshold(report.rule, h.metric, report.gpu_timed())}, not ruled "
                f"out: {words.pct(h.change.pct)} {name} {at} with {{change}}"), capture + fell
    if h.verdict == "inconclusive":
        return f"Decode speed inconclusive with {{change}}: {name} too noisy {at}", fell
    if h.notable:
        return (f"No decode slowdown past {words.threshold(report.rule.gpu_ms.pct)} with {{change}}",
                fell + [f"; {words.pct(h.change.pct)} {name} {at}, under it"])
    return f"No decode slowdown past {words.threshold(report.rule.gpu_ms.pct)} with {{change}}", fell


def _by(metric: MetricKey) -> str:
    return " in tok/s" if metric == "tok_per_s" else ""  # step time is what "slower" means otherwise


def _invalid_batch(decided: list[BatchComparison], head: str) -> str:
    """An invalid batch size without a reason of its own: the forced comparison's."""
    for batch in decided:
        if batch.verdict != "invalid" or batch.agreement is None:
            continue
        if batch.agreement.unforced:
            arm = batch.agreement.unforced[0]
            return f"the {arm} arm's workload could not be forced ({words.size(batch.batch_size)})"
        changed = batch.agreement.arm(head)
        if changed is not None and changed.output_changed:
            first = f", first at step {changed.first_change.step}" if changed.first_change else ""
            return f"the head's output changed {words.at_size(batch.batch_size)}{first}"
    return "see the reasons in the comment"


def _braces(value: str) -> str:
    """A report's text inside the format string: its braces kept as they are."""
    return value.replace("{", "{{").replace("}", "}}")
