"""Explain: after the comparison and the trace analysis, the facts the comment states."""

from guard.explain._explain import (
    DOMINANT_SHARE, NOTABLE_SHARE, cause_of, compiled_cause, explain, graphs_gone, padded_rows, time_split,
)
from guard.explain._mix import CANDIDATE_SHARE, mix_attribution, row_cost
from guard.explain._models import (
    GRAPH_BREAK_CAUSES, AblationEffect, CapturePlace, Cause, CauseKind, CompiledCause, DeviceRise, Explanation,
    Headline, HostTime, LaunchNote, MixAttribution, MixCauseKind, MixPart, MixPartKind, MixPath, MixSizeChange,
    ProfileScale, RankCause, RankCauseKind, RowCost, SlowerKernel, StragglerAgreement, TimeSplit, TraceSide,
)
from guard.explain._ranks import rank_causes

__all__ = [
    "CANDIDATE_SHARE",
    "DOMINANT_SHARE",
    "GRAPH_BREAK_CAUSES",
    "NOTABLE_SHARE",
    "AblationEffect",
    "CapturePlace",
    "Cause",
    "CompiledCause",
    "CauseKind",
    "DeviceRise",
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
    "RankCause",
    "RankCauseKind",
    "SlowerKernel",
    "StragglerAgreement",
    "TimeSplit",
    "cause_of",
    "compiled_cause",
    "explain",
    "graphs_gone",
    "mix_attribution",
    "row_cost",
    "padded_rows",
    "rank_causes",
    "time_split",
]
