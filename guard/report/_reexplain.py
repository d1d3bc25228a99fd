"""A kept report explained again by the current explain stage from its own figures: once the
stage changes, a report written before (a committed example) states facts the stage no longer
gives, and `guard comment` refuses it. Everything else is read back and decided again as
`guard comment` decides it, and the verdict the explanation states is never changed."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, JsonValue

from guard.report._check import UnfoundedReport, _plain, check_report
from guard.report._explained import explain_report
from guard.report._schema import Report
from guard.report._write import read_report

MAX_LISTED = 20  # changed facts a summary names; the rest are counted


class FactChange(BaseModel):
    """One fact of the explanation the current stage gives otherwise."""

    field: str  # its place in report.json: "explanation.mix.parts[1].share"
    stated: JsonValue  # a list's length where a list grew or shrank
    recomputed: JsonValue


class Reexplained(BaseModel):
    report: Report  # the report read, with the explanation its figures give today
    changes: list[FactChange]  # [] when it already held it


def reexplain(path: Path) -> Reexplained:
    """The report at `path`, checked as `guard comment` checks one but for its explanation,
    which is made again. UnfoundedReport (exit 2) where the figures do not hold up, or where
    the explanation made again would state another verdict than the one the report gave."""
    report = read_report(path, check_explanation=False)
    again = explain_report(report)
    stated, recomputed = report.explanation.headline.verdict, again.headline.verdict
    if stated != recomputed:
        raise UnfoundedReport(
            f"{path} states the verdict {_plain(stated)} in its explanation, but its decided verdict is "
            f"{_plain(recomputed)}; explaining a report again never changes its verdict, so nothing was written. "
            "Pass the report.json that `guard run` wrote, unedited"
        )
    changes = _changes("explanation", report.explanation.model_dump(mode="json"), again.model_dump(mode="json"))
    refreshed = report.model_copy(update={"explanation": again})
    check_report(refreshed, path)  # what is written is what `guard comment` accepts
    return Reexplained(report=refreshed, changes=changes)


def changes_lines(changes: list[FactChange]) -> list[str]:
    """'explanation.mix.parts[1].share: 0.674 -> 0.0', one a line, for a terminal or a log:
    a report's strings may be anyone's, so each value is printable ASCII and cut short."""
    lines = [f"{_plain(c.field)}: {_value(c.stated)} -> {_value(c.recomputed)}" for c in changes[:MAX_LISTED]]
    if len(changes) > MAX_LISTED:
        lines.append(f"and {len(changes) - MAX_LISTED} more")
    return lines


def _changes(where: str, stated: JsonValue, recomputed: JsonValue) -> list[FactChange]:
    """Every leaf where the two differ; a list of another length is one change, its length."""
    if isinstance(stated, dict) and isinstance(recomputed, dict):
        return [c for key in dict.fromkeys([*stated, *recomputed])
                for c in _changes(f"{where}.{key}", stated.get(key), recomputed.get(key))]
    if isinstance(stated, list) and isinstance(recomputed, list):
        if len(stated) != len(recomputed):
            return [FactChange(field=f"{where} (items)", stated=len(stated), recomputed=len(recomputed))]
        return [c for i, (a, b) in enumerate(zip(stated, recomputed)) for c in _changes(f"{where}[{i}]", a, b)]
    return [] if stated == recomputed else [FactChange(field=where, stated=stated, recomputed=recomputed)]


def _value(value: JsonValue) -> str:
    if isinstance(value, (dict, list)):
        return f"{type(value).__name__} of {len(value)}"
    return _plain(value if isinstance(value, str) else repr(value), limit=40)
