"""Trace analysis: read a profiler trace, split it into decode steps, measure each step,
and compare two traces."""

from guard.trace._diff import BeforeAfter, GapChange, KernelChange, LaunchChange, StreamChange, TraceDiff, diff
from guard.trace._figures import (
    GapFigures,
    KernelFigures,
    P90OverSteps,
    StepSeries,
    StreamFigures,
    TraceFigures,
    analyze,
)
from guard.trace._model import KERNEL, MEMCPY, MEMSET, ApiTable, GpuTable, RangeTable, Trace
from guard.trace._read import read_trace
from guard.trace._steps import StepAssignment, StepsRule, assign_steps
from guard.trace._text import diff_text, figures_text

__all__ = [
    "KERNEL",
    "MEMCPY",
    "MEMSET",
    "ApiTable",
    "BeforeAfter",
    "GapChange",
    "GapFigures",
    "GpuTable",
    "KernelChange",
    "KernelFigures",
    "P90OverSteps",
    "RangeTable",
    "StepAssignment",
    "StepSeries",
    "StepsRule",
    "StreamChange",
    "StreamFigures",
    "Trace",
    "TraceDiff",
    "LaunchChange",
    "TraceFigures",
    "analyze",
    "assign_steps",
    "diff",
    "diff_text",
    "figures_text",
    "read_trace",
]
