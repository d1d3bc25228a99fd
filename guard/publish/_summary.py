"""What a CI job shows besides the comment: step outputs, the job summary, annotations,
and the one-line description of the commit status."""

from __future__ import annotations

import uuid
from pathlib import Path

from guard._markdown import visible
from guard._output import append_whole
from guard.report import Report, build_view, warning_text

MAX_ANNOTATION_CHARS = 4_000


def worst_tok_per_s_change_pct(report: Report) -> float | None:
    """The largest fall of tok/s (most negative change) over the batch sizes, in percent."""
    changes = [b.tok_per_s_change.pct for b in report.batch_sizes if b.tok_per_s_change is not None]
    return min(changes) if changes else None


def worst_gpu_ms_change_pct(report: Report) -> float | None:
    """The largest rise of step time (most positive change) over the batch sizes, in percent."""
    changes = [b.gpu_ms_change.pct for b in report.batch_sizes if b.gpu_ms_change is not None]
    return max(changes) if changes else None


def headline(report: Report) -> str:
    """The verdict with its deciding figure, in a line (the commit status description)."""
    return build_view(report).status


def annotations(report: Report) -> list[str]:
    """Workflow commands: an error for a regression or an invalid run, warnings for the rest."""
    view = build_view(report)
    lines = []
    if view.annotation is not None:
        lines.append(_command(view.annotation.level, view.annotation.heading, view.annotation.message))
    for warning in report.warnings:
        lines.append(_command("warning", "regression-guard", warning_text(warning)))
    return lines


def write_outputs(path: Path, values: dict[str, str]) -> None:
    """Append step outputs to $GITHUB_OUTPUT, with a delimiter for any value that spans lines."""
    lines = []
    for name, value in values.items():
        if "\n" in value or "\r" in value:
            delimiter = f"guard_{uuid.uuid4().hex}"
            while delimiter in value:  # a value that holds it would end the block early
                delimiter = f"guard_{uuid.uuid4().hex}"
            lines.append(f"{name}<<{delimiter}\n{value}\n{delimiter}\n")
        else:
            lines.append(f"{name}={value}\n")
    append_whole(path, "".join(lines))  # all the outputs or none: a half line would be read as a value


def _command(kind: str, heading: str, message: str) -> str:
    """One workflow command on one line: the runner reads a command per line, so escaping the
    line breaks (and '%', which escapes them) keeps a report's text from starting another."""
    message = message if len(message) <= MAX_ANNOTATION_CHARS else message[: MAX_ANNOTATION_CHARS - 3] + "..."
    return f"::{kind} title={_escape_property(heading)}::{_escape_data(message)}"


def _escape_data(text: str) -> str:
    """Line breaks as the runner's escapes; other control and bidirectional characters as code points."""
    return visible(text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A"))


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")
