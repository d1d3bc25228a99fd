"""The dashboard's routes, kept thin: the stored runs, points and change points handed to
guard.dashboard's pages (pure functions of that data) as its models."""

from __future__ import annotations

import html
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import sessionmaker
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse

from guard._types import is_repo_name
from guard.bisect import BisectStep
from guard.dashboard import (
    ChangeBisect, PullRun, PullRuns, PullSummary, RepoHistory, SeriesHistory, pull_page, repo_page,
)
from guard.history import group_series
from guard.report import Report
from guard.service._bisect import bisects_by_pair
from guard.service._post import server_url
from guard.service._series import change_points, main_points
from guard.service._tables import Run


def _repositories(sessions: sessionmaker) -> list[tuple[str, int]]:
    with sessions() as session:
        return list(session.execute(select(Run.repo, func.count(Run.id)).group_by(Run.repo).order_by(Run.repo)))


async def index(request: Request) -> HTMLResponse:
    repos = await run_in_threadpool(_repositories, request.app.state.guard.sessions)
    items = "".join(f'<li><a href="/repos/{html.escape(r)}">{html.escape(r)}</a> ({n} runs)</li>' for r, n in repos)
    return HTMLResponse(f"<!DOCTYPE html><title>regression-guard</title><h1>regression-guard</h1><ul>{items}</ul>")


def repo_history(sessions: sessionmaker, repo: str, server_url: str) -> RepoHistory:
    with sessions() as session:
        points = main_points(session, repo)
        changes = change_points(session, repo)
        bisects = {pair: ChangeBisect(before_sha=b.before_sha, after_sha=b.after_sha, state=b.state,
                                      first_bad_sha=b.first_bad_sha,
                                      steps=[BisectStep.model_validate(s) for s in b.steps],
                                      url=f"/api/v1/bisects/{b.id}")
                   for pair, b in bisects_by_pair(session, repo).items()}
        pulls: dict[int, list[Run]] = {}
        for run in session.scalars(select(Run).where(Run.repo == repo, Run.pr.is_not(None)).order_by(Run.id.desc())):
            pulls.setdefault(run.pr, []).append(run)
    series = [SeriesHistory(series=key, points=found, change_points=changes.get(key, []),
                            bisects=[bisects[pair] for pair in dict.fromkeys(
                                (c.before_sha, c.after_sha) for c in changes.get(key, [])) if pair in bisects])
              for key, found in sorted(group_series(points).items(), key=lambda item: item[0].id)]
    summaries = [PullSummary(pr=pr, head_sha=runs[0].head_sha, verdict=runs[0].verdict, runs=len(runs),
                             url=f"/repos/{repo}/pulls/{pr}") for pr, runs in sorted(pulls.items(), reverse=True)]
    return RepoHistory(repo=repo, series=series, pulls=summaries, server_url=server_url)


def pull_runs(sessions: sessionmaker, repo: str, pr: int, server_url: str) -> PullRuns:
    with sessions() as session:
        runs = list(session.scalars(select(Run).where(Run.repo == repo, Run.pr == pr).order_by(Run.id.desc())))
    return PullRuns(repo=repo, pr=pr, server_url=server_url, repo_url=f"/repos/{repo}", runs=[
        PullRun(run_id=str(run.id), report=Report.model_validate_json(run.report_json),
                report_url=f"/api/v1/runs/{run.id}") for run in runs])


async def repository(request: Request) -> HTMLResponse:
    state = request.app.state.guard
    repo = _repo(request)
    if repo is None:
        return HTMLResponse("<!DOCTYPE html><title>not found</title>no such repository", status_code=404)
    history = await run_in_threadpool(repo_history, state.sessions, repo, _server_url(state))
    return HTMLResponse(repo_page(history, regressions_only=request.query_params.get("regressions") == "1"))


async def pull(request: Request) -> HTMLResponse:
    state = request.app.state.guard
    repo = _repo(request)
    if repo is None:
        return HTMLResponse("<!DOCTYPE html><title>not found</title>no such repository", status_code=404)
    runs = await run_in_threadpool(pull_runs, state.sessions, repo, request.path_params["pr"], _server_url(state))
    return HTMLResponse(pull_page(runs, regressions_only=request.query_params.get("regressions") == "1"))


def _server_url(state: Any) -> str:
    return server_url(state.settings.api_url)


def _repo(request: Request) -> str | None:
    repo = f"{request.path_params['owner']}/{request.path_params['name']}"
    return repo if is_repo_name(repo) else None
