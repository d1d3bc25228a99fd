"""The ASGI app of `guard serve`: the webhook, the API and the dashboard's routes, with the
embedded workers started and stopped by its lifespan."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
from starlette.applications import Starlette
from starlette.routing import Route

from guard.service import _api, _dashboard
from guard.service._access import readers_only
from guard.service._github_app import GitHubApp
from guard.service._settings import ServiceSettings
from guard.service._state import ServiceState
from guard.service._store import concurrent_writers, migrate, open_engine, sessions
from guard.service._webhook import webhook
from guard.service._worker import Worker


def create_app(settings: ServiceSettings) -> Starlette:
    engine = open_engine(settings.db_url)
    queue = None
    if settings.queue == "procrastinate":
        from guard.service._procrastinate import JobQueue, prepare_database, queue_sessions

        prepare_database(engine, settings.db_url)
        queue = JobQueue(settings.db_url)
        db_sessions = queue_sessions(engine, settings.db_url)
    else:
        migrate(engine)
        db_sessions = sessions(engine)
    app_client = GitHubApp(settings.app, settings.api_url) if settings.app else None
    state = ServiceState(settings=settings, engine=engine, sessions=db_sessions, app=app_client,
                         writers=anyio.CapacityLimiter(concurrent_writers(engine)), queue=queue)

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        if queue is not None:
            await queue.open()
            await queue.sweep(state.sessions)
        for number in range(settings.workers):
            gpu = settings.gpus[number] if number < len(settings.gpus) else None
            worker = Worker(number, settings, state.sessions, app_client, state.stopping, gpu)
            worker.start()
            state.workers.append(worker)
        yield
        state.stopping.set()
        for worker in state.workers:
            worker.join(timeout=30)
        if queue is not None:
            await queue.close()
        engine.dispose()

    routes = [
        Route("/github/webhook", webhook, methods=["POST"]),
        Route("/healthz", _api.healthz),
        Route("/api/v1/runs", _api.ingest, methods=["POST"]),  # the repository's ingest token
        Route("/api/v1/records", _api.ingest_record, methods=["POST"]),  # the same token
        # what private repositories' runs say: for readers only (guard.service._access)
        Route("/api/v1/jobs", readers_only(_api.jobs)),
        Route("/api/v1/runs/{run_id:int}", readers_only(_api.run)),
        Route("/api/v1/bisects/{bisect_id:int}", readers_only(_api.bisect)),
        Route("/api/v1/history", readers_only(_api.history_of)),
        Route("/", readers_only(_dashboard.index)),
        Route("/repos/{owner}/{name}", readers_only(_dashboard.repository)),
        Route("/repos/{owner}/{name}/pulls/{pr:int}", readers_only(_dashboard.pull)),
    ]
    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.guard = state
    return app
