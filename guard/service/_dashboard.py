"""The dashboard's routes, kept thin: the data from the data layer (guard.service._records),
shown for now as plain listings; the dashboard's pages, as pure functions of that data, take
their place here."""

from __future__ import annotations

import html

from sqlalchemy import func, select
from sqlalchemy.orm import sessionmaker
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse

from guard.service._records import history
from guard.service._tables import Run


def _repositories(sessions: sessionmaker) -> list[tuple[str, int]]:
    with sessions() as session:
        return list(session.execute(select(Run.repo, func.count(Run.id)).group_by(Run.repo).order_by(Run.repo)))


async def index(request: Request) -> HTMLResponse:
    repos = await run_in_threadpool(_repositories, request.app.state.guard.sessions)
    items = "".join(f'<li><a href="/repos/{html.escape(r)}">{html.escape(r)}</a> ({n} runs)</li>' for r, n in repos)
    return HTMLResponse(f"<!DOCTYPE html><title>regression-guard</title><h1>regression-guard</h1><ul>{items}</ul>")


async def repository(request: Request) -> HTMLResponse:
    repo = f"{request.path_params['owner']}/{request.path_params['name']}"
    data = await run_in_threadpool(history, request.app.state.guard.sessions, repo)
    rows = "".join(
        f"<tr><td>{html.escape(p['workload'])}</td><td>{p['batch_size']}</td><td>{html.escape(p['gpu_class'])}</td>"
        f"<td><code>{html.escape(p['sha'][:12])}</code></td><td>{p['gpu_ms_per_step']:.4f}</td></tr>"
        for p in data["points"]
    )
    return HTMLResponse(
        f"<!DOCTYPE html><title>{html.escape(repo)}</title><h1>{html.escape(repo)}</h1>"
        "<table><tr><th>workload</th><th>batch size</th><th>GPU class</th><th>commit</th><th>GPU ms per step</th>"
        f"</tr>{rows}</table>"
    )
