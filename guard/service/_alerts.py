"""The alerts of confirmed slowdowns, posted as the App: per culprit commit (guard.history's
plan) one issue and one comment on the pull request the commit came from, each listing every
confirmed slowdown of that commit.

Never twice: an alert's row is claimed before anything is posted (by one worker, while its
job runs for it, embedded or through procrastinate), and each post is recorded as soon as
GitHub has answered it. A retried job finds what its last try recorded; a post that may have
landed unrecorded is looked for on GitHub by its marker before it is made again. A series that
confirms the same commit later updates both texts and posts nothing new.

A slowdown over several commits waits for its bisect (guard.service._bisect): its alert names
the commit the bisect found, and the issue lists the bisect's measurements."""

from __future__ import annotations

import logging
import time
from typing import Any

from sqlalchemy import or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import sessionmaker

from guard._errors import GuardError
from guard._marker import Marker
from guard.bisect import BisectResult
from guard.history import AlertPlan, PullComment, plan_alerts
from guard.publish import (
    GitHub, MaybeApplied, PublishError, alert_comment_body, alert_issue_body, alert_issue_title, publish_comment,
)
from guard.service._bisect import alert_bisects
from guard.service._log import event
from guard.service._queue import live_owners
from guard.service._series import change_points
from guard.service._tables import Alert

logger = logging.getLogger("guard.service")

_WRITE_TRIES = 3
MAX_ISSUE_PAGES = 5  # the newest issues with the alert's label: where one posted unrecorded would be


class LostClaim(GuardError):
    """The alert was taken over by another worker (this one's job lost its lease): stop posting."""


def raise_alerts(sessions: sessionmaker, rest: GitHub, repo: str, *, owner: str, login: str,
                 server_url: str) -> list[str]:
    """Posts, or brings up to date, the alert of each culprit whose confirmed slowdowns are not
    all listed yet; returns their dedupe keys. A failure is recorded on the alert's row, and the
    next push or confirmation of the repository tries again; it is not raised."""
    with sessions() as session:
        points = [c for series in change_points(session, repo).values() for c in series]
        rows = {a.dedupe_key: a for a in session.scalars(select(Alert).where(Alert.repo == repo))}
        bisects = alert_bisects(session, repo, points)
    done = []
    for plan in plan_alerts([p for p in points if p.id not in bisects.held], {}, set(), bisects.culprits):
        row = rows.get(plan.dedupe_key)
        if row is not None and row.state == "posted" and row.listed == _listed(plan):
            continue
        claimed = _claim(sessions, plan, owner)
        if claimed is None:
            continue  # another worker is posting it now
        chains = list({r.good_sha + r.bad_sha: r for c in plan.change_points
                       if (r := bisects.results.get(c.id)) is not None}.values())
        try:
            _post(sessions, rest, plan, chains, claimed, owner, login, server_url)
        except GuardError as exc:
            logger.warning("alert %s: %s", plan.dedupe_key, exc.message)
            _record(sessions, claimed.id, owner, error=exc.message[:2000], owner=None, strict=False)
            continue
        done.append(plan.dedupe_key)
    return done


def _listed(plan: AlertPlan) -> list[str]:
    return [c.id for c in plan.change_points]


def marker_key(culprit_sha: str) -> str:
    """The hidden marker's key of the comment and the issue: how they are found again."""
    return f"change-point-{culprit_sha}"


def _post(sessions: sessionmaker, rest: GitHub, plan: AlertPlan, chains: list[BisectResult], row: Alert,
          owner: str, login: str, server_url: str) -> None:
    pr = row.pr
    if not row.pr_checked:
        pr = pull_of_commit(rest, plan.repo, plan.culprit_sha)
        _record(sessions, row.id, owner, pr=pr, pr_checked=True)
    if pr is not None:
        plan = plan.model_copy(update={"comment": PullComment(repo=plan.repo, pr=pr, sha=plan.culprit_sha)})
    number, url = _issue(rest, plan, chains, row, login, server_url, pr)
    _record(sessions, row.id, owner, issue_number=number, issue_url=url)
    if plan.comment is not None:
        body = alert_comment_body(plan, server_url, number, chains)
        comment = publish_comment(rest, plan.repo, plan.comment.pr, body,
                                  verdict="regression", head=plan.culprit_sha, mode="always", login=login,
                                  key=marker_key(plan.culprit_sha))
        _record(sessions, row.id, owner, comment_id=comment.id, comment_url=comment.url)
    _record(sessions, row.id, owner, listed=_listed(plan), state="posted", posted_s=time.time(), error=None,
            owner=None)
    event("post", alert=row.id, repo=plan.repo, pr=pr, issue=number,
          comment_id=None if plan.comment is None else comment.id)


def _issue(rest: GitHub, plan: AlertPlan, chains: list[BisectResult], row: Alert, login: str, server_url: str,
           pr: int | None) -> tuple[int, str | None]:
    """The alert's issue: the one recorded (updated when it lists fewer slowdowns), else the one
    found by its marker (posted by a try that stopped before recording it), else a new one."""
    key = marker_key(plan.culprit_sha)
    title = alert_issue_title(plan)
    body = f"{Marker(key=key, verdict='regression', head=plan.culprit_sha).render()}\n" \
           f"{alert_issue_body(plan, server_url, pr, chains)}"
    path = f"/repos/{plan.repo}/issues"
    if row.issue_number is not None:
        if row.listed != _listed(plan):
            rest.request("PATCH", f"{path}/{row.issue_number}", json={"title": title, "body": body})
        return row.issue_number, row.issue_url
    for _ in range(_WRITE_TRIES):
        found = _find_issue(rest, plan, login, key)
        if found is not None:
            if found.get("body") != body or found.get("title") != title:
                rest.request("PATCH", f"{path}/{found['number']}", json={"title": title, "body": body})
            return found["number"], _text(found.get("html_url"))
        try:
            created = rest.request("POST", path, json={"title": title, "body": body, "labels": plan.issue.labels})
        except MaybeApplied:
            continue  # it may exist now: look again before creating again
        issue = created.json()
        if isinstance(issue, dict) and type(issue.get("number")) is int:
            return issue["number"], _text(issue.get("html_url"))
        raise PublishError(f"POST {path} answered without the issue's number")
    raise PublishError(f"could not create the alert's issue on {plan.repo} without a clear answer from GitHub")


def _find_issue(rest: GitHub, plan: AlertPlan, login: str, key: str) -> dict[str, Any] | None:
    for page in range(1, MAX_ISSUE_PAGES + 1):
        issues = rest.get(f"/repos/{plan.repo}/issues", state="all", labels=",".join(plan.issue.labels),
                          sort="created", direction="desc", per_page=100, page=page)
        if not isinstance(issues, list):
            raise PublishError(f"GET /repos/{plan.repo}/issues answered with {type(issues).__name__}, not a list")
        for issue in issues:
            if not isinstance(issue, dict) or type(issue.get("number")) is not int:
                continue
            user, body = issue.get("user"), issue.get("body")
            marker = Marker.parse(body) if isinstance(body, str) else None
            if isinstance(user, dict) and user.get("login") == login and marker is not None and marker.key == key:
                return issue
        if len(issues) < 100:
            return None
    return None


def pull_of_commit(rest: GitHub, repo: str, sha: str) -> int | None:
    """The pull request a commit of the default branch came from: the one merged as it, else
    one merged with it; None for a commit pushed directly (or one GitHub does not know)."""
    answer = rest.request("GET", f"/repos/{repo}/commits/{sha}/pulls", params={"per_page": 100}, ok=(404, 422))
    pulls = answer.json() if answer.status_code == 200 else []
    pulls = [p for p in pulls if isinstance(p, dict) and type(p.get("number")) is int] if isinstance(pulls, list) \
        else []
    merged = [p for p in pulls if p.get("merge_commit_sha") == sha] or [p for p in pulls if p.get("merged_at")]
    return merged[0]["number"] if merged else None


def _claim(sessions: sessionmaker, plan: AlertPlan, owner: str) -> Alert | None:
    """The alert's row, made or taken for `owner`; None while another worker holds it (its
    claim lasts as long as its job runs for it: guard.service._queue.live_owners)."""
    now = time.time()
    with sessions() as session:
        session.add(Alert(dedupe_key=plan.dedupe_key, repo=plan.repo, culprit_sha=plan.culprit_sha, owner=owner,
                          state="posting", listed=[], pr_checked=False, created_s=now))
        try:
            session.commit()
        except IntegrityError:
            session.rollback()
        else:
            return session.scalars(select(Alert).where(Alert.dedupe_key == plan.dedupe_key)).one()
        holders = live_owners(now)
        taken = session.execute(
            update(Alert).where(Alert.dedupe_key == plan.dedupe_key,
                                or_(Alert.owner.is_(None), Alert.owner == owner, Alert.owner.not_in(holders)))
            .values(owner=owner))
        session.commit()
        if taken.rowcount != 1:
            return None
        return session.scalars(select(Alert).where(Alert.dedupe_key == plan.dedupe_key)
                               .execution_options(populate_existing=True)).one()


def _record(sessions: sessionmaker, alert_id: int, claimant: str, *, strict: bool = True, **fields: Any) -> None:
    """What was posted, written at once, while the claim is `claimant`'s."""
    with sessions() as session:
        kept = session.execute(update(Alert).where(Alert.id == alert_id, Alert.owner == claimant).values(**fields))
        session.commit()
    if strict and kept.rowcount != 1:
        raise LostClaim(f"alert {alert_id} was taken over by another worker; it posts the rest")


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None
