"""Cause stage: find the changes of a pull request that touch CUDA graph capture."""

from guard.cause._detect import find_capture_changes
from guard.cause._location import location
from guard.cause._models import (
    CaptureChange,
    CaptureChanges,
    CaptureHunk,
    CaptureSetting,
    CompileReach,
    CompileSite,
    LineRange,
)
from guard.cause._patterns import API_PATTERNS
from guard.cause._summary import capture_summary

__all__ = [
    "API_PATTERNS",
    "CaptureChange",
    "CaptureChanges",
    "CaptureHunk",
    "CaptureSetting",
    "CompileReach",
    "CompileSite",
    "LineRange",
    "capture_summary",
    "find_capture_changes",
    "location",
]
