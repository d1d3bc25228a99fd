"""Change points confirmed by a paired run: a `confirm` job queued once per new candidate (the
last commit before the step as base, the first after it as head, interleaved on one host, at
the candidates' batch sizes), and its report's verdict at each candidate's batch size taken by
guard.history's rule (`apply_confirmation`): a regression confirms a slowdown, an improvement a
speed-up, any other decided verdict dismisses it, an invalid one decides nothing.

The rows of the `confirmations` table are the memory: the unique key (candidate, pair of
commits, round) means a retried push job, a replayed delivery or a restart queues nothing
again. A second round is queued only when every earlier one decided nothing."""

from __future__ import annotations

import time
from collections.abc import Iterable

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from guard.history import (
    ChangePoint, Confirmation, PairedRun, apply_confirmation, confirmation_run, gpu_class, workload_name,
)
from guard.report import Report
from guard.service._queue import add_job
from guard.service._series import change_point_model, change_points, redetect
from guard.service._tables import ChangePoint as ChangePointRow
from guard.service._tables import Confirmation as ConfirmationRow
from guard.service._tables import Job

CONFIRM_KIND = "confirm"
MAX_ROUNDS = 2  # a first run that decided nothing (a failed job, an invalid run) gets one more
_UNDECIDED = ("failed", "undecided")  # the states after which another round may be queued


def detect_and_confirm(sessions: sessionmaker, repo: str, origin: Job) -> list[int]:
    """After a push's run: the change points found again (with every decided paired run applied
    to the step it measured), then a confirm job for each new candidate; returns the jobs' ids."""
    with sessions() as session:
        decided = decided_confirmations(session, repo)
    redetect(sessions, repo, decided)
    with sessions() as session:
        current = [c for points in change_points(session, repo).values() for c in points]
        try:  # at a flush or at the commit
            queued = queue_confirmations(session, repo, current, origin)
            session.commit()
        except IntegrityError:  # another host queued the same round at the same moment: it has its job
            session.rollback()
            return []
        return queued


def queue_confirmations(session: Session, repo: str, current: Iterable[ChangePoint], origin: Job) -> list[int]:
    """In the caller's transaction: a confirm job for the candidates that have none yet, one job
    per pair of commits (series of one culprit and one base share it), made as every job is
    (guard.service._queue.add_job: it reaches whichever queue runs the jobs); returns their ids."""
    rounds: dict[tuple[str, str, str], list[str]] = {}
    for row in session.scalars(select(ConfirmationRow).where(ConfirmationRow.repo == repo)):
        rounds.setdefault((row.change_point, row.before_sha, row.after_sha), []).append(row.state)
    wanted: dict[tuple[str, str], list[tuple[ChangePoint, int, PairedRun]]] = {}
    for point in current:
        states = rounds.get((point.id, point.before_sha, point.after_sha), [])
        if point.state != "candidate" or len(states) >= MAX_ROUNDS or not all(s in _UNDECIDED for s in states):
            continue
        paired = confirmation_run(point)
        wanted.setdefault((paired.base_sha, paired.head_sha), []).append((point, len(states) + 1, paired))
    if not origin.clone_url:
        return []  # nothing to fetch the commits from (an ingested point): left a candidate
    now, queued = time.time(), []
    for (before, after), points in wanted.items():
        job = add_job(session, kind=CONFIRM_KIND, repo=repo, base_sha=before, head_sha=after,
                      clone_url=origin.clone_url, installation_id=origin.installation_id,
                      detail={"change_points": [p.id for p, _, _ in points],
                              "batch_sizes": sorted({b for _, _, paired in points for b in paired.batch_sizes})})
        for point, round_number, _ in points:
            session.add(ConfirmationRow(
                change_point=point.id, repo=repo, workload=point.series.workload, batch_size=point.series.batch_size,
                gpu_class=point.series.gpu_class, before_sha=before, after_sha=after, round=round_number,
                job_id=job.id, state="queued", created_s=now))
        queued.append(job.id)
    return queued


def decided_confirmations(session: Session, repo: str) -> dict[tuple[str, str, str], Confirmation]:
    """The paired runs measured, by (change point, before, after): detection run again applies
    each to the step it finds again (an invalid one changes nothing), whatever it kept."""
    rows = session.scalars(select(ConfirmationRow).where(
        ConfirmationRow.repo == repo, ConfirmationRow.state != "unmatched").order_by(ConfirmationRow.round))
    return {(r.change_point, r.before_sha, r.after_sha): Confirmation.model_validate(r.confirmation)
            for r in rows if r.confirmation}


def confirming_job(session: Session, job: Job) -> Job | None:
    """The confirm job a run answers: the job itself, or the one whose dispatched workflow
    brought this report back."""
    if job.kind == CONFIRM_KIND:
        return job
    dispatched = job.detail.get("dispatched_job") if job.kind == "workflow_run" else None
    found = session.get(Job, dispatched) if isinstance(dispatched, int) else None
    if found is None or found.kind != CONFIRM_KIND or (found.repo, found.head_sha) != (job.repo, job.head_sha):
        return None
    return found


def apply_confirmation_run(sessions: sessionmaker, confirm_job_id: int, report: Report, run_id: int) -> list[str]:
    """The run's verdicts applied to the job's candidates; returns the ids of those confirmed.
    A candidate of another workload or GPU class than the run measured, or of a batch size it
    did not measure, is left a candidate: this run says nothing of its series."""
    workload = workload_name(report.workload)
    klass = gpu_class(report.environment, report.gpu_fingerprint).key
    batches = {b.batch_size: b for b in report.batch_sizes}
    confirmed, now = [], time.time()
    with sessions() as session:
        for row in session.scalars(select(ConfirmationRow).where(ConfirmationRow.job_id == confirm_job_id)):
            batch = batches.get(row.batch_size)
            if (row.workload, row.gpu_class) != (workload, klass) or batch is None:
                row.state, row.decided_s = "unmatched", now
                continue
            paired = Confirmation(good_sha=row.before_sha, bad_sha=row.after_sha, verdict=batch.verdict,
                                  gpu_ms_change_pct=batch.gpu_ms_change.pct if batch.gpu_ms_change else None,
                                  run_id=str(run_id))
            state = _apply(session, row, paired)
            row.state, row.confirmation, row.decided_s = state, paired.model_dump(), now
            if state == "confirmed":
                confirmed.append(row.change_point)
        session.commit()
    return confirmed


def confirmation_failed(sessions: sessionmaker, confirm_job_id: int) -> None:
    """Its job failed: the candidates stay candidates, and may get another round."""
    with sessions() as session:
        session.execute(update(ConfirmationRow).where(ConfirmationRow.job_id == confirm_job_id,
                                                      ConfirmationRow.state == "queued")
                        .values(state="failed", decided_s=time.time()))
        session.commit()


def _apply(session: Session, row: ConfirmationRow, paired: Confirmation) -> str:
    """The change point's state once the paired run is in, written to its row; the state the
    rule gives when detection no longer finds the step (kept for when it is found again)."""
    stored = session.scalars(select(ChangePointRow).where(
        ChangePointRow.repo == row.repo, ChangePointRow.workload == row.workload,
        ChangePointRow.batch_size == row.batch_size, ChangePointRow.gpu_class == row.gpu_class,
        ChangePointRow.before_sha == row.before_sha, ChangePointRow.after_sha == row.after_sha)).first()
    if stored is None:
        return "undecided" if paired.verdict == "invalid" else "gone"
    decided = apply_confirmation(change_point_model(stored), paired)
    stored.state = decided.state
    stored.confirmation = decided.confirmation.model_dump() if decided.confirmation else None
    return "undecided" if decided.state == "candidate" else decided.state
