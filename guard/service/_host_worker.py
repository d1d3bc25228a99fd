"""A GPU host's procrastinate worker (`guard worker`). With nothing to measure it takes the next
job from the pool and defers its measurement to its own queue, under its own lock; it measures
with the embedded workers' job (guard.service._job.run_job), so a retry finds the sticky comment
and the Check Run again rather than posting twice. procrastinate's retry strategy retries a job
that raised; jobs of a worker that stopped (kill -9 too: its heartbeat stops) are found by
procrastinate's stalled-job query, at start and every minute, and retried here; a worker shut
down mid-job hands its job back to the pool for any host. A job failed for good (its command
failed, its retries spent, its workers stopped three times, an operator's abort) is concluded
as the embedded workers conclude one (guard.service._failed), by the one call that failed it."""

from __future__ import annotations

import asyncio
import logging
import threading
from dataclasses import dataclass
from typing import Any

import procrastinate
from procrastinate.exceptions import AlreadyEnqueued, ConnectorException, JobAborted
from procrastinate.job_context import AbortReason
from procrastinate.jobs import Job as QueueJob
from procrastinate.jobs import Status
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import sessionmaker

from guard._types import FailureKind
from guard.service._failed import conclude_failed
from guard.service._github_app import GitHubApp
from guard.service._job import JobContext, run_job
from guard.service._procrastinate import (
    MEASURE_TASK, POOL_QUEUE, STALLED_TASK, TAKE_TASK, host_queue, measure_lock, queue_app,
)
from guard.service._queue import abandon, finish, holds, job_state, requeue, take_over
from guard.service._settings import ServiceSettings
from guard.service._tables import Job

logger = logging.getLogger("guard.worker")

WATCH_S = 1.0  # how soon a measurement stops once the worker shuts down or another attempt took the job
FETCH_POLL_S = 2.0  # a lock's release wakes no worker: a host waiting on its own lock looks again this often
GRACEFUL_S = 10.0  # on SIGTERM, how long a running job may go on before it is stopped and handed back
MEASURE_PRIORITY = 10  # a host that took a job measures it before it takes another
STALLED_CRON = "* * * * *"
ABORTED = "aborted through procrastinate"  # the error of a job an operator cancelled with abort


@dataclass
class Host:
    name: str
    gpus: list[str]  # what the job sees as CUDA_VISIBLE_DEVICES; empty: all of them, or a CPU host
    settings: ServiceSettings
    sessions: sessionmaker
    app: GitHubApp | None
    stalled_s: float  # a worker this long without a heartbeat has stopped: its jobs are retried
    retry_wait_s: float

    @property
    def retries(self) -> int:
        return self.settings.max_attempts - 1


class Retry(procrastinate.RetryStrategy):
    """procrastinate's strategy, but for a measurement aborted by its worker's shutdown: that one
    was handed back to the pool, for any host, rather than retried on this one."""

    def get_retry_decision(self, *, exception: BaseException, job: QueueJob) -> procrastinate.RetryDecision | None:
        if isinstance(exception, JobAborted):
            return None
        return super().get_retry_decision(exception=exception, job=job)


def worker_app(host: Host) -> procrastinate.App:
    app = queue_app(host.settings.db_url)
    retry = Retry(max_attempts=host.retries, wait=int(host.retry_wait_s))

    @app.task(name=TAKE_TASK, retry=retry)
    async def take(job_id: int) -> None:
        if await asyncio.to_thread(job_state, host.sessions, job_id) != "queued":
            return  # a stale copy: the job is measured, or being measured
        deferrer = app.configure_task(MEASURE_TASK, queue=host_queue(host.name), lock=host_queue(host.name),
                                      queueing_lock=measure_lock(job_id), priority=MEASURE_PRIORITY)
        try:
            await deferrer.defer_async(job_id=job_id)
        except AlreadyEnqueued:
            pass  # a copy of this take queued its measurement already
        logger.info("host %s took job %d", host.name, job_id)

    @app.task(name=MEASURE_TASK, pass_context=True, retry=retry)
    def measure(context: procrastinate.JobContext, job_id: int) -> None:
        _measure(host, context, job_id)

    @app.periodic(cron=STALLED_CRON, periodic_id="stalled")
    @app.task(name=STALLED_TASK, queue=POOL_QUEUE, queueing_lock=STALLED_TASK)
    async def retrieve(timestamp: int) -> None:
        await retrieve_stalled(app, host)

    return app


def _measure(host: Host, context: procrastinate.JobContext, job_id: int) -> None:
    queue_job = context.job
    attempt_of = f"procrastinate-{queue_job.id}:"  # every attempt of this queue job, on any host
    owner = f"{attempt_of}{host.name}:worker-{queue_job.worker_id}"
    job = take_over(host.sessions, job_id, owner, attempt_of)
    if job is None:
        logger.info("job %d is done, failed or run by another queue job: nothing to do", job_id)
        return
    ctx = JobContext(settings=host.settings, sessions=host.sessions, app=host.app, owner=owner,
                     gpu=",".join(host.gpus) or None, lost=threading.Event(), stopping=threading.Event())
    ended = threading.Event()
    watcher = threading.Thread(target=_watch, args=(host, context, job_id, owner, ctx, ended), daemon=True)
    watcher.start()
    try:
        outcome = run_job(job, ctx)
    except Exception as exc:
        _unfinished(host, context, job, owner, exc, f"internal error: {type(exc).__name__}: {exc}")
        raise
    finally:
        ended.set()
        watcher.join()
    if ctx.lost.is_set():
        logger.warning("job %d was taken over by another attempt; left to it", job_id)
        return
    if outcome.lost:  # the worker is shutting down, or an operator aborted the job through procrastinate
        if context.abort_reason() == AbortReason.SHUTDOWN:
            # queued again, its take back in the pool: the first free host measures it, not only this one
            requeue(host.sessions, job_id, owner, f"host {host.name}'s worker stopped during the job; queued for "
                    "any host", resubmit=True)
            raise JobAborted(f"host {host.name}'s worker stopped: the job went back to the pool")
        _fail(host, job, owner, ABORTED, "cancelled")
        raise JobAborted(ABORTED)
    if not finish(host.sessions, job_id, owner, error=outcome.error, run_id=outcome.run_id):
        logger.warning("job %d was taken over by another attempt before it finished here", job_id)
    elif outcome.error is not None:  # failed for good now: its Check Run says so
        conclude_failed(host.sessions, host.app, job, outcome.failure, outcome.error)


def _fail(host: Host, job: Job, owner: str, error: str, failure: FailureKind) -> None:
    """Failed for good by this attempt, and concluded, unless another attempt has the job now."""
    if finish(host.sessions, job.id, owner, error=error):
        conclude_failed(host.sessions, host.app, job, failure, error)


def _unfinished(host: Host, context: procrastinate.JobContext, job: Job, owner: str, exc: BaseException,
                error: str) -> None:
    """The jobs table says what procrastinate's retry strategy will do: queued again, or failed."""
    strategy = context.task.retry_strategy
    if strategy is not None and strategy.get_retry_decision(exception=exc, job=context.job) is not None:
        requeue(host.sessions, job.id, owner, f"{error} (attempt {context.job.attempts + 1}, retried)")
    else:
        _fail(host, job, owner, error, "internal")


def _watch(host: Host, context: procrastinate.JobContext, job_id: int, owner: str, ctx: JobContext,
           ended: threading.Event) -> None:
    while not ended.wait(WATCH_S):
        if context.should_abort():
            ctx.stopping.set()
            return
        try:
            if not holds(host.sessions, job_id, owner):
                ctx.lost.set()
                return
        except SQLAlchemyError as exc:  # the database away a moment: the job goes on, finishing checks again
            logger.warning("job %d: cannot check who runs it: %s", job_id, exc)


async def retrieve_stalled(app: procrastinate.App, host: Host) -> None:
    """Jobs whose worker stopped, retried: a measurement on this host (free, as it runs this
    between jobs), so that a host gone for good leaves no job waiting for it; a measurement
    whose workers stopped `max_attempts` times is failed rather than tried for ever."""
    for queue_job in await app.job_manager.get_stalled_jobs(seconds_since_heartbeat=host.stalled_s):
        try:
            if queue_job.task_name != MEASURE_TASK:
                await app.job_manager.retry_job(queue_job)
                continue
            job_id = int(queue_job.task_kwargs["job_id"])
            if queue_job.attempts >= host.retries:
                await app.job_manager.finish_job(queue_job, status=Status.FAILED, delete_job=False)
                error = (f"its worker stopped {queue_job.attempts + 1} times while running it (no heartbeat for "
                         f"{host.stalled_s:g} s)")
                failed = await asyncio.to_thread(abandon, host.sessions, job_id, f"procrastinate-{queue_job.id}:",
                                                 error)
                logger.warning("job %d failed: its worker stopped %d times", job_id, queue_job.attempts + 1)
                if failed is not None:
                    await asyncio.to_thread(conclude_failed, host.sessions, host.app, failed, "worker-lost", error)
                continue
            await app.job_manager.retry_job(queue_job, queue=host_queue(host.name), lock=host_queue(host.name))
            logger.info("job %d: its worker stopped; retried on host %s", job_id, host.name)
        except ConnectorException as exc:  # another worker retried it first
            logger.info("stalled queue job %s left: %s", queue_job.id, exc)


async def serve_host(host: Host) -> None:
    app = worker_app(host)
    async with app.open_async():
        await retrieve_stalled(app, host)  # this host's own run that was killed, among others
        options: dict[str, Any] = dict(
            queues=[host_queue(host.name), POOL_QUEUE], name=f"guard-worker-{host.name}", concurrency=1,
            fetch_job_polling_interval=FETCH_POLL_S, shutdown_graceful_timeout=GRACEFUL_S,
            update_heartbeat_interval=host.stalled_s / 4, stalled_worker_timeout=host.stalled_s,
        )
        await app.run_worker_async(**options)
