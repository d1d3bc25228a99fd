"""The dashboard's pages as HTML strings: jinja2 with autoescape on, so no string of a report,
git or GitHub reaches a page unescaped. No script: the pages are whole as served."""

from __future__ import annotations

from functools import lru_cache

import jinja2
import markupsafe

from guard._markdown import visible
from guard._template_dir import template_dir
from guard.dashboard._models import PullRuns, RepoHistory
from guard.dashboard._view import pull_view, repo_view


@lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(template_dir() / "dashboard"),
        autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
        finalize=_shown,
    )


def _shown(value: object) -> object:
    """Every string a page shows, with its control and bidirectional characters written as code
    points (a commit subject's U+202E would reverse the line); what a macro made is left as made."""
    return visible(value) if isinstance(value, str) and not isinstance(value, markupsafe.Markup) else value


def repo_page(history: RepoHistory, regressions_only: bool = False) -> str:
    """The history of main per workload, batch size and GPU class, and the repository's pull requests."""
    return _environment().get_template("repo.html.j2").render(v=repo_view(history, regressions_only))


def pull_page(pull: PullRuns, regressions_only: bool = False) -> str:
    """A pull request's runs: verdicts, per-process strip plots, trace figures and links."""
    return _environment().get_template("pull.html.j2").render(v=pull_view(pull, regressions_only))
