"""The ranks' part of a slower batch size's cause: what the trace analysis across ranks found
(guard/trace/_rank_diff.py) when it explains the slowdown, communication no longer overlapped
or one rank that held back the others, beside what the timed pass says of that rank.

The timed pass names a straggler from each step's end on every rank (compare's ArmRanks); the
profiled pass names the rank the others waited for in their collectives. Both are kept, with
whether they name the same rank, so the comment can say they agree or show both."""

from __future__ import annotations

from guard.compare import BatchComparison
from guard.explain._models import RankCause, StragglerAgreement
from guard.trace import CommunicationNotOverlapped, RankDiff


def rank_causes(batches: list[BatchComparison], rank_diffs: dict[int, RankDiff], head: str) -> list[RankCause]:
    """One per finding of each slower (regression or at threshold) batch size's rank diff."""
    causes = []
    for batch in batches:
        change = rank_diffs.get(batch.batch_size)
        if batch.mix or batch.verdict not in ("regression", "at_threshold") or change is None:
            continue
        ranks = next((a.ranks for a in batch.arms if a.arm == head), None)
        timed = ranks.straggler if ranks is not None else None
        for finding in change.findings:
            if isinstance(finding, CommunicationNotOverlapped):
                causes.append(RankCause(
                    batch_size=batch.batch_size, kind="communication_not_overlapped",
                    share_of_step=finding.share_of_step,
                    exposed_communication_ms_per_step=finding.exposed_communication_ms_per_step,
                    overlap_share=finding.overlap_share))
                continue
            causes.append(RankCause(
                batch_size=batch.batch_size, kind="rank_held_back", share_of_step=finding.share_of_step,
                rank=finding.rank, straggler_share=finding.straggler_share,
                wait_ms_per_step=finding.wait_ms_per_step, fell_out_of_graphs=finding.fell_out_of_graphs,
                timed_straggler=timed, agreement=_agreement(finding.rank, timed)))
    return causes


def _agreement(traced: int, timed: int | None) -> StragglerAgreement:
    if timed is None:
        return "none_timed"
    return "same_rank" if timed == traced else "other_rank"
