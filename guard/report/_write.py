"""Write report.json and comment.md into the output folder; read a report back."""

from __future__ import annotations

from pathlib import Path

import pydantic
import pydantic_core

from guard._errors import GuardError
from guard._output import check_out_dir, write_all_atomic
from guard.report._chart import strip_chart
from guard.report._check import check_report
from guard.report._render import render_comment
from guard.report._schema import READ_VERSIONS, Report
from guard.report._svg import CHART_FILE, strip_svg
from guard.report._words import metric

# A report read back may come from another job, or from a pull request's run: it is
# data, checked against the schema, and bounded in size before it is parsed.
MAX_REPORT_BYTES = 32 * 1024 * 1024


class ReportError(GuardError):
    """A report.json that is missing, too large, or not a report of this schema version."""


def write_report(report: Report, out_dir: Path) -> tuple[Path, Path]:
    """report.json, comment.md and the picture (step-times.svg), each written in full before
    any replaces its earlier copy: a full disk leaves the earlier ones as they were (OutputError)."""
    check_out_dir(out_dir)
    json_path = out_dir / "report.json"
    comment_path = out_dir / "comment.md"
    text, comment = report.model_dump_json(indent=2) + "\n", render_comment(report)
    files: dict[Path, str | bytes] = {comment_path: comment}
    chart = strip_chart(report)
    if chart is not None:
        files[out_dir / CHART_FILE] = strip_svg(chart, metric("gpu_ms", report.gpu_timed()))
    else:  # an earlier run's picture must not stand beside this report
        (out_dir / CHART_FILE).unlink(missing_ok=True)
    files[json_path] = text  # renamed into place last: a report found has its comment and picture
    write_all_atomic(files)
    return json_path, comment_path


def read_report(path: Path, *, check_explanation: bool = True) -> Report:
    """The report at `path`, checked against the schema and decided again from its own
    numbers (UnfoundedReport, exit 2, when it does not hold up); its explanation too, unless
    `check_explanation` is False (for `guard explain`, which makes it again)."""
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise ReportError(f"cannot read {path}: {exc.strerror}; pass the report.json that `guard run` wrote") from exc
    if size > MAX_REPORT_BYTES:
        raise ReportError(f"{path} is {size:,} bytes, over the {MAX_REPORT_BYTES:,} a report can be")
    try:
        with path.open("rb") as f:
            data = f.read(MAX_REPORT_BYTES + 1)  # a device or pipe has no size to stat: read no more than a report
    except OSError as exc:
        raise ReportError(f"cannot read {path}: {exc.strerror}; pass the report.json that `guard run` wrote") from exc
    if len(data) > MAX_REPORT_BYTES:
        raise ReportError(f"{path} holds more than the {MAX_REPORT_BYTES:,} bytes a report can be")
    version = _schema_version(data)
    if isinstance(version, int) and not isinstance(version, bool) and version not in READ_VERSIONS:
        raise ReportError(
            f"{path} is a report of schema_version {version}; this guard reads schema_version "
            f"{', '.join(map(str, READ_VERSIONS[:-1]))} and {READ_VERSIONS[-1]} only: re-run the guard (`guard run`) "
            "to get a report it reads"
        )
    try:
        report = Report.model_validate_json(data)
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "the top level"
        raise ReportError(f"{path} is not a valid report: {where}: {first['msg']}; "
                          "pass the report.json that `guard run` wrote") from exc
    if report.schema_version < 6 and report.mix is not None:  # schema 6 decided the mix
        raise ReportError(f"{path} is a report of schema_version {report.schema_version} with a batch-size mix, "
                          "whose verdict it did not decide: re-run the guard (`guard run`) to get a report it reads")
    names = {arm.name for arm in report.arms}
    for role, name in (("base", report.base), ("head", report.head)):
        if name not in names:
            raise ReportError(f"{path} is not a valid report: its {role} {name!r} is none of its arms; "
                              "pass the report.json that `guard run` wrote")
    # base's reference process fills base's cache: only other arms, with caches on, get a fill process
    stray = next((name for name in report.compile_filled if name not in names or name == report.base), None)
    if stray is not None or (report.compile_filled and not report.compile_caches):
        what = f"names {stray!r}, not an arm besides base" if stray is not None else "is set with compile caches off"
        raise ReportError(f"{path} is not a valid report: its compile_filled {what}; "
                          "pass the report.json that `guard run` wrote")
    # its verdicts are made again from its numbers: a report is data
    check_report(report, path, check_explanation=check_explanation)
    return report


def _schema_version(text: bytes) -> object:
    try:
        data = pydantic_core.from_json(text)  # refuses deep nesting with ValueError, as the model does
    except ValueError:
        return None
    return data.get("schema_version") if isinstance(data, dict) else None
