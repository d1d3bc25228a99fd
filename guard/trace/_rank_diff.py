"""Compare the ranks of a base and a head, each over its repeats (one profiled pass per process):
how much communication compute hides, how long the ranks wait for the slowest, which rank that
is, and the two findings these make.

- communication_not_overlapped: the exposed communication per step (not overlapped by compute,
  and not spent waiting for the slowest rank) grew by more than EXPOSED_GROWTH_SHARE of the base's
  step, every head repeat exposes more than every base repeat, and the communication hidden behind
  compute shrank by more than that share too (exposed communication that grows with the
  communication itself, none of it hidden before or after, is more communication, not lost overlap).
- rank_held_back: in the head, one rank is the straggler in most steps (the others wait for it
  in their collectives), and the others' wait grew by more than WAIT_GROWTH_SHARE of the base's step.

An arm's figure is the median over its repeats of each repeat's figure (itself a median over steps).
Pydantic and the standard library only, as guard/trace/_diff.py.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Annotated, Literal

from pydantic import BaseModel, Field

from guard._errors import TraceError
from guard.trace._diff import COUNT_TOLERANCE, BeforeAfter, _pair
from guard.trace._rank_figures import ActivityKind, RankFigures, RankTraces, RankWarning

EXPOSED_GROWTH_SHARE = 0.05  # of the base's step time
WAIT_GROWTH_SHARE = 0.05  # of the base's step time
MOST_STEPS_SHARE = 0.5  # a rank is an arm's straggler when it is the step's in more than this share of steps


class ArmRankPasses(BaseModel):
    """One arm's ranks over its repeats."""

    repeats: int
    ranks: int  # the world size
    activities: ActivityKind
    step_ms_by_repeat: list[float]
    exposed_communication_ms_by_repeat: list[float]
    wait_ms_by_repeat: list[float]
    straggler: int | None  # the rank the others waited for in most steps, over all repeats


class RankTraceChange(BaseModel):
    rank: int
    span_ms_per_step: BeforeAfter
    compute_ms_per_step: BeforeAfter
    communication_ms_per_step: BeforeAfter
    exposed_communication_ms_per_step: BeforeAfter
    idle_ms_per_step: BeforeAfter
    wait_ms_per_step: BeforeAfter
    straggler_share: BeforeAfter  # of its arm's steps, over all repeats
    graph_launches_per_step: BeforeAfter
    kernel_launches_per_step: BeforeAfter
    fell_out_of_graphs: bool  # head launches fewer graphs and more kernels itself on this rank


class CommunicationNotOverlapped(BaseModel):
    kind: Literal["communication_not_overlapped"] = "communication_not_overlapped"
    exposed_communication_ms_per_step: BeforeAfter
    overlapped_communication_ms_per_step: BeforeAfter
    overlap_share: BeforeAfter
    step_ms_per_step: BeforeAfter
    share_of_step: float  # the exposed communication's growth over the base's step time


class RankHeldBack(BaseModel):
    kind: Literal["rank_held_back"] = "rank_held_back"
    rank: int
    straggler_share: float  # of the head's steps in which the others waited for this rank
    wait_ms_per_step: BeforeAfter  # the longest any rank waited for the slowest, per step
    step_ms_per_step: BeforeAfter
    share_of_step: float  # the wait's growth over the base's step time
    compute_ms_per_step: BeforeAfter  # this rank's
    others_compute_ms_per_step: BeforeAfter  # the median of the other ranks'
    idle_ms_per_step: BeforeAfter  # this rank's
    fell_out_of_graphs: bool


RankFinding = Annotated[CommunicationNotOverlapped | RankHeldBack, Field(discriminator="kind")]


class RankDiff(BaseModel):
    base: ArmRankPasses
    head: ArmRankPasses
    step_ms_per_step: BeforeAfter  # the slowest rank's span
    overlap_share: BeforeAfter
    communication_ms_per_step: BeforeAfter
    exposed_communication_ms_per_step: BeforeAfter
    overlapped_communication_ms_per_step: BeforeAfter
    wait_ms_per_step: BeforeAfter
    ranks: list[RankTraceChange]  # the ranks both arms ran
    # worth a per-rank table: a straggler in either arm, or a rank whose graphs changed apart from the others'
    ranks_differ: bool
    findings: list[RankFinding]
    warnings: list[RankWarning]


def diff_ranks(base: list[RankTraces], head: list[RankTraces]) -> RankDiff:
    """What changed from `base` to `head`, each a list of one profiled pass per repeat."""
    if not base or not head:
        missing = "base" if not base else "head"
        raise TraceError(f"no rank traces for the {missing} arm: give at least one profiled pass of each arm")
    base_arm, head_arm = _arm(base), _arm(head)
    warnings = []
    if base_arm.ranks != head_arm.ranks:
        warnings.append(RankWarning(kind="world_sizes_differ", base_ranks=base_arm.ranks, head_ranks=head_arm.ranks))
    shared = sorted({r.rank for t in base for r in t.ranks} & {r.rank for t in head for r in t.ranks})
    ranks = [_rank_change(rank, base, head) for rank in shared]

    step = _pair(_median(base, lambda t: t.step_ms_per_step), _median(head, lambda t: t.step_ms_per_step))
    overlap = _pair(_median_or_none(base, lambda t: t.overlap_share), _median_or_none(head, lambda t: t.overlap_share))
    exposed = _pair(_median(base, lambda t: t.exposed_communication_ms_per_step),
                    _median(head, lambda t: t.exposed_communication_ms_per_step))
    hidden = _pair(_median(base, lambda t: t.overlapped_communication_ms_per_step),
                   _median(head, lambda t: t.overlapped_communication_ms_per_step))
    wait = _pair(_median(base, lambda t: t.wait_ms_per_step), _median(head, lambda t: t.wait_ms_per_step))

    findings: list[CommunicationNotOverlapped | RankHeldBack] = []
    base_step_ms = step.before or 0.0
    grown = (exposed.delta or 0.0) / base_step_ms if base_step_ms > 0 else 0.0
    unhidden = -(hidden.delta or 0.0) / base_step_ms if base_step_ms > 0 else 0.0
    separated = min(head_arm.exposed_communication_ms_by_repeat) > max(base_arm.exposed_communication_ms_by_repeat)
    if grown > EXPOSED_GROWTH_SHARE and unhidden > EXPOSED_GROWTH_SHARE and separated:
        findings.append(CommunicationNotOverlapped(
            exposed_communication_ms_per_step=exposed, overlapped_communication_ms_per_step=hidden,
            overlap_share=overlap, step_ms_per_step=step, share_of_step=grown))
    held = _held_back(head_arm, ranks, wait, step, base_step_ms)
    if held is not None:
        findings.append(held)

    fell_out = {r.rank for r in ranks if r.fell_out_of_graphs}
    return RankDiff(
        base=base_arm,
        head=head_arm,
        step_ms_per_step=step,
        overlap_share=overlap,
        communication_ms_per_step=_pair(_median(base, lambda t: t.communication_ms_per_step),
                                        _median(head, lambda t: t.communication_ms_per_step)),
        exposed_communication_ms_per_step=exposed,
        overlapped_communication_ms_per_step=hidden,
        wait_ms_per_step=wait,
        ranks=ranks,
        ranks_differ=(base_arm.straggler is not None or head_arm.straggler is not None
                      or 0 < len(fell_out) < len(ranks)),
        findings=findings,
        warnings=warnings,
    )


def _held_back(head: ArmRankPasses, ranks: list[RankTraceChange], wait: BeforeAfter, step: BeforeAfter,
               base_step_ms: float) -> RankHeldBack | None:
    rank = head.straggler
    by_rank = {r.rank: r for r in ranks}
    if rank is None or rank not in by_rank or base_step_ms <= 0:
        return None
    grown = (wait.delta or 0.0) / base_step_ms
    if grown <= WAIT_GROWTH_SHARE:
        return None
    this = by_rank[rank]
    others = [r for r in ranks if r.rank != rank]
    return RankHeldBack(
        rank=rank,
        straggler_share=this.straggler_share.after or 0.0,
        wait_ms_per_step=wait,
        step_ms_per_step=step,
        share_of_step=grown,
        compute_ms_per_step=this.compute_ms_per_step,
        others_compute_ms_per_step=_pair(
            statistics.median(r.compute_ms_per_step.before or 0.0 for r in others) if others else None,
            statistics.median(r.compute_ms_per_step.after or 0.0 for r in others) if others else None,
        ),
        idle_ms_per_step=this.idle_ms_per_step,
        fell_out_of_graphs=this.fell_out_of_graphs,
    )


def _arm(repeats: list[RankTraces]) -> ArmRankPasses:
    steps = sum(t.steps for t in repeats)
    last_in: dict[int, int] = {}
    for t in repeats:
        for rank in t.straggler:
            if rank is not None:
                last_in[rank] = last_in.get(rank, 0) + 1
    most = max(last_in.items(), key=lambda kv: (kv[1], -kv[0]), default=None)
    return ArmRankPasses(
        repeats=len(repeats),
        ranks=max(len(t.ranks) for t in repeats),
        activities=repeats[0].ranks[0].activities if repeats[0].ranks else "gpu_kernels",
        step_ms_by_repeat=[t.step_ms_per_step for t in repeats],
        exposed_communication_ms_by_repeat=[t.exposed_communication_ms_per_step for t in repeats],
        wait_ms_by_repeat=[t.wait_ms_per_step for t in repeats],
        straggler=most[0] if most is not None and most[1] > MOST_STEPS_SHARE * steps else None,
    )


def _rank_change(rank: int, base: list[RankTraces], head: list[RankTraces]) -> RankTraceChange:
    b, h = _of_rank(base, rank), _of_rank(head, rank)

    def pair(figure: Callable[[RankFigures], float]) -> BeforeAfter:
        return _pair(statistics.median(figure(r) for r in b), statistics.median(figure(r) for r in h))

    graphs = pair(lambda r: r.graph_launches_per_step)
    kernels = pair(lambda r: r.kernel_launches_per_step)
    return RankTraceChange(
        rank=rank,
        span_ms_per_step=pair(lambda r: r.span_ms_per_step),
        compute_ms_per_step=pair(lambda r: r.compute_ms_per_step),
        communication_ms_per_step=pair(lambda r: r.communication_ms_per_step),
        exposed_communication_ms_per_step=pair(lambda r: r.exposed_communication_ms_per_step),
        idle_ms_per_step=pair(lambda r: r.idle_ms_per_step),
        wait_ms_per_step=pair(lambda r: r.wait_ms_per_step),
        straggler_share=_pair(_straggler_share(base, rank), _straggler_share(head, rank)),
        graph_launches_per_step=graphs,
        kernel_launches_per_step=kernels,
        fell_out_of_graphs=(
            (graphs.before or 0.0) > 0
            and (graphs.after or 0.0) < (graphs.before or 0.0) - COUNT_TOLERANCE
            and (kernels.after or 0.0) > (kernels.before or 0.0) + COUNT_TOLERANCE
        ),
    )


def _of_rank(repeats: list[RankTraces], rank: int) -> list[RankFigures]:
    return [r for t in repeats for r in t.ranks if r.rank == rank]


def _straggler_share(repeats: list[RankTraces], rank: int) -> float:
    steps = sum(t.steps for t in repeats)
    return sum(s == rank for t in repeats for s in t.straggler) / steps if steps else 0.0


def _median(repeats: list[RankTraces], figure: Callable[[RankTraces], float]) -> float:
    return statistics.median(figure(t) for t in repeats)


def _median_or_none(repeats: list[RankTraces], figure: Callable[[RankTraces], float | None]) -> float | None:
    values = [v for t in repeats if (v := figure(t)) is not None]
    return statistics.median(values) if values else None
