"""Main's history for the service's tests: a repository whose default branch has a commit per
point, and the service's store seeded with the points a run of the CPU demo's report would
give, in its series (workload and GPU class as guard.history keys the report), with a step."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy.orm import sessionmaker

from guard.history import gpu_class, workload_name
from guard.record import Record, RecordedBatch
from guard.report import Report, read_report
from guard.service._store import migrate, open_engine
from guard.service._store import sessions as make_sessions
from guard.service._tables import MainPoint, Run
from tests.conftest import commit_all, git

CPU_REPORT = Path(__file__).resolve().parent.parent / "docs" / "examples" / "cpu-demo" / "report.json"
REPO = "octo/engine"


def main_origin(folder: Path, commits: int) -> tuple[Path, list[str]]:
    """A repository with `commits` commits on main, oldest first: commit i is at first-parent position i + 1."""
    folder.mkdir(parents=True)
    git(folder, "init", "--quiet", "-b", "main")
    shas = []
    for number in range(1, commits + 1):
        (folder / "engine.py").write_text(f"STEP_MS = {number}\n")
        shas.append(commit_all(folder, f"commit {number}"))
    return folder, shas


def demo_report() -> Report:
    return read_report(CPU_REPORT)


def demo_record(subject: str | None = None) -> Record:
    """The CPU demo's head arm as the record of its commit measured alone: the figures a push's
    report of that commit gives its point in main's history. `subject`: the commit's, in its place."""
    report = demo_report()
    head = report.arm(report.head)
    return Record(
        tool_version="test", arm=head if subject is None else head.model_copy(update={"subject": subject}),
        workload=report.workload, environment=report.environment, gpu_fingerprint=report.gpu_fingerprint,
        batch_sizes=[RecordedBatch(batch_size=b.batch_size, stats=next(a for a in b.arms if a.arm == report.head))
                     for b in report.batch_sizes],
        started_at="2026-01-01T00:00:00+00:00", duration_s=60.0)


def head_medians(report: Report) -> dict[int, float]:
    """The head arm's median per batch size: the point a push measured with this report adds."""
    return {b.batch_size: next(a for a in b.arms if a.arm == report.head).gpu_ms_per_step.median
            for b in report.batch_sizes}


def base_medians(report: Report) -> dict[int, float]:
    return {b.batch_size: next(a for a in b.arms if a.arm == report.base).gpu_ms_per_step.median
            for b in report.batch_sizes}


def seed_points(sessions: sessionmaker, shas: list[str], step_at: int, report: Report | None = None,
                workload: str | None = None) -> None:
    """A point per commit and batch size of the report: the base arm's level before commit
    `step_at` (0-based), the head arm's from it on, each moved by a fixed 0.2% pattern."""
    report = report or demo_report()
    before, after = base_medians(report), head_medians(report)
    klass = gpu_class(report.environment, report.gpu_fingerprint).key
    with sessions() as session:
        run = Run(source="ingest", repo=REPO, base_sha=shas[0], head_sha=shas[0], verdict="pass",
                  workload=workload or workload_name(report.workload), gpu_class=klass, report_json="{}",
                  created_s=0.0)
        session.add(run)
        session.flush()
        for index, sha in enumerate(shas):
            for batch_size in before:
                level = (after if index >= step_at else before)[batch_size]
                value = level * (1 + 0.002 * ((index * 7) % 5 - 2))
                session.add(MainPoint(
                    repo=REPO, workload=workload or workload_name(report.workload), batch_size=batch_size,
                    gpu_class=klass, sha=sha, commit_order=index + 1, subject=f"commit {index + 1}", run_id=run.id,
                    gpu_ms_per_step=value, gpu_ms_values=[value], tok_per_s=None, gpu_timed=False,
                    created_s=float(index)))
        session.commit()


def store_at(work_dir: Path) -> tuple[object, sessionmaker]:
    """The service's own SQLite store in `work_dir`, migrated: (engine, sessions)."""
    work_dir.mkdir(parents=True, exist_ok=True)
    engine = open_engine(f"sqlite:///{work_dir / 'guard.db'}")
    migrate(engine)
    return engine, make_sessions(engine)
