"""Format where a capture change is, as the reference issue does: `path:118-128`, linked when possible."""

from __future__ import annotations

import re
from urllib.parse import quote

from guard._errors import GuardError
from guard._markdown import code
from guard._types import is_repo_name
from guard.cause._models import CaptureChange, LineRange

DEFAULT_SERVER = "https://github.com"
_SHA_RE = re.compile(r"^[0-9a-fA-F]{7,64}$")


def location(
    change: CaptureChange,
    range: LineRange | tuple[int, int] | None = None,
    *,
    github_repo: str | None = None,
    sha: str | None = None,
    server_url: str = DEFAULT_SERVER,
) -> str:
    """Markdown for one place: "`path:118-128`", a link to it at `sha` when a repository and sha are given."""
    return format_place(change, _as_range(change, range), github_repo=github_repo, sha=sha, server_url=server_url)


def format_place(
    change: CaptureChange,
    span: LineRange | None,
    *,
    github_repo: str | None = None,
    sha: str | None = None,
    server_url: str = DEFAULT_SERVER,
    short: bool = False,
    function: str | None = None,
) -> str:
    """As location(); `short` writes a later place in the same file as "`:222`", as the issue does,
    and `function` adds the enclosing def: "`path:118-128` (`_upload_graph`)"."""
    if change.status == "deleted":
        # no head lines to point at, and nothing to link to at the head commit
        return f"{code(change.path)} ({_notes(function, 'file deleted in head')})"
    lines = _lines(span)
    shown = f":{lines}" if short and lines else f"{change.path}:{lines}" if lines else change.path
    label = code(shown)
    if github_repo and sha:
        label = f"[{label}]({blob_url(change.path, span, github_repo=github_repo, sha=sha, server_url=server_url)})"
    removal = None
    if span is not None and span.deletion:
        removal = "lines removed " + ("at the top of the file" if span.start == 0 else f"after line {span.start}")
    notes = _notes(function, removal)
    return f"{label} ({notes})" if notes else label


def _notes(function: str | None, note: str | None) -> str:
    return ", ".join(part for part in (code(function) if function else None, note) if part)


def blob_url(
    path: str, span: LineRange | None, *, github_repo: str, sha: str, server_url: str = DEFAULT_SERVER
) -> str:
    """https://github.com/OWNER/NAME/blob/SHA/path#L118-L128 (any GitHub server)."""
    if not is_repo_name(github_repo):
        raise GuardError(f"GitHub repository {github_repo!r} is not of the form OWNER/NAME (e.g. octo/engine)")
    if not _SHA_RE.match(sha):
        raise GuardError(f"{sha!r} is not a commit sha; pass the head commit's hex sha for source links")
    if not server_url.startswith(("https://", "http://")):
        raise GuardError(f"server URL {server_url!r} must start with https:// (e.g. https://github.example.com)")
    url = f"{server_url.rstrip('/')}/{github_repo}/blob/{sha}/{quote(path, safe='/')}"
    if span is None:
        return url
    start = max(span.start, 1)
    end = max(span.end, start)
    return f"{url}#L{start}" if start == end else f"{url}#L{start}-L{end}"


def _lines(span: LineRange | None) -> str:
    if span is None:
        return ""
    start = max(span.start, 1)  # a removal at the very top sits before line 1
    return str(start) if span.end <= start else f"{start}-{span.end}"


def _as_range(change: CaptureChange, value: LineRange | tuple[int, int] | None) -> LineRange | None:
    if value is None or isinstance(value, LineRange):
        return value
    start, end = value
    # a tuple from change.ranges keeps its hunk's "lines removed" note
    known = next((h.range for h in change.hunks if h.range.as_tuple() == (start, end)), None)
    return known or LineRange(start=start, end=end)

