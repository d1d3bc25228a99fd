"""Render comment.md: the view of the report (`_view.py`), laid out by templates/comment.md.j2."""

from __future__ import annotations

import jinja2

from guard._marker import COMMENT_MARKER
from guard._template_dir import template_dir
from guard.report._links import RunLinks
from guard.report._schema import Report
from guard.report._view import CommentView, build_view

COMMENT_TEMPLATE = "comment.md.j2"

__all__ = ["COMMENT_MARKER", "COMMENT_TEMPLATE", "render_comment", "render_view"]


def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(template_dir()),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


def render_view(view: CommentView) -> str:
    return _environment().get_template(COMMENT_TEMPLATE).render(v=view)


def render_comment(report: Report, links: RunLinks | None = None) -> str:
    """`links`: the run that measured and its artifact, from the job that posts (never the report)."""
    return render_view(build_view(report, links))
