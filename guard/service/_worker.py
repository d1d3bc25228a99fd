"""The embedded workers: one thread per GPU of this host (one on a CPU host), each leasing
one job at a time from the database and keeping its lease alive while the job runs. A worker
that dies (the service killed) simply stops renewing: its job is taken again after the lease."""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import sessionmaker

from guard.service._failed import conclude_failed
from guard.service._github_app import GitHubApp
from guard.service._job import JobContext, run_job
from guard.service._queue import fail_exhausted, finish, heartbeat, lease, release
from guard.service._settings import ServiceSettings
from guard.service._tables import Job

logger = logging.getLogger("guard.service")

IDLE_POLL_S = 0.5


class Worker(threading.Thread):
    def __init__(self, number: int, settings: ServiceSettings, sessions: sessionmaker, app: GitHubApp | None,
                 stopping: threading.Event, gpu: str | None) -> None:
        super().__init__(name=f"guard-worker-{number}", daemon=True)
        # unique per process start: a restarted service never mistakes an old lease for its own
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{number}:{uuid.uuid4().hex[:8]}"
        self.settings, self.sessions, self.app, self.stopping, self.gpu = settings, sessions, app, stopping, gpu
        self.current: int | None = None

    def run(self) -> None:
        while not self.stopping.is_set():
            try:
                for failed in fail_exhausted(self.sessions, self.settings.max_attempts):
                    conclude_failed(self.sessions, self.app, failed, "worker-lost", failed.error or "")
                job = lease(self.sessions, self.owner, self.settings.lease_s, self.settings.max_attempts)
            except SQLAlchemyError as exc:  # the database away for a moment: try again, say why
                logger.warning("worker %s: cannot lease: %s", self.name, exc)
                self.stopping.wait(IDLE_POLL_S * 4)
                continue
            if job is None:
                self.stopping.wait(IDLE_POLL_S)
                continue
            self.current = job.id
            try:
                self._run(job)
            finally:
                self.current = None

    def _run(self, job: Job) -> None:
        ctx = JobContext(
            settings=self.settings, sessions=self.sessions, app=self.app, owner=self.owner, gpu=self.gpu,
            lost=threading.Event(), stopping=self.stopping,
        )
        # the lease is renewed from the lease to the end, the clone's fetch included, not only while measuring
        ended = threading.Event()
        beating = threading.Thread(target=self._keep_alive, args=(job.id, ctx.lost, ended), daemon=True)
        beating.start()
        try:
            outcome = run_job(job, ctx)
        except Exception as exc:  # noqa: BLE001  # a bug fails this job, never the worker
            logger.exception("job %d failed: an internal error", job.id)
            error = f"internal error: {type(exc).__name__}: {exc}"
            if finish(self.sessions, job.id, self.owner, error=error):
                conclude_failed(self.sessions, self.app, job, "internal", error)
            return
        finally:
            ended.set()
            beating.join()
        if ctx.lost.is_set():
            logger.warning("job %d: its lease went to another worker; left to it", job.id)
            return
        if outcome.lost:
            if self.stopping.is_set():
                release(self.sessions, job.id, self.owner)  # stopping cleanly: next start takes it at once
            return
        if not finish(self.sessions, job.id, self.owner, error=outcome.error, run_id=outcome.run_id):
            logger.warning("job %d: its lease went to another worker before it finished here", job.id)
            return
        if outcome.error is not None:  # failed for good now, not before: its Check Run says so
            conclude_failed(self.sessions, self.app, job, outcome.failure, outcome.error)

    def _keep_alive(self, job_id: int, lost: threading.Event, ended: threading.Event) -> None:
        while not ended.wait(self.settings.lease_s / 3):
            if not self._heartbeat(job_id):
                lost.set()
                return

    def _heartbeat(self, job_id: int) -> bool:
        """False once the lease is another's; a database away for a moment keeps the job going
        (its lease may still hold when the database is back, and finishing checks it then)."""
        try:
            return heartbeat(self.sessions, job_id, self.owner, self.settings.lease_s)
        except SQLAlchemyError as exc:
            logger.warning("job %d: heartbeat failed: %s", job_id, exc)
            return True
