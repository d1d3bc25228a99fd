"""The queue of a fleet of GPU hosts, procrastinate on PostgreSQL (`guard serve --queue
procrastinate`, `guard worker`): its names, its schema applied by procrastinate itself at start,
the deferral of every new job in the transaction that makes it (whichever process makes it: the
service for a delivery, a worker for a confirmation), and the service's half, which defers each
job under a queueing lock of its own so that a replayed delivery, or a restarted service
deferring what is still queued, never queues it twice.

A job is two procrastinate jobs. `guard.take` waits in the pool queue for the first host with
nothing to measure; that host defers `guard.measure` to its own queue, under its own lock.
procrastinate fixes a job's lock when the job is deferred, and which host is free is known only
when one takes the job: the host's lock then holds however many workers run as that host."""

from __future__ import annotations

from typing import Any

import anyio
import procrastinate
from procrastinate.exceptions import AlreadyEnqueued
from procrastinate.jobs import JobDeferrer
from sqlalchemy import Engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, OperationalError
from sqlalchemy.orm import Session, sessionmaker

from guard.service._queue import SUBMIT, Recorded, job_state, queued_ids
from guard.service._store import StoreError, migrate
from guard.service._store import sessions as plain_sessions

POOL_QUEUE = "guard"  # where a job waits for a free host
TAKE_TASK = "guard.take"
MEASURE_TASK = "guard.measure"
STALLED_TASK = "guard.retrieve-stalled"
_PREPARE_LOCK = 0x67756172645F7071  # PostgreSQL advisory lock key: one process prepares a new database


def host_queue(host: str) -> str:
    """A host's own queue, and the lock of its measurements: one at a time there."""
    return f"guard-host-{host}"


def take_lock(job_id: int) -> str:
    return f"guard-job-{job_id}"


def measure_lock(job_id: int) -> str:
    return f"guard-measure-{job_id}"


def pool_take(app: procrastinate.App, job_id: int, connection: Any = None) -> JobDeferrer:
    """A job's take, deferred to the pool (on `connection`, in its transaction, where given); its
    queueing lock keeps one waiting at a time."""
    return app.configure_task(TAKE_TASK, queue=POOL_QUEUE, queueing_lock=take_lock(job_id), connection=connection)


class DeferTake:
    """guard.service._queue's Submit for procrastinate: the job's take deferred on the connection
    of the transaction that queues the job, so the job and its take are committed together, or
    neither. A take of the job that waits in the pool already (a replay's, a restart's) is enough."""

    def __init__(self, url: str) -> None:
        # never opened: each take is written on the caller's connection, not on a pool of its own
        self.app = procrastinate.App(connector=procrastinate.SyncPsycopgConnector(conninfo=conninfo(url)))

    def __call__(self, session: Session, job_id: int) -> None:
        try:
            with session.begin_nested():  # a savepoint: a refused take fails alone, not the job's transaction
                connection = session.connection().connection.driver_connection  # psycopg's, in the transaction
                pool_take(self.app, job_id, connection).defer(job_id=job_id)
        except AlreadyEnqueued:
            pass


def queue_sessions(engine: Engine, url: str) -> sessionmaker:
    """Sessions whose new jobs are deferred to procrastinate's pool as they are queued."""
    return plain_sessions(engine, {SUBMIT: DeferTake(url)})


def is_postgresql(url: str) -> bool:
    try:
        return make_url(url).get_backend_name() in ("postgresql", "postgres")
    except ArgumentError:  # not a URL at all
        return False


def conninfo(url: str) -> str:
    """The libpq URL psycopg takes, from --db (SQLAlchemy's postgresql+psycopg:// too)."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def queue_app(url: str) -> procrastinate.App:
    return procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=conninfo(url)))


def prepare_database(engine: Engine, url: str) -> None:
    """The service's migrations, then procrastinate's schema where the database has none,
    applied by procrastinate's schema manager; under an advisory lock, so that the service and
    hosts starting together on a new database prepare it once."""
    try:
        held = engine.connect()
    except OperationalError as exc:
        shown = engine.url.set(drivername="postgresql").render_as_string()  # its password hidden
        reason = str(exc.orig).strip().splitlines()[0]
        raise StoreError(f"cannot reach --db {shown}: {reason}; check that PostgreSQL runs there and takes "
                         "this user") from exc
    with held:
        held.execute(text("SELECT pg_advisory_lock(:key)"), {"key": _PREPARE_LOCK})
        try:
            migrate(engine)
            app = procrastinate.App(connector=procrastinate.SyncPsycopgConnector(conninfo=conninfo(url)))
            with app.open():
                if not app.check_connection():  # procrastinate_jobs is not there yet
                    app.schema_manager.apply_schema()
        finally:
            held.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": _PREPARE_LOCK})
            held.commit()


class JobQueue:
    """The service's handle on the queue: defers jobs to the pool, counts them for /healthz."""

    def __init__(self, url: str) -> None:
        self.app = queue_app(url)

    async def open(self) -> None:
        await self.app.open_async()

    async def close(self) -> None:
        await self.app.close_async()

    async def defer(self, job_id: int) -> bool:
        """False when its take already waits in the pool (its queueing lock)."""
        try:
            await pool_take(self.app, job_id).defer_async(job_id=job_id)
        except AlreadyEnqueued:
            return False
        return True

    async def enqueue_again(self, sessions: sessionmaker, recorded: Recorded) -> None:
        """A replay's job deferred again while it is still queued (a new one's take was deferred
        with it): a take that procrastinate failed for good (the database away on each of its
        tries) leaves the job to a replay, as to a restart."""
        if recorded.job is None or not recorded.duplicate:
            return
        if await anyio.to_thread.run_sync(job_state, sessions, recorded.job) != "queued":
            return
        await self.defer(recorded.job)

    async def sweep(self, sessions: sessionmaker) -> int:
        """Every queued job deferred again (a queued take holds it already): none waits for ever
        on a take that procrastinate failed for good. How many were deferred."""
        deferred = 0
        for job_id in await anyio.to_thread.run_sync(queued_ids, sessions):
            deferred += await self.defer(job_id)
        return deferred

    async def counts(self) -> list[dict[str, Any]]:
        """Per queue (the pool, and each host that took a job), its jobs per status."""
        return list(await self.app.job_manager.list_queues_async())
