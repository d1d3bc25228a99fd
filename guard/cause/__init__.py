"""Cause stage: find the changes of a pull request that touch CUDA graph capture."""

from guard.cause._detect import find_capture_changes
from guard.cause._location import DEFAULT_SERVER, format_place, location
from guard.cause._models import (
    CaptureChange,
    CaptureChanges,
    CaptureHunk,
    CaptureSetting,
    CompileReach,
    CompileSite,
    GraphSplit,
    LineRange,
)
from guard.cause._patterns import API_PATTERNS, reads_as_call

__all__ = [
    "API_PATTERNS",
    "DEFAULT_SERVER",
    "CaptureChange",
    "CaptureChanges",
    "CaptureHunk",
    "CaptureSetting",
    "CompileReach",
    "CompileSite",
    "GraphSplit",
    "LineRange",
    "find_capture_changes",
    "format_place",
    "location",
    "reads_as_call",
]
