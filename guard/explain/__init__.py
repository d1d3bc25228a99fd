"""Explain: after the comparison and the trace analysis, the facts the comment states."""

from guard.explain._explain import DOMINANT_SHARE, NOTABLE_SHARE, cause_of, explain, graphs_gone, time_split
from guard.explain._models import (
    AblationEffect, CapturePlace, Cause, CauseKind, Explanation, Headline, HostTime, LaunchNote, ProfileScale,
    SlowerKernel, TimeSplit,
)

__all__ = [
    "DOMINANT_SHARE",
    "NOTABLE_SHARE",
    "AblationEffect",
    "CapturePlace",
    "Cause",
    "CauseKind",
    "Explanation",
    "Headline",
    "HostTime",
    "LaunchNote",
    "ProfileScale",
    "SlowerKernel",
    "TimeSplit",
    "cause_of",
    "explain",
    "graphs_gone",
    "time_split",
]
