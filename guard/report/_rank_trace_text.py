"""The comment's words on the ranks of a multi-rank run: communication overlap and the wait for the
slowest rank base -> head, each finding as a sentence, and a short per-rank table when ranks differ;
and the line above the fold for a finding that explains a slower batch size.

The facts are guard.trace's RankDiff and guard.explain's RankCause; here they only become words
(and cells for the view's table)."""

from __future__ import annotations

from collections.abc import Callable

from guard.explain import RankCause
from guard.report import _words as words
from guard.trace import BeforeAfter, CommunicationNotOverlapped, RankDiff, RankHeldBack


def rank_cause_sentence(cause: RankCause, sized: bool) -> str:
    """One sentence: what the ranks' profiled pass found. `sized`: name the batch size."""
    at = f"At batch size {cause.batch_size}, " if sized else ""
    growth = f"{words.share(cause.share_of_step)} of base's step"
    if cause.kind == "communication_not_overlapped":
        exposed, overlap = cause.exposed_communication_ms_per_step, cause.overlap_share
        said = (f"communication no longer overlapped with compute: exposed communication "
                f"{_ms(exposed) if exposed else '-'} per step, up {growth}"
                + (f"; overlapped {_arrow(overlap, words.share)} of it" if overlap else "") + ".")
    else:
        wait = cause.wait_ms_per_step
        said = (f"one rank held back the others: rank {cause.rank} joined the collectives last in "
                f"{words.share(cause.straggler_share or 0.0)} of head's profiled steps, the others' wait "
                f"{_ms(wait) if wait else '-'} per step, up {growth}; {_timed(cause)}.")
        if cause.fell_out_of_graphs:
            said += f" Rank {cause.rank} fell out of its CUDA graphs."
    return at + said if at else said[0].upper() + said[1:]


def _timed(cause: RankCause) -> str:
    if cause.agreement == "same_rank":
        return "the timed steps end last on it too"
    if cause.agreement == "other_rank":
        return f"the timed steps end last on rank {cause.timed_straggler} instead"
    return "the timed steps end last on no one rank"


def rank_bullets(change: RankDiff) -> list[str]:
    """Overlap and exposed communication, the wait for the slowest rank, then each finding."""
    lines = [_overlap(change), _wait(change)]
    for finding in change.findings:
        lines.append(_not_overlapped(finding) if isinstance(finding, CommunicationNotOverlapped)
                     else _held_back(finding, change.base.ranks))
    if change.base.ranks != change.head.ranks:
        lines.append(f"The arms ran with other rank counts (base {change.base.ranks}, head {change.head.ranks}); "
                     f"the ranks both ran are compared.")
    return lines


def rank_table(change: RankDiff) -> tuple[list[str], list[list[str]]] | None:
    """Header and rows of the per-rank table, base -> head per cell; None when the ranks do not differ."""
    if not change.ranks_differ:
        return None
    header = ["rank", "span ms", "compute ms", "communication ms", "exposed ms", "wait ms", "last to join"]
    rows = [
        [str(r.rank), _arrow(r.span_ms_per_step), _arrow(r.compute_ms_per_step), _arrow(r.communication_ms_per_step),
         _arrow(r.exposed_communication_ms_per_step), _arrow(r.wait_ms_per_step),
         _arrow(r.straggler_share, words.share)]
        for r in change.ranks
    ]
    return header, rows


def _overlap(change: RankDiff) -> str:
    exposed = change.exposed_communication_ms_per_step
    overlap = change.overlap_share
    if overlap.before is None and overlap.after is None:
        return f"No communication found in either arm's traces of the {_ranks(change)}."
    return (f"Communication overlapped with compute: {_arrow(overlap, words.share)} of its time; exposed "
            f"communication {_ms(exposed)} per step ({words.ms_delta(exposed.delta or 0.0)} ms), over the "
            f"{_ranks(change)}.")


def _wait(change: RankDiff) -> str:
    wait = change.wait_ms_per_step
    stragglers = ", ".join(f"{arm} rank {s}" for arm, s in (("base", change.base.straggler),
                                                              ("head", change.head.straggler)) if s is not None)
    last = f"; last to join in most steps: {stragglers}" if stragglers else "; no rank was last to join in most steps"
    return f"Longest wait for the slowest rank: {_ms(wait)} per step{last}."


def _not_overlapped(finding: CommunicationNotOverlapped) -> str:
    exposed = finding.exposed_communication_ms_per_step
    hidden = finding.overlapped_communication_ms_per_step
    return (f"Communication no longer overlapped: exposed communication grew by {words.ms(exposed.delta or 0.0)} ms "
            f"per step, {words.share(finding.share_of_step)} of the base's step, as the communication hidden "
            f"behind compute went {_ms(hidden)} per step ({_arrow(finding.overlap_share, words.share)} of it).")


def _held_back(finding: RankHeldBack, ranks: int) -> str:
    wait = finding.wait_ms_per_step
    others = "the other rank" if ranks == 2 else "the others"
    said = (f"One rank held back the others: rank {finding.rank} was the last to join the collectives in "
            f"{words.share(finding.straggler_share)} of the head's steps; the longest wait for the slowest rank "
            f"went {_ms(wait)} per step ({words.ms_delta(wait.delta or 0.0)} ms, "
            f"{words.share(finding.share_of_step)} of the base's step). Its compute "
            f"{_ms(finding.compute_ms_per_step)} per step against {_ms(finding.others_compute_ms_per_step)} for "
            f"{others}; its idle time {_ms(finding.idle_ms_per_step)}.")
    if finding.fell_out_of_graphs:
        said += f" Rank {finding.rank} fell out of its CUDA graphs: it launches its kernels itself."
    return said


def _ranks(change: RankDiff) -> str:
    n = change.head.ranks
    return words.plural(n, "rank") + ("" if change.head.activities == "gpu_kernels" else " (host ops: a CPU-only run)")


def _ms(change: BeforeAfter) -> str:
    return f"{_arrow(change)} ms"


def _arrow(change: BeforeAfter, form: Callable[[float], str] = words.ms) -> str:
    before = "-" if change.before is None else form(change.before)
    after = "-" if change.after is None else form(change.after)
    return f"{before} -> {after}"
