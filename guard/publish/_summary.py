"""What a CI job shows besides the comment: step outputs, the job summary, annotations,
and the one-line description of the commit status."""

from __future__ import annotations

import uuid
from pathlib import Path

from guard._output import append_whole
from guard.report import Report, title, verdict_label

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
    """The verdict with its largest figure, in a line (the commit status description)."""
    if report.verdict == "invalid":
        reason = report.reasons[0] if report.reasons else "see the report"
        return f"invalid: {reason}"
    measured = [b for b in report.batch_sizes if b.gpu_ms_change is not None and b.tok_per_s_change is not None]
    if not measured:
        return report.verdict
    if report.verdict in ("regression", "at_threshold", "inconclusive"):
        # the batch size that gave the verdict, the largest step-time change of those that did
        deciding = [b for b in measured if b.verdict == report.verdict] or measured
        b = max(deciding, key=lambda b: b.gpu_ms_change.pct)  # type: ignore[union-attr]
    else:
        b = max(measured, key=lambda b: abs(b.gpu_ms_change.pct))  # type: ignore[union-attr]
    step = "GPU ms/step" if report.gpu_timed() else "ms/step (CPU)"
    return (
        f"{verdict_label(report.verdict)}: batch size {b.batch_size} {step} {b.gpu_ms_change.pct:+.2f}%, "  # type: ignore[union-attr]
        f"tok/s {b.tok_per_s_change.pct:+.2f}%"  # type: ignore[union-attr]
    )


def annotations(report: Report) -> list[str]:
    """Workflow commands: an error for a regression or an invalid run, warnings for the rest."""
    lines = []
    if report.verdict == "regression":
        lines.append(_command("error", "Decode regression", title(report)))
    elif report.verdict == "invalid":
        lines.append(_command("error", "Decode comparison not valid", "; ".join(report.reasons) or title(report)))
    elif report.verdict == "at_threshold":
        lines.append(_command("warning", "Decode slowdown at the threshold", title(report)))
    elif report.verdict == "inconclusive":
        lines.append(_command("warning", "Decode speed inconclusive", "; ".join(report.reasons) or title(report)))
    for warning in report.warnings:
        lines.append(_command("warning", "regression-guard", warning))
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
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")
