"""The trace part of a report of several ranks: per batch size, each arm's profiled passes
across its ranks (one per profiled repeat) and the diff of base's and head's.

Models and the diff only, with pydantic and the standard library: a report read back makes
its diff again from the passes it keeps (`rank_section_diff`). guard/trace/_rank_run.py fills
them from a run's traces."""

from __future__ import annotations

from pydantic import BaseModel

from guard.trace._rank_diff import RankDiff, diff_ranks
from guard.trace._rank_figures import RankTraces


class ArmRankTraces(BaseModel):
    arm: str
    traces: list[list[str]]  # per profiled repeat, each rank's trace in rank order, relative to the report's folder
    repeats: list[int]  # the repeat each of `passes` came from
    passes: list[RankTraces]  # the passes that could be analysed: the diff is made from these
    error: str | None = None  # the passes that could not be, and why


class RankTraceSection(BaseModel):
    batch_size: int
    profile_steps: int
    arms: list[ArmRankTraces]
    diff: RankDiff | None = None  # base -> head over every pass of each: `rank_section_diff`


def rank_section_diff(arms: list[ArmRankTraces], base: str, head: str) -> RankDiff | None:
    """Base -> head from each arm's analysed passes; None unless both have one."""
    passes = {a.arm: a.passes for a in arms}
    before, after = passes.get(base), passes.get(head)
    return diff_ranks(before, after) if before and after else None
