"""Write report.json and comment.md into the output folder."""

from __future__ import annotations

from pathlib import Path

from guard.report._render import render_comment
from guard.report._schema import Report


def write_report(report: Report, out_dir: Path) -> tuple[Path, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path = out_dir / "report.json"
    comment_path = out_dir / "comment.md"
    json_path.write_text(report.model_dump_json(indent=2) + "\n")
    comment_path.write_text(render_comment(report))
    return json_path, comment_path
