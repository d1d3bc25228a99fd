"""Report: `report.json` (versioned schema) and `comment.md` (rendered from templates/comment.md.j2)."""

from guard.report._chart import StripChart, strip_chart
from guard.report._check import MAX_NAMED, UnfoundedReport, check_report, describe_discrepancy
from guard.report._links import RunLinks, run_links
from guard.report._render import COMMENT_MARKER, render_comment, render_view
from guard.report._explained import explain_report, explain_run
from guard.report._gate import Gate, gate
from guard.report._schema import (
    READ_VERSIONS,
    SCHEMA_VERSION,
    ArmInfo,
    BatchShare,
    CapturePolicy,
    Environment,
    Report,
    RunRecord,
    WorkloadInfo,
)
from guard.report._reexplain import FactChange, Reexplained, changes_lines, reexplain
from guard.report._record import run_record
from guard.report._slow import slow_processes_sentence
from guard.report._svg import CHART_FILE, strip_svg
from guard.report._title import TITLE_LIMIT, title
from guard.report._todo import repeats_to_decide
from guard.report._view import Annotation, CommentView, build_view
from guard.report._warning_text import warning_text
from guard.report._words import metric, share, verdict
from guard.report._write import MAX_REPORT_BYTES, ReportError, read_report, write_report

__all__ = [
    "COMMENT_MARKER",
    "MAX_NAMED",
    "MAX_REPORT_BYTES",
    "TITLE_LIMIT",
    "Annotation",
    "CommentView",
    "build_view",
    "explain_report",
    "explain_run",
    "FactChange",
    "Reexplained",
    "changes_lines",
    "reexplain",
    "metric",
    "render_view",
    "verdict",
    "READ_VERSIONS",
    "CHART_FILE",
    "SCHEMA_VERSION",
    "ArmInfo",
    "BatchShare",
    "CapturePolicy",
    "UnfoundedReport",
    "Environment",
    "Gate",
    "gate",
    "Report",
    "ReportError",
    "RunLinks",
    "RunRecord",
    "StripChart",
    "WorkloadInfo",
    "check_report",
    "describe_discrepancy",
    "read_report",
    "repeats_to_decide",
    "render_comment",
    "share",
    "slow_processes_sentence",
    "run_links",
    "run_record",
    "strip_chart",
    "strip_svg",
    "title",
    "warning_text",
    "write_report",
]
