"""The bisect of a confirmed slowdown whose two sides are more than one commit apart (main is
measured per push or nightly): a `bisect` job queued once per pair of commits, which runs
guard.bisect's search over the first-parent commits between them, each step the service's
measuring command with the last commit before the step as base (its build cached in the clone
and reused by every step, as `guard bisect` reuses it) at the change points' batch sizes.

The rows of the `bisects` table are the memory: the unique key (repository, pair of commits)
means a retried job, a replayed delivery or a restart queues nothing again, and each step is
recorded as it ends, so a retried bisect measures only what its last try had not. While a
bisect runs, its change points' alert waits; once it found the first slower commit, the alert
names that commit; a bisect that failed or found none leaves the alert as it was (the range's
end), with the measurements it made."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from pydantic import BaseModel
from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from guard._errors import GuardError
from guard.bisect import BisectResult, BisectStep, commits_between, search_commits
from guard.history import ChangePoint, workload_name
from guard.report import Report
from guard.service._queue import add_job
from guard.service._series import change_points
from guard.service._tables import Bisect as BisectRow
from guard.service._tables import Job

BISECT_KIND = "bisect"
BISECT_DIR = "bisect"  # in the job's folder: bisect.json and each step's folder, kept over retries
UNFINISHED = ("queued", "running")

# (good sha, the step's commit, its folder) -> the step's report, checked
MeasureStep = Callable[[str, str, Path], Report]


class BisectWrongWorkload(GuardError):
    """A step measured another workload than the change point's: it cannot place the step."""


def spans_commits(point: ChangePoint) -> bool:
    """Whether commits lie between the change point's two sides: only then is there a culprit to find."""
    return point.after_order - point.before_order > 1


def queue_bisects(session: Session, repo: str, current: Iterable[ChangePoint], origin: Job) -> list[int]:
    """In the caller's transaction: a bisect job for each pair of commits with a confirmed
    slowdown over more than one commit and no bisect yet (series of one pair share it), made as
    every job is (guard.service._queue.add_job); returns their ids."""
    known = {(b.before_sha, b.after_sha) for b in session.scalars(select(BisectRow).where(BisectRow.repo == repo))}
    wanted: dict[tuple[str, str], list[ChangePoint]] = {}
    for point in current:
        pair = (point.before_sha, point.after_sha)
        if point.state == "confirmed" and point.direction == "slower" and spans_commits(point) and pair not in known:
            wanted.setdefault(pair, []).append(point)
    if not origin.clone_url:
        return []  # nothing to fetch the commits from: the alert names the range's end
    now, queued = time.time(), []
    for (before, after), points in wanted.items():
        worst = max(points, key=lambda p: p.change_pct)
        batch_sizes = sorted({p.series.batch_size for p in points if p.series.workload == worst.series.workload})
        job = add_job(session, kind=BISECT_KIND, repo=repo, base_sha=before, head_sha=after,
                      clone_url=origin.clone_url, installation_id=origin.installation_id,
                      detail={"change_points": [p.id for p in points], "batch_sizes": batch_sizes})
        session.add(BisectRow(repo=repo, before_sha=before, after_sha=after, change_points=[p.id for p in points],
                              workload=worst.series.workload, batch_sizes=batch_sizes, job_id=job.id,
                              state="queued", steps=[], created_s=now))
        queued.append(job.id)
    return queued


def queue_due_bisects(sessions: sessionmaker, repo: str, origin: Job) -> list[int]:
    """After a run that may have confirmed a slowdown: the bisects it calls for, queued once."""
    with sessions() as session:
        current = [c for points in change_points(session, repo).values() for c in points]
        try:  # at a flush or at the commit
            queued = queue_bisects(session, repo, current, origin)
            session.commit()
        except IntegrityError:  # another host queued the same bisect at the same moment: it has its job
            session.rollback()
            return []
        return queued


class AlertBisects(BaseModel):
    """What the repository's bisects say to its alerts, by change point id."""

    held: set[str] = set()  # their bisect has not ended: no alert yet
    culprits: dict[str, str] = {}  # the first slower commit their bisect found
    results: dict[str, BisectResult] = {}  # every ended bisect's measurements


def alert_bisects(session: Session, repo: str, points: Iterable[ChangePoint]) -> AlertBisects:
    rows = {(b.before_sha, b.after_sha): b for b in session.scalars(select(BisectRow).where(BisectRow.repo == repo))}
    found = AlertBisects()
    for point in points:
        row = rows.get((point.before_sha, point.after_sha))
        if row is None:
            continue
        if row.state in UNFINISHED:
            found.held.add(point.id)
        elif row.result is not None:
            found.results[point.id] = BisectResult.model_validate(row.result)
            if row.state == "found" and row.first_bad_sha:
                found.culprits[point.id] = row.first_bad_sha
    return found


def bisects_by_pair(session: Session, repo: str) -> dict[tuple[str, str], BisectRow]:
    return {(b.before_sha, b.after_sha): b for b in session.scalars(select(BisectRow).where(BisectRow.repo == repo))}


def run_bisect_job(sessions: sessionmaker, job: Job, clone: Path, job_dir: Path, measure_step: MeasureStep,
                   progress: Callable[[str], None]) -> BisectResult:
    """The job's bisect, from the steps its earlier tries recorded on: guard.bisect's search,
    each new step measured by `measure_step` and recorded at once. Raises what stops it."""
    with sessions() as session:
        row = session.scalars(select(BisectRow).where(BisectRow.job_id == job.id)).one_or_none()
        if row is None:
            raise GuardError(f"job {job.id} is a bisect without a bisect recorded for it")
        bisect_id, workload, earlier = row.id, row.workload, [BisectStep.model_validate(s) for s in row.steps]
        row.state = "running"
        session.commit()
    good, bad, commits = commits_between(clone, str(job.base_sha), str(job.head_sha))
    out_dir = job_dir / BISECT_DIR
    out_dir.mkdir(parents=True, exist_ok=True)

    def measure(sha: str, step_dir: Path) -> Report:
        shutil.rmtree(step_dir, ignore_errors=True)  # what a try killed during this step left
        step_dir.mkdir(parents=True)
        report = measure_step(good, sha, step_dir)
        if workload_name(report.workload) != workload:
            raise BisectWrongWorkload(
                f"step {sha[:12]} measured workload {workload_name(report.workload)!r}, not the change point's "
                f"{workload!r}; the measuring command must run the workload main's history is measured with")
        return report

    def record(step: BisectStep) -> None:
        with sessions() as session:
            stored = session.get(BisectRow, bisect_id)
            stored.steps = [s for s in stored.steps if s.get("sha") != step.sha] + [step.model_dump()]
            session.commit()

    result = search_commits(clone, good, bad, commits, out_dir, measure, progress, measured=earlier, on_step=record)
    with sessions() as session:
        session.execute(update(BisectRow).where(BisectRow.id == bisect_id).values(
            state="found" if result.outcome == "found" else "not_found", result=result.model_dump(),
            first_bad_sha=result.first_bad_sha, error=None, finished_s=time.time()))
        session.commit()
    return result


def bisect_failed(sessions: sessionmaker, job_id: int, error: str) -> bool:
    """Its job failed for good: the alert waits no more, and names the range's end. True if it was a bisect's."""
    with sessions() as session:
        ended = session.execute(update(BisectRow).where(BisectRow.job_id == job_id, BisectRow.state.in_(UNFINISHED))
                                .values(state="failed", error=error[:2000], finished_s=time.time()))
        session.commit()
        return ended.rowcount == 1
