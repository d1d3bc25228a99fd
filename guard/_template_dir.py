"""Where the jinja2 templates are: the repository's top-level templates/ in a checkout (and an
editable install), or the copy the wheel ships inside the package as guard/_templates."""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent
INSTALLED = _PACKAGE / "_templates"  # where pyproject's `sources` puts templates/ in the wheel
CHECKOUT = _PACKAGE.parent / "templates"


def template_dir() -> Path:
    # the comment's template, not the folder: a checkout may keep an emptied guard/_templates
    # (a tree synced from before the templates moved, a __pycache__ left behind)
    return INSTALLED if (INSTALLED / "comment.md.j2").is_file() else CHECKOUT
