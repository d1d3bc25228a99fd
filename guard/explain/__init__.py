"""Explain: after the comparison and the trace analysis, the facts the comment states."""

from guard.explain._explain import (
    DOMINANT_SHARE, NOTABLE_SHARE, cause_of, explain, graphs_gone, padded_rows, time_split,
)
from guard.explain._mix import CANDIDATE_SHARE, mix_attribution, row_cost
from guard.explain._models import (
    AblationEffect, CapturePlace, Cause, CauseKind, Explanation, Headline, HostTime, LaunchNote, MixAttribution,
    MixCauseKind, MixPart, MixPartKind, MixPath, MixSizeChange, ProfileScale, RowCost, SlowerKernel, TimeSplit,
    TraceSide,
)

__all__ = [
    "CANDIDATE_SHARE",
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
    "MixAttribution",
    "MixCauseKind",
    "MixPart",
    "MixPartKind",
    "MixPath",
    "MixSizeChange",
    "RowCost",
    "TraceSide",
    "ProfileScale",
    "SlowerKernel",
    "TimeSplit",
    "cause_of",
    "explain",
    "graphs_gone",
    "mix_attribution",
    "row_cost",
    "padded_rows",
    "time_split",
]
