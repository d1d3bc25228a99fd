"""Where the jinja2 templates are: the repository's top-level templates/ in a checkout (and an
editable install), or the copy the wheel ships inside the package as guard/_templates."""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent
INSTALLED = _PACKAGE / "_templates"  # where pyproject's `sources` puts templates/ in the wheel
CHECKOUT = _PACKAGE.parent / "templates"


def template_dir() -> Path:
    return INSTALLED if INSTALLED.is_dir() else CHECKOUT
