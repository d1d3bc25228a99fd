"""Trace analysis: read a profiler trace, split it into decode steps, measure each step,
and compare two traces; and the trace analysis of a whole run.

The models (figures, diff, sections) import with pydantic alone, so a report reads without
numpy, msgspec or the readers; the functions that read and analyse a trace load those on
first use, through `__getattr__` below.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from guard.trace._comms import is_communication_host_op, is_communication_kernel
from guard.trace._diff import (
    BeforeAfter,
    GapChange,
    KernelChange,
    LaunchChange,
    StreamChange,
    TraceDiff,
    diff,
    grew,
)
from guard.trace._figures import (
    GapFigures,
    GpuActivityKind,
    KernelFigures,
    P90OverSteps,
    StepSeries,
    StepsRule,
    StreamFigures,
    TraceFigures,
    TraceWarning,
    TraceWarningKind,
)
from guard.trace._rank_diff import (
    ArmRankPasses,
    CommunicationNotOverlapped,
    RankDiff,
    RankFinding,
    RankHeldBack,
    RankTraceChange,
    diff_ranks,
)
from guard.trace._rank_figures import ActivityKind, RankFigures, RankStepSeries, RankTraces, RankWarning
from guard.trace._rank_sections import ArmRankTraces, RankTraceSection, rank_section_diff
from guard.trace._sections import ArmTraces, MixTraceSection, TraceSection
from guard.trace._text import diff_text, figures_text, warning_text

if TYPE_CHECKING:
    from guard.trace._analyze import analyze
    from guard.trace._model import KERNEL, MEMCPY, MEMSET, ApiTable, GpuTable, RangeTable, Trace
    from guard.trace._rank_run import rank_trace_sections
    from guard.trace._ranks import analyze_ranks
    from guard.trace._read import read_trace
    from guard.trace._run import mix_trace_section, trace_sections
    from guard.trace._steps import StepAssignment, assign_steps

# name -> the module that defines it: the parts that need numpy (and msgspec, for the readers)
_HEAVY = {
    "analyze": "_analyze",
    "KERNEL": "_model", "MEMCPY": "_model", "MEMSET": "_model",
    "ApiTable": "_model", "GpuTable": "_model", "RangeTable": "_model", "Trace": "_model",
    "read_trace": "_read",
    "analyze_ranks": "_ranks",
    "rank_trace_sections": "_rank_run",
    "trace_sections": "_run", "mix_trace_section": "_run",
    "StepAssignment": "_steps", "assign_steps": "_steps",
}


def __getattr__(name: str) -> Any:
    module = _HEAVY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


__all__ = [
    "ActivityKind",
    "ApiTable",
    "ArmRankPasses",
    "ArmRankTraces",
    "ArmTraces",
    "BeforeAfter",
    "CommunicationNotOverlapped",
    "GapChange",
    "GapFigures",
    "GpuActivityKind",
    "GpuTable",
    "KERNEL",
    "KernelChange",
    "KernelFigures",
    "LaunchChange",
    "MEMCPY",
    "MEMSET",
    "MixTraceSection",
    "P90OverSteps",
    "RangeTable",
    "RankDiff",
    "RankFigures",
    "RankFinding",
    "RankHeldBack",
    "RankStepSeries",
    "RankTraceChange",
    "RankTraceSection",
    "RankTraces",
    "RankWarning",
    "StepAssignment",
    "StepSeries",
    "StepsRule",
    "StreamChange",
    "StreamFigures",
    "Trace",
    "TraceDiff",
    "TraceFigures",
    "TraceSection",
    "TraceWarning",
    "TraceWarningKind",
    "analyze",
    "analyze_ranks",
    "assign_steps",
    "diff",
    "diff_ranks",
    "diff_text",
    "figures_text",
    "grew",
    "is_communication_host_op",
    "is_communication_kernel",
    "mix_trace_section",
    "rank_section_diff",
    "rank_trace_sections",
    "read_trace",
    "trace_sections",
    "warning_text",
]
