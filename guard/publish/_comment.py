"""One sticky comment per pull request: found by its hidden marker among the comments the
guard's own identity wrote, edited in place, never posted twice."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel

from guard._comment_mode import CommentMode, creates_comment
from guard._markdown import code
from guard._marker import Marker, without_marker
from guard.publish._client import GitHub, Progress, body_json
from guard.publish._errors import MaybeApplied, PublishError
from guard.report import verdict as verdict_words

DEFAULT_BOT_LOGIN = "github-actions[bot]"
# GitHub refuses bodies over this many characters with 422.
MAX_BODY_CHARS = 65_536
CUT_NOTE = (
    "\n\n---\n_This comment was cut at {limit:,} characters. The whole report is in the job summary "
    "and in report.json._\n"
)
_MENTION = re.compile(r"@(?=[A-Za-z0-9])")
_WRITE_TRIES = 3


class CommentResult(BaseModel):
    action: Literal["created", "updated", "unchanged", "none", "skipped"]
    id: int | None = None
    url: str | None = None
    deleted_duplicates: int = 0


def identity(gh: GitHub, bot_login: str = DEFAULT_BOT_LOGIN) -> str:
    """The login the token writes as: GET /user where the token may ask (a personal or
    app-user token); the Actions token may not, and writes as `bot_login`."""
    response = gh.request("GET", "/user", ok=(401, 403, 404))
    if response.status_code == 200:
        login = body_json(response, "GET", "/user")
        login = login.get("login") if isinstance(login, dict) else None
        if not isinstance(login, str) or not login:
            raise PublishError("GET /user: HTTP 200 without a login; GITHUB_API_URL must be the GitHub API")
        return login
    return bot_login


def find_ours(gh: GitHub, repo: str, pr: int, login: str, key: str) -> list[dict[str, Any]]:
    """Comments of `login` on the pull request that carry the marker for `key`, oldest first."""
    ours = []
    for comment in gh.paginate(f"/repos/{repo}/issues/{pr}/comments"):
        user, body = comment.get("user"), comment.get("body")
        if not isinstance(user, dict) or user.get("login") != login or not isinstance(body, str):
            continue
        marker = Marker.parse(body)
        if marker is not None and marker.key == key and _has_id(comment):
            ours.append(comment)
    return sorted(ours, key=lambda c: c["id"])


def compose(body: str, verdict: str, head: str, key: str, previous: Marker | None) -> str:
    """The comment's final text: the marker, a line about an earlier regression when there
    was one, the report's comment with @-mentions neutralised, cut to GitHub's limit."""
    regressed = head if verdict == "regression" else (previous.regressed if previous else "")
    marker = Marker(key=key, verdict=verdict, head=head, regressed=regressed)
    text = without_marker(body)
    text = _MENTION.sub("@\u200b", text)  # a bot comment pings no one
    note = ""
    if previous is not None and previous.regressed and verdict != "regression":
        if verdict in ("pass", "improvement"):
            note = (
                f"> **The regression this comment reported at {code(previous.regressed[:8])} "
                f"is gone at {code(head[:8])}.**\n\n"
            )
        else:
            note = (
                f"> A regression was reported here at {code(previous.regressed[:8])}; the run at {code(head[:8])} "
                f"could not decide ({verdict_words(verdict)}), see below.\n\n"
            )
    return cut(f"{marker.render()}\n{note}{text}")


def cut(body: str, limit: int = MAX_BODY_CHARS) -> str:
    """Cut at a line boundary with a note, so the whole stays within `limit` characters."""
    if len(body) <= limit:
        return body
    note = CUT_NOTE.format(limit=limit)
    head = body[: limit - len(note)]
    line_end = head.rfind("\n")
    if line_end >= len(head) - 2_000:  # a line boundary near the end; else cut inside the long line
        head = head[:line_end]
    return head + note


def publish_comment(
    gh: GitHub, repo: str, pr: int, body: str, *, verdict: str, head: str, mode: CommentMode,
    login: str, key: str = "default", progress: Progress = lambda _: None,
) -> CommentResult:
    """Create, update or leave the sticky comment, as `mode` and the verdict say.

    unless-green: a comment is created for every verdict but pass and improvement (a
    regression, an invalid run, an undecided one: each holds the merge); on-regression: for a
    regression only. With either, one that exists is always brought up to date, so a
    regression that is gone is said to be gone. always: created or updated on every run.
    never: nothing is written."""
    if mode == "never":
        return CommentResult(action="skipped")
    for _ in range(_WRITE_TRIES):
        ours = find_ours(gh, repo, pr, login, key)
        if not ours:
            if not creates_comment(mode, verdict):
                return CommentResult(action="none")
            try:
                text = compose(body, verdict, head, key, None)
                created = _write(gh, "POST", f"/repos/{repo}/issues/{pr}/comments", text)
            except MaybeApplied as exc:
                # The comment may exist now: look again before writing again.
                progress(f"{exc.message}; checking whether the comment was created")
                continue
            return _keep_oldest(gh, repo, pr, login, key, created, body, verdict, head, progress)
        existing = ours[0]
        text = compose(body, verdict, head, key, Marker.parse(existing["body"]))
        deleted = _delete(gh, repo, ours[1:], progress)
        if existing["body"] == text:
            return CommentResult(action="unchanged", id=existing["id"], url=_url(existing),
                                 deleted_duplicates=deleted)
        updated = _write(gh, "PATCH", f"/repos/{repo}/issues/comments/{existing['id']}", text)
        return CommentResult(action="updated", id=updated["id"], url=_url(updated),
                             deleted_duplicates=deleted)
    raise PublishError(
        f"could not create the comment on {repo}#{pr} after {_WRITE_TRIES} tries without a clear answer from GitHub"
    )


def _write(gh: GitHub, method: str, path: str, text: str) -> dict[str, Any]:
    """POST or PATCH a body; when GitHub still finds it too long (it may count otherwise),
    cut it to half once more."""
    response = gh.request(method, path, json={"body": text}, ok=(422,))
    if response.status_code == 422:
        if "too long" not in response.text:
            raise PublishError(f"{method} {path}: HTTP 422 {response.text[:300]}")
        shorter = cut(text, min(len(text), MAX_BODY_CHARS) // 2)
        response = gh.request(method, path, json={"body": shorter})
    written = body_json(response, method, path)
    if not _has_id(written):
        raise PublishError(f"{method} {path}: HTTP {response.status_code} without the comment's id; "
                           "GITHUB_API_URL must be the GitHub API")
    return written


def _url(comment: dict[str, Any]) -> str | None:
    url = comment.get("html_url")
    return url if isinstance(url, str) else None


def _has_id(comment: Any) -> bool:
    """A comment as GitHub gives it has a numeric id (and a URL, which is only shown)."""
    return isinstance(comment, dict) and type(comment.get("id")) is int


def _keep_oldest(
    gh: GitHub, repo: str, pr: int, login: str, key: str, created: dict[str, Any],
    body: str, verdict: str, head: str, progress: Progress,
) -> CommentResult:
    """Another run may have created its comment at the same moment: keep the oldest, with this run's text."""
    ours = find_ours(gh, repo, pr, login, key)
    if len(ours) < 2:
        return CommentResult(action="created", id=created["id"], url=_url(created))
    oldest = ours[0]
    deleted = _delete(gh, repo, ours[1:], progress)
    updated = _write(gh, "PATCH", f"/repos/{repo}/issues/comments/{oldest['id']}",
                     compose(body, verdict, head, key, Marker.parse(oldest["body"])))
    return CommentResult(action="updated", id=updated["id"], url=_url(updated), deleted_duplicates=deleted)


def _delete(gh: GitHub, repo: str, comments: list[dict[str, Any]], progress: Progress) -> int:
    for comment in comments:
        progress(f"deleting duplicate guard comment {comment['id']}")
        gh.request("DELETE", f"/repos/{repo}/issues/comments/{comment['id']}", ok=(404,))
    return len(comments)
