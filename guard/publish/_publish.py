"""Publish one report: the sticky comment on the pull request and the commit status."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlsplit

from pydantic import BaseModel

from guard._types import is_commit_sha, is_repo_name
from guard.publish._client import DEFAULT_API_URL, GitHub, Progress, Sleep
from guard._comment_mode import DEFAULT_COMMENT_MODE, CommentMode
from guard.publish._comment import DEFAULT_BOT_LOGIN, CommentResult, identity, publish_comment
from guard.publish._errors import PublishError
from guard.publish._status import set_status
from guard.publish._summary import headline
from guard.report import Report, gate, read_report, render_comment, run_links

_KEY = re.compile(r"^[A-Za-z0-9_.-]{1,40}$")


class PublishRequest(BaseModel):
    report: Path
    repo: str  # OWNER/NAME
    pr: int | None = None  # no pull request: the status only
    mode: CommentMode = DEFAULT_COMMENT_MODE
    sha: str | None = None  # the commit the status goes on; default the report's head
    bot_login: str = DEFAULT_BOT_LOGIN
    key: str = "default"  # one sticky comment and status per key (one per GPU or config in a matrix)
    status: bool = True
    run_url: str | None = None  # the workflow run that measured: linked from the comment
    artifact_id: int | None = None  # that run's artifact with the report, picture and traces
    api_url: str = DEFAULT_API_URL
    server_url: str | None = None


class PublishResult(BaseModel):
    verdict: str
    comment: CommentResult
    status_state: str | None = None
    login: str | None = None


def publish(
    request: PublishRequest, token: str, progress: Progress = lambda _: None, sleep: Sleep | None = None
) -> PublishResult:
    _check(request)
    links = run_links(request.run_url, request.artifact_id)
    report = read_report(request.report)
    head_sha = report.arm(report.head).sha
    if request.sha is not None and request.sha != head_sha:
        raise PublishError(
            f"{request.report} is for head {head_sha[:12]}, but this run is for {request.sha[:12]}: "
            "refusing to post a report for another commit"
        )
    report = job_links(report, request.repo, request.server_url or _server_url(request.api_url))
    body = render_comment(report, links)
    extra = {"sleep": sleep} if sleep is not None else {}
    with GitHub(token, request.api_url, progress=progress, **extra) as gh:
        comment = CommentResult(action="skipped")
        login = None
        if request.pr is not None and request.mode != "never":
            login = identity(gh, request.bot_login)
            comment = publish_comment(
                gh, request.repo, request.pr, body, verdict=report.verdict, head=head_sha, mode=request.mode,
                login=login, key=request.key, progress=progress,
            )
            where = f" {comment.url}" if comment.url else ""
            progress(f"comment on {request.repo}#{request.pr}: {comment.action}{where}")
        state = None
        if request.status:
            status = set_status(
                gh, request.repo, request.sha or head_sha, gate(report), headline(report),
                comment.url or request.run_url, request.key,
            )
            state = status.get("state")
            progress(f"commit status {status.get('context')} on {(request.sha or head_sha)[:12]}: {state}")
    return PublishResult(verdict=report.verdict, comment=comment, status_state=state, login=login)


def job_links(report: Report, repo: str | None, server_url: str | None) -> Report:
    """The report with links made from this job's own repository and server, never from what
    the report says: a report from a pull request's run is data. No valid repo: no links."""
    return report.model_copy(update={
        "github_repo": repo if is_repo_name(repo) else None,
        "server_url": server_url or "https://github.com",
    })


def _check(request: PublishRequest) -> None:
    if not is_repo_name(request.repo):
        raise PublishError(f"--repo {request.repo!r} is not OWNER/NAME")
    if request.artifact_id is not None and request.artifact_id < 1:
        raise PublishError(f"--artifact-id {request.artifact_id} is not an artifact's id")
    if request.pr is not None and request.pr < 1:
        raise PublishError(f"--pr {request.pr} is not a pull request number")
    if request.sha is not None and not is_commit_sha(request.sha):
        raise PublishError(f"--sha {request.sha!r} is not a commit's full sha (40 or 64 hex digits)")
    if not _KEY.match(request.key):
        raise PublishError(f"--key {request.key!r} must be 1-40 letters, digits, '.', '_' or '-'")
    if urlsplit(request.api_url).scheme not in ("http", "https"):
        raise PublishError(f"GITHUB_API_URL {request.api_url!r} is not an http(s) URL")


def _server_url(api_url: str) -> str:
    """https://api.github.com -> https://github.com; GitHub Enterprise Server's
    https://HOST/api/v3 -> https://HOST."""
    parts = urlsplit(api_url)
    if parts.netloc == "api.github.com":
        return "https://github.com"
    return f"{parts.scheme}://{parts.netloc}"
