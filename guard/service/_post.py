"""What a job leaves on GitHub, as the App: the sticky comment (guard.publish's, found again
by its marker, so a retried job updates the one comment and never adds a second) and a Check
Run, the merge gate, found again by its external id before one is created; for a job that
failed, that Check Run concluded `failure` with what failed and what to do.

An undecided verdict (at_threshold, inconclusive) concludes `action_required`, or `failure`
where the settings say so (`undecided_conclusion`), never `neutral`: GitHub's branch
protection takes a neutral required check as passing. GitHub's REST docs ask that an
`action_required` check give its details on the site of `details_url` (an http(s) URL); every
Check Run here links the comment, else the pull request, else the commit."""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel
from sqlalchemy import select
from sqlalchemy.orm import sessionmaker

from guard.publish import (
    CommentMode, GitHub, JobFailure, MaybeApplied, PublishError, failed_check_output, headline, job_links,
    publish_comment,
)
from guard.report import Gate, Report, gate, render_comment
from guard.service._log import event
from guard.service._queue import external_id
from guard.service._settings import DEFAULT_UNDECIDED_CONCLUSION, UndecidedConclusion
from guard.service._tables import PostedComment

CHECK_NAME = "regression-guard"
MAX_SUMMARY_CHARS = 65_535  # GitHub's limit on a check run's output summary
# the Check Run's conclusion per gate; an undecided one's is the setting's (undecided_conclusion)
_CONCLUSION: dict[Gate, str] = {"success": "success", "failure": "failure", "error": "failure"}


def conclusion(gated: Gate, undecided: UndecidedConclusion) -> str:
    """The Check Run's conclusion for a report's gate: never neutral."""
    return undecided if gated == "undecided" else _CONCLUSION[gated]


class Posted(BaseModel):
    comment_action: str
    comment_url: str | None = None
    comment_id: int | None = None
    check_run_id: int | None = None


def post(rest: GitHub, report: Report, *, repo: str, pr: int | None, job_id: int, login: str,
         mode: CommentMode, server_url: str, undecided: UndecidedConclusion = DEFAULT_UNDECIDED_CONCLUSION,
         progress: Any = lambda _: None) -> Posted:
    head = report.arm(report.head).sha
    report = job_links(report, repo, server_url)
    body = render_comment(report)
    comment_action, url, comment_id = "skipped", None, None
    if pr is not None:
        result = publish_comment(rest, repo, pr, body, verdict=report.verdict, head=head, mode=mode, login=login,
                                 progress=progress)
        comment_action, url, comment_id = result.action, result.url, result.id
    check = put_check_run(rest, repo, head, job_id, {
        "conclusion": conclusion(gate(report), undecided), "details_url": details_url(server_url, repo, pr, head, url),
        "output": {"title": headline(report)[:255], "summary": body[:MAX_SUMMARY_CHARS]},
    })
    return Posted(comment_action=comment_action, comment_url=url, comment_id=comment_id, check_run_id=check)


def details_url(server_url: str, repo: str, pr: int | None, head: str, comment_url: str | None) -> str:
    """Where the check's Details link goes: the comment, which says what to do; else the pull
    request, or the commit. Always an http(s) URL, as GitHub asks of one."""
    if comment_url and comment_url.startswith(("https://", "http://")):
        return comment_url
    return f"{server_url.rstrip('/')}/{repo}/" + (f"pull/{pr}" if pr is not None else f"commit/{head}")


def post_failed_check(rest: GitHub, repo: str, head: str, failure: JobFailure) -> int:
    """The job's Check Run, concluded `failure`: a red gate that says what failed, not a missing one."""
    output = failed_check_output(failure)
    return put_check_run(rest, repo, head, failure.job_id, {
        "conclusion": "failure", "output": {"title": output.title, "summary": output.summary[:MAX_SUMMARY_CHARS]},
    })


def put_check_run(rest: GitHub, repo: str, head: str, job_id: int, result: dict[str, Any]) -> int:
    """The job's one Check Run, completed with `result` (conclusion and output): updated where
    it exists (found by its external id), else created."""
    payload = {"name": CHECK_NAME, "head_sha": head, "external_id": external_id(job_id), "status": "completed",
               **result}
    for _ in range(3):
        existing = _find_check(rest, repo, head, job_id)
        if existing is not None:
            path = f"/repos/{repo}/check-runs/{existing}"
            rest.request("PATCH", path, json=payload)
            return existing
        try:
            created = rest.request("POST", f"/repos/{repo}/check-runs", json=payload).json()
        except MaybeApplied:
            continue  # it may exist now: look again before creating again
        if isinstance(created, dict) and type(created.get("id")) is int:
            return created["id"]
        raise PublishError(f"POST /repos/{repo}/check-runs answered without the check run's id")
    raise PublishError(f"could not create the check run on {repo}@{head[:12]} without a clear answer from GitHub")


def _find_check(rest: GitHub, repo: str, head: str, job_id: int) -> int | None:
    listed = rest.get(f"/repos/{repo}/commits/{head}/check-runs", check_name=CHECK_NAME, per_page=100)
    runs = listed.get("check_runs") if isinstance(listed, dict) else None
    for run in runs if isinstance(runs, list) else []:
        if isinstance(run, dict) and run.get("external_id") == external_id(job_id) and type(run.get("id")) is int:
            return run["id"]
    return None


def remember(sessions: sessionmaker, job_id: int, repo: str, pr: int | None, posted: Posted) -> None:
    """The job's post, once: a retry that posts again updates the same row."""
    with sessions() as session:
        row = session.scalar(select(PostedComment).where(PostedComment.job_id == job_id))
        if row is None:
            row = PostedComment(job_id=job_id, repo=repo, pr=pr, created_s=time.time())
            session.add(row)
        row.comment_id, row.url, row.check_run_id = posted.comment_id, posted.comment_url, posted.check_run_id
        session.commit()
    event("post", job=job_id, repo=repo, pr=pr, comment=posted.comment_action, comment_id=posted.comment_id,
          check_run=posted.check_run_id)


def server_url(api_url: str) -> str:
    """https://api.github.com -> https://github.com; https://HOST/api/v3 -> https://HOST."""
    parts = urlsplit(api_url)
    if parts.netloc == "api.github.com":
        return "https://github.com"
    return f"{parts.scheme}://{parts.netloc}"
