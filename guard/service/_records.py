"""Runs as the database keeps them: a checked report with its per-process samples and
per-batch-size verdicts, for the default branch a point per series of its history, and the
bisects of its change points. A record of one default-branch commit is kept as a run of its
own (no base, no verdict), once per commit and series."""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any, Literal

from pydantic import BaseModel
from sqlalchemy import delete, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from guard.compare import ArmStats
from guard.history import MainPoint as HistoryPoint
from guard.history import gpu_class, points_from_record, points_from_report, workload_name
from guard.record import Record
from guard.report import Report
from guard.service._tables import Bisect, ChangePoint, MainPoint, Run, Sample, Verdict


class CommitInfo(BaseModel):
    """Where a default-branch commit stands, from git: its first-parent position and subject."""

    order: int | None = None
    subject: str = ""


def store_run(sessions: sessionmaker, report: Report, *, repo: str, source: str, pr: int | None = None,
              job_id: int | None = None, out_dir: str | None = None, main_branch: bool = False,
              commit: CommitInfo | None = None) -> int:
    """Stores the report (already checked) and returns the run's id. A job's run replaces the
    run an earlier attempt of the same job stored: a retried job leaves one run, and the
    default branch's history one point per commit and series."""
    now = time.time()
    workload = workload_name(report.workload)
    # the series: GPU model, driver, limits (guard.history)
    klass = gpu_class(report.environment, report.gpu_fingerprint).key
    with sessions() as session:
        if job_id is not None:
            _forget_runs_of(session, job_id)
        run = Run(job_id=job_id, source=source, repo=repo, pr=pr, base_sha=report.arm(report.base).sha,
                  head_sha=report.arm(report.head).sha, verdict=report.verdict, workload=workload,
                  gpu_class=klass, report_json=report.model_dump_json(), out_dir=out_dir, created_s=now)
        session.add(run)
        session.flush()
        for batch in report.batch_sizes:
            session.add(Verdict(
                run_id=run.id, batch_size=batch.batch_size, verdict=batch.verdict,
                gpu_ms_change_pct=batch.gpu_ms_change.pct if batch.gpu_ms_change else None,
                tok_per_s_change_pct=batch.tok_per_s_change.pct if batch.tok_per_s_change else None,
            ))
            for arm in batch.arms:
                _add_samples(session, run.id, batch.batch_size, arm)
        if main_branch and report.verdict != "invalid":
            order = commit.order if commit and commit.order is not None else _next_order(session, repo)
            subject = commit.subject if commit else ""
            for point in points_from_report(report, repo, order, run_id=str(run.id)):
                _add_point(session, point.model_copy(update={"subject": subject or point.subject}), run.id, now)
        session.commit()
        return run.id


RECORD_SOURCE = "record"
Stored = Literal["created", "unchanged", "replaced"]


class StoredRecord(BaseModel):
    run_id: int
    # created: a new run; unchanged: this very record was stored before (a retried upload);
    # replaced: the commit's earlier record in this series gave way to this one (a re-run measured it again)
    outcome: Stored


def upload_key(repo: str, record: Record) -> str:
    """What makes two uploads the same commit's record: its repository, commit and series."""
    klass = gpu_class(record.environment, record.gpu_fingerprint).key
    fields = [repo, record.arm.sha, workload_name(record.workload), klass]
    return hashlib.sha256(json.dumps(fields).encode()).hexdigest()


def store_record(sessions: sessionmaker, record: Record, *, repo: str) -> StoredRecord:
    """Stores a measured record (already checked) as a run of the default branch, with a point
    per batch size in main's history. One run per commit and series (its upload key): a retried
    upload of the same record changes nothing, and another record of that commit replaces the
    earlier one's figures in place, at the earlier one's position in the history."""
    key = upload_key(repo, record)
    body = record.model_dump_json()
    for last in (False, True):
        try:
            return _store_record(sessions, record, repo, key, body)
        except IntegrityError:  # a concurrent upload of the same key committed first: its row is there now
            if last:
                raise
    raise AssertionError("unreachable")


def _store_record(sessions: sessionmaker, record: Record, repo: str, key: str, body: str) -> StoredRecord:
    now = time.time()
    with sessions() as session:
        run = session.scalar(select(Run).where(Run.upload_key == key))
        if run is not None and run.report_json == body:
            return StoredRecord(run_id=run.id, outcome="unchanged")
        outcome: Stored = "replaced" if run is not None else "created"
        if run is None:
            run = Run(source=RECORD_SOURCE, repo=repo, head_sha=record.arm.sha, workload=workload_name(record.workload),
                      gpu_class=gpu_class(record.environment, record.gpu_fingerprint).key, report_json=body,
                      upload_key=key, created_s=now)
            session.add(run)
            session.flush()
            order = _next_order(session, repo)
        else:
            kept = session.scalar(select(func.min(MainPoint.commit_order)).where(MainPoint.run_id == run.id))
            order = kept if kept is not None else _next_order(session, repo)
            for table in (Sample, MainPoint):
                session.execute(delete(table).where(table.run_id == run.id))
            run.report_json, run.created_s = body, now
        for batch in record.batch_sizes:
            _add_samples(session, run.id, batch.batch_size, batch.stats)
        for point in points_from_record(record, repo, order, run_id=str(run.id)):
            _add_point(session, point, run.id, now)
        session.commit()
        return StoredRecord(run_id=run.id, outcome=outcome)


def _add_samples(session: Session, run_id: int, batch_size: int, arm: ArmStats) -> None:
    """A row per process of the arm at the batch size."""
    tok = arm.tok_per_s.values if arm.tok_per_s else []
    for repeat, gpu_ms in enumerate(arm.gpu_ms_per_step.values):
        session.add(Sample(run_id=run_id, arm=arm.arm, batch_size=batch_size, repeat=repeat, gpu_ms_per_step=gpu_ms,
                           tok_per_s=tok[repeat] if repeat < len(tok) else None))


def _add_point(session: Session, point: HistoryPoint, run_id: int, now: float) -> None:
    session.add(MainPoint(
        repo=point.series.repo, workload=point.series.workload, batch_size=point.series.batch_size,
        gpu_class=point.series.gpu_class, sha=point.sha, commit_order=point.order, subject=point.subject,
        run_id=run_id, gpu_ms_per_step=point.gpu_ms_per_step, gpu_ms_values=point.gpu_ms_values,
        gpu_timed=point.gpu_timed, tok_per_s=point.tok_per_s, created_s=now,
    ))


def _next_order(session: Session, repo: str) -> int:
    """For a point whose commit git did not place (an ingested report): after the newest."""
    newest = session.scalar(select(func.max(MainPoint.commit_order)).where(MainPoint.repo == repo))
    return (newest or 0) + 1


def _forget_runs_of(session: Session, job_id: int) -> None:
    earlier = list(session.scalars(select(Run.id).where(Run.job_id == job_id)))
    if earlier:
        for table in (Sample, Verdict, MainPoint):
            session.execute(delete(table).where(table.run_id.in_(earlier)))
        session.execute(delete(Run).where(Run.id.in_(earlier)))


def run_detail(sessions: sessionmaker, run_id: int) -> dict[str, Any] | None:
    with sessions() as session:
        run = session.get(Run, run_id)
        if run is None:
            return None
        verdicts = session.scalars(select(Verdict).where(Verdict.run_id == run_id).order_by(Verdict.batch_size))
        samples = session.scalars(select(Sample).where(Sample.run_id == run_id)
                                  .order_by(Sample.batch_size, Sample.arm, Sample.repeat))
        return {
            "id": run.id, "job": run.job_id, "source": run.source, "repo": run.repo, "pr": run.pr,
            "base_sha": run.base_sha, "head_sha": run.head_sha, "verdict": run.verdict, "workload": run.workload,
            "gpu_class": run.gpu_class, "created_at": iso(run.created_s), "out_dir": run.out_dir,
            "verdicts": [{"batch_size": v.batch_size, "verdict": v.verdict, "gpu_ms_change_pct": v.gpu_ms_change_pct,
                          "tok_per_s_change_pct": v.tok_per_s_change_pct} for v in verdicts],
            "samples": [{"arm": s.arm, "batch_size": s.batch_size, "repeat": s.repeat,
                         "gpu_ms_per_step": s.gpu_ms_per_step, "tok_per_s": s.tok_per_s} for s in samples],
        }


def history(sessions: sessionmaker, repo: str, workload: str | None = None,
            batch_size: int | None = None) -> dict[str, Any]:
    """The default branch's points per series, oldest first, and the series' change points."""
    with sessions() as session:
        # first-parent order where git gave it, else the order they came in
        points = select(MainPoint).where(MainPoint.repo == repo).order_by(
            MainPoint.commit_order.is_(None), MainPoint.commit_order, MainPoint.created_s, MainPoint.id)
        changes = select(ChangePoint).where(ChangePoint.repo == repo).order_by(ChangePoint.created_s)
        if workload:
            points, changes = points.where(MainPoint.workload == workload), changes.where(
                ChangePoint.workload == workload)
        if batch_size is not None:
            points, changes = points.where(MainPoint.batch_size == batch_size), changes.where(
                ChangePoint.batch_size == batch_size)
        # each change point's bisect, where its two sides are more than one commit apart
        bisects = {(b.before_sha, b.after_sha): f"/api/v1/bisects/{b.id}"
                   for b in session.scalars(select(Bisect).where(Bisect.repo == repo))}
        return {
            "repo": repo,
            "points": [{"sha": p.sha, "order": p.commit_order, "subject": p.subject, "workload": p.workload,
                        "batch_size": p.batch_size, "gpu_class": p.gpu_class, "gpu_ms_per_step": p.gpu_ms_per_step,
                        "gpu_ms_values": p.gpu_ms_values, "gpu_timed": p.gpu_timed, "tok_per_s": p.tok_per_s,
                        "run": p.run_id, "created_at": iso(p.created_s)} for p in session.scalars(points)],
            "change_points": [{"workload": c.workload, "batch_size": c.batch_size, "gpu_class": c.gpu_class,
                               "before_sha": c.before_sha, "after_sha": c.after_sha,
                               "before_order": c.before_order, "after_order": c.after_order,
                               "before_ms": c.before_ms, "after_ms": c.after_ms, "change_pct": c.change_pct,
                               "direction": c.direction, "p_value": c.p_value, "state": c.state,
                               "confirmation": c.confirmation,
                               "bisect": bisects.get((c.before_sha, c.after_sha))} for c in session.scalars(changes)],
        }


def bisect_json(row: Bisect) -> dict[str, Any]:
    return {"id": row.id, "repo": row.repo, "good_sha": row.before_sha, "bad_sha": row.after_sha,
            "workload": row.workload, "batch_sizes": row.batch_sizes, "change_points": row.change_points,
            "job": row.job_id, "state": row.state, "first_bad_sha": row.first_bad_sha,
            "commits": (row.result or {}).get("commits"), "steps": row.steps, "error": row.error,
            "created_at": iso(row.created_s), "finished_at": iso(row.finished_s)}


def bisect_detail(sessions: sessionmaker, bisect_id: int) -> dict[str, Any] | None:
    with sessions() as session:
        row = session.get(Bisect, bisect_id)
        return bisect_json(row) if row is not None else None


def iso(seconds: float | None) -> str | None:
    if seconds is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{int(seconds % 1 * 1000):03d}Z"
