"""The trace part of a report: per batch size and for the batch-size mix, each arm's profiled
figures and the diff.

Models only; guard/trace/_run.py fills them from a run's traces."""

from __future__ import annotations

from pydantic import BaseModel

from guard.trace._diff import TraceDiff
from guard.trace._figures import TraceFigures


class ArmTraces(BaseModel):
    arm: str
    traces: list[str]  # every repeat's trace, relative to the report's folder
    shown_repeat: int | None = None  # the repeat whose figures are shown: median idle time
    shown_trace: str | None = None
    figures: TraceFigures | None = None
    idle_ms_per_step_by_repeat: list[float] = []
    error: str | None = None


class TraceSection(BaseModel):
    batch_size: int
    profile_steps: int
    arms: list[ArmTraces]
    diff: TraceDiff | None = None  # base -> head, from each arm's shown repeat


class MixTraceSection(BaseModel):
    """The batch-size mix's profiled pass: its steps are the schedule's, of every size in it,
    the same steps in every arm, so per-step figures compare like for like."""

    profile_steps: int
    arms: list[ArmTraces]
    diff: TraceDiff | None = None  # base -> head, from each arm's shown repeat
