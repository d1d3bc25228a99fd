"""The job queue in the database: a delivery and its job stored in one transaction, jobs
leased by compare-and-set (so it holds on SQLite and PostgreSQL alike), a lease kept alive by
its worker's heartbeat and taken over by another once it expires.

Every job comes to be through `add_job`, whoever makes it (a delivery, a push's run queueing a
confirmation): the embedded workers lease it from this table, and where another queue runs the
jobs (procrastinate's), the sessions carry its `Submit` under SUBMIT, which `add_job` calls in
the job's own transaction, so a job of any kind reaches that queue or is not made at all."""

from __future__ import annotations

import time
from typing import Any, Protocol

from pydantic import BaseModel
from sqlalchemy import Select, and_, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from guard.service._events import Decision, Ignored, JobRequest
from guard.service._tables import Delivery, Job


SUBMIT = "guard.submit"  # the key of a Submit in Session.info (guard.service._store.sessions)


class Submit(Protocol):
    def __call__(self, session: Session, job_id: int) -> None:
        """Hands the job, queued in `session`'s open transaction, to the mode's queue, in that transaction."""


def add_job(session: Session, **fields: Any) -> Job:
    """A new job, queued, in the caller's transaction (flushed: its id is known), and handed to
    the sessions' queue where they have one; the caller commits both, or neither."""
    job = Job(state="queued", attempts=0, created_s=time.time(), **fields)
    session.add(job)
    session.flush()
    _submit(session, job.id)
    return job


def _submit(session: Session, job_id: int) -> None:
    submit: Submit | None = session.info.get(SUBMIT)
    if submit is not None:
        submit(session, job_id)


class Recorded(BaseModel):
    delivery: str
    duplicate: bool  # this delivery id was stored before: no second job
    job: int | None  # the delivery's job, if it has one
    ignored: str | None = None  # why no job, as a kind


def record_delivery(sessions: sessionmaker, delivery: str, event: str, payload: dict[str, Any],
                    decision: Decision) -> Recorded:
    """Stores the delivery and, unless ignored, its job; a delivery id already stored gives
    the stored one's job. The unique key on the delivery id decides, not a read before the write."""
    now = time.time()
    action = payload.get("action") if isinstance(payload.get("action"), str) else None
    repo = decision.repo if isinstance(decision, JobRequest) else None
    with sessions() as session:
        if isinstance(decision, JobRequest) and decision.kind == "rerun":
            decision = _rerun_of(session, decision)
        if isinstance(decision, JobRequest) and "dispatched_job" in decision.detail:
            decision = _report_of_dispatched(session, decision)
        ignored = decision.reason if isinstance(decision, Ignored) else None
        job = None
        try:  # a replay fails on the delivery's key: at the job's flush, or at the commit
            session.add(Delivery(id=delivery, event=event[:64], action=action and action[:64], repo=repo,
                                 received_s=now, outcome="ignored" if ignored else "queued", reason=ignored))
            if isinstance(decision, JobRequest):
                job = add_job(session, delivery=delivery, **decision.model_dump())
            session.commit()
        except IntegrityError:
            session.rollback()
            return _stored(session, delivery)
        return Recorded(delivery=delivery, duplicate=False, job=job.id if job else None, ignored=ignored)


def _stored(session: Session, delivery: str) -> Recorded:
    stored = session.get(Delivery, delivery)
    job = session.scalar(select(Job.id).where(Job.delivery == delivery))
    return Recorded(delivery=delivery, duplicate=True, job=job, ignored=stored.reason if stored else None)


def _rerun_of(session: Session, request: JobRequest) -> Decision:
    """A check run asked to run again: the job whose check run it is, queued anew."""
    external = str(request.detail.get("external_id", ""))
    job_id = int(external.removeprefix(EXTERNAL_ID_PREFIX)) if external.startswith(EXTERNAL_ID_PREFIX) and \
        external.removeprefix(EXTERNAL_ID_PREFIX).isdigit() else None
    earlier = session.get(Job, job_id) if job_id else None
    if earlier is None or earlier.repo != request.repo or earlier.head_sha != request.head_sha:
        return Ignored(reason="unknown-check-run")
    return request.model_copy(update={
        "pr": earlier.pr, "base_sha": earlier.base_sha, "clone_url": earlier.clone_url or request.clone_url,
        "detail": earlier.detail | {"rerun_of": earlier.id}, "sender": earlier.sender,
        "kind": earlier.kind if earlier.kind != "command" else "pull_request",
    })


def _report_of_dispatched(session: Session, request: JobRequest) -> JobRequest:
    """A dispatched run's report goes to its job's pull request, if the job is of this
    repository and commit; otherwise it is posted to no pull request."""
    job = session.get(Job, request.detail["dispatched_job"])
    if job is None or job.repo != request.repo or job.head_sha != request.head_sha:
        return request
    return request.model_copy(update={"pr": request.pr or job.pr, "base_sha": job.base_sha})


EXTERNAL_ID_PREFIX = "guard-job-"


def external_id(job_id: int) -> str:
    """The check run's external id: how a rerequest finds its job again."""
    return f"{EXTERNAL_ID_PREFIX}{job_id}"


def fail_exhausted(sessions: sessionmaker, max_attempts: int) -> list[Job]:
    """Fails the jobs whose leases expired `max_attempts` times (each kills its worker) and
    returns those this call failed: each is failed by one caller, who posts what it must."""
    now = time.time()
    exhausted = and_(Job.state == "running", Job.lease_expires_s < now, Job.attempts >= max_attempts)
    failed = []
    with sessions() as session:
        for job_id in list(session.scalars(select(Job.id).where(exhausted).order_by(Job.id))):
            taken = session.execute(
                update(Job).where(Job.id == job_id, exhausted)
                .values(state="failed", finished_s=now, lease_owner=None,
                        error=f"its worker stopped {max_attempts} times while running it (lease expired)")
            )
            session.commit()
            if taken.rowcount == 1:
                failed.append(session.get(Job, job_id, populate_existing=True))
    return failed


def lease(sessions: sessionmaker, owner: str, lease_s: float, max_attempts: int) -> Job | None:
    """The oldest job that is queued or whose lease expired, now leased to `owner`; None if none.
    A job whose leases expired `max_attempts` times is not taken again (fail_exhausted fails it)."""
    now = time.time()
    expired = and_(Job.state == "running", Job.lease_expires_s < now, Job.attempts < max_attempts)
    with sessions() as session:
        for _ in range(10):  # another worker may take the candidate first: try the next
            free = or_(Job.state == "queued", expired)
            candidate = session.scalar(select(Job.id).where(free).order_by(Job.id).limit(1))
            if candidate is None:
                return None
            taken = session.execute(
                update(Job).where(Job.id == candidate, free)
                .values(state="running", lease_owner=owner, lease_expires_s=now + lease_s,
                        attempts=Job.attempts + 1, started_s=now, error=None)
            )
            session.commit()
            if taken.rowcount == 1:
                return session.get(Job, candidate, populate_existing=True)
    return None


def heartbeat(sessions: sessionmaker, job_id: int, owner: str, lease_s: float) -> bool:
    """Extends the lease; False when it is no longer this worker's (it expired and was taken)."""
    with sessions() as session:
        kept = session.execute(
            update(Job).where(Job.id == job_id, Job.lease_owner == owner, Job.state == "running")
            .values(lease_expires_s=time.time() + lease_s)
        )
        session.commit()
        return kept.rowcount == 1


def finish(sessions: sessionmaker, job_id: int, owner: str, *, error: str | None = None,
           run_id: int | None = None, fields: dict[str, Any] | None = None) -> bool:
    """Done, or failed with `error`; False when the lease was lost and another worker has the job."""
    with sessions() as session:
        ended = session.execute(
            update(Job).where(Job.id == job_id, Job.lease_owner == owner, Job.state == "running")
            .values(state="failed" if error else "done", finished_s=time.time(), error=error, run_id=run_id,
                    lease_owner=None, lease_expires_s=None, **(fields or {}))
        )
        session.commit()
        return ended.rowcount == 1


def update_job(sessions: sessionmaker, job_id: int, owner: str, **fields: Any) -> None:
    """Fields the job learnt while running (the shas a command's pull request has)."""
    with sessions() as session:
        session.execute(update(Job).where(Job.id == job_id, Job.lease_owner == owner).values(**fields))
        session.commit()


def list_jobs(sessions: sessionmaker, state: str | None = None, repo: str | None = None,
              limit: int = 100, before: int | None = None) -> list[Job]:
    """Newest first; `before` pages on: the jobs older than that id."""
    with sessions() as session:
        query = select(Job).order_by(Job.id.desc()).limit(limit)
        if before is not None:
            query = query.where(Job.id < before)
        if state:
            query = query.where(Job.state == state)
        if repo:
            query = query.where(Job.repo == repo)
        return list(session.scalars(query))


def live_owners(now: float) -> Select:
    """The owners of the jobs running now, whose claims (an alert's) hold: an embedded worker's
    until its lease expires; a procrastinate attempt's, which has no lease (procrastinate's
    heartbeat tells whether its worker lives), until another attempt takes the job over."""
    return select(Job.lease_owner).where(Job.state == "running", Job.lease_owner.is_not(None),
                                         or_(Job.lease_expires_s > now, Job.lease_expires_s.is_(None)))


def release(sessions: sessionmaker, job_id: int, owner: str) -> None:
    """Back to the queue, this attempt not counted: the service stopped cleanly during it."""
    with sessions() as session:
        session.execute(
            update(Job).where(Job.id == job_id, Job.lease_owner == owner, Job.state == "running")
            .values(state="queued", lease_owner=None, lease_expires_s=None, attempts=Job.attempts - 1)
        )
        session.commit()


# Jobs run through procrastinate (`guard worker`): procrastinate decides who runs them and when;
# these keep the jobs table, which the API and the dashboard read, in step with it.

def job_state(sessions: sessionmaker, job_id: int) -> str | None:
    with sessions() as session:
        return session.scalar(select(Job.state).where(Job.id == job_id))


def queued_ids(sessions: sessionmaker) -> list[int]:
    """The jobs still waiting, oldest first: what a restarted service defers again."""
    with sessions() as session:
        return list(session.scalars(select(Job.id).where(Job.state == "queued").order_by(Job.id)))


def take_over(sessions: sessionmaker, job_id: int, owner: str, attempt_of: str) -> Job | None:
    """The job, now running for `owner`, if it is queued or was running for an earlier attempt of
    the same queue job (an owner starting `attempt_of`, whose worker stopped); None when it is
    done, failed, or running for another queue job (a stale copy of it)."""
    earlier = and_(Job.state == "running", Job.lease_owner.startswith(attempt_of, autoescape=True))
    with sessions() as session:
        taken = session.execute(
            update(Job).where(Job.id == job_id, or_(Job.state == "queued", earlier))
            .values(state="running", lease_owner=owner, lease_expires_s=None, attempts=Job.attempts + 1,
                    started_s=time.time(), error=None)
        )
        session.commit()
        return session.get(Job, job_id, populate_existing=True) if taken.rowcount == 1 else None


def holds(sessions: sessionmaker, job_id: int, owner: str) -> bool:
    """Whether the job still runs for `owner`: False once another attempt took it over."""
    with sessions() as session:
        return session.scalar(select(Job.lease_owner).where(Job.id == job_id, Job.state == "running")) == owner


def requeue(sessions: sessionmaker, job_id: int, owner: str, error: str, *, resubmit: bool = False) -> None:
    """Back to queued, saying why: the queue retries it, or, with `resubmit`, it is handed to the
    sessions' queue again, as a new job is, in the same transaction."""
    with sessions() as session:
        queued = session.execute(
            update(Job).where(Job.id == job_id, Job.lease_owner == owner, Job.state == "running")
            .values(state="queued", lease_owner=None, error=error)
        )
        if resubmit and queued.rowcount == 1:
            _submit(session, job_id)
        session.commit()


def abandon(sessions: sessionmaker, job_id: int, attempt_of: str, error: str) -> Job | None:
    """Failed: the workers of its queue job's attempts all stopped while running it. The job, if
    this call failed it (so that one caller concludes it), else None."""
    earlier = and_(Job.state == "running", Job.lease_owner.startswith(attempt_of, autoescape=True))
    with sessions() as session:
        failed = session.execute(
            update(Job).where(Job.id == job_id, or_(Job.state == "queued", earlier))
            .values(state="failed", finished_s=time.time(), error=error, lease_owner=None)
        )
        session.commit()
        return session.get(Job, job_id, populate_existing=True) if failed.rowcount == 1 else None
