"""The service's tables. Times are Unix seconds (`*_s`): one float compares the same on
SQLite and PostgreSQL, which a lease's expiry needs. Migrations (migrations/versions/) make
these tables; a change here comes with a new migration."""

from __future__ import annotations

from typing import Any

from sqlalchemy import JSON, BigInteger, Boolean, Float, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

JOB_STATES = ("queued", "running", "done", "failed")


class Base(DeclarativeBase):
    pass


class Delivery(Base):
    """One webhook delivery, kept by GitHub's delivery id: a second copy of it finds this row."""

    __tablename__ = "deliveries"
    id: Mapped[str] = mapped_column(String(64), primary_key=True)  # X-GitHub-Delivery
    event: Mapped[str] = mapped_column(String(64))
    action: Mapped[str | None] = mapped_column(String(64))
    repo: Mapped[str | None] = mapped_column(String(200))
    received_s: Mapped[float] = mapped_column(Float)
    outcome: Mapped[str] = mapped_column(String(16))  # queued, ignored
    reason: Mapped[str | None] = mapped_column(String(300))  # why ignored, as a kind: "not-trusted", ...


class Job(Base):
    """A base/head pair to measure on one GPU host, leased by one worker at a time."""

    __tablename__ = "jobs"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    delivery: Mapped[str | None] = mapped_column(ForeignKey("deliveries.id"), unique=True)
    kind: Mapped[str] = mapped_column(String(32))  # pull_request, command, push, rerun, workflow_run, confirm, bisect
    repo: Mapped[str] = mapped_column(String(200), index=True)
    pr: Mapped[int | None] = mapped_column(Integer)
    base_sha: Mapped[str | None] = mapped_column(String(64))
    head_sha: Mapped[str | None] = mapped_column(String(64), index=True)
    clone_url: Mapped[str | None] = mapped_column(Text)
    sender: Mapped[str | None] = mapped_column(String(100))
    installation_id: Mapped[int | None] = mapped_column(BigInteger)
    detail: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)  # kind's extras: workflow run id, ...
    state: Mapped[str] = mapped_column(String(16), index=True, default="queued")
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    lease_owner: Mapped[str | None] = mapped_column(String(100))
    lease_expires_s: Mapped[float | None] = mapped_column(Float)
    created_s: Mapped[float] = mapped_column(Float)
    started_s: Mapped[float | None] = mapped_column(Float)
    finished_s: Mapped[float | None] = mapped_column(Float)
    error: Mapped[str | None] = mapped_column(Text)
    run_id: Mapped[int | None] = mapped_column(Integer)


class Run(Base):
    """One checked report: measured by a job here, or ingested from a CI job; or the checked
    record of one commit of the default branch measured alone, uploaded by a CI job (source
    `record`: no base and no verdict, its commit as head)."""

    __tablename__ = "runs"
    __table_args__ = (UniqueConstraint("upload_key", name="uq_runs_upload_key"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    job_id: Mapped[int | None] = mapped_column(ForeignKey("jobs.id"))
    source: Mapped[str] = mapped_column(String(16))  # job, ingest, workflow_run, record
    repo: Mapped[str] = mapped_column(String(200), index=True)
    pr: Mapped[int | None] = mapped_column(Integer)
    base_sha: Mapped[str | None] = mapped_column(String(64))  # None: a record
    head_sha: Mapped[str] = mapped_column(String(64), index=True)
    verdict: Mapped[str | None] = mapped_column(String(16))  # None: a record
    workload: Mapped[str] = mapped_column(String(300))
    gpu_class: Mapped[str] = mapped_column(String(300))
    report_json: Mapped[str] = mapped_column(Text)  # the report, or the record
    out_dir: Mapped[str | None] = mapped_column(Text)  # report, picture and traces on disk
    # a record's repository, commit and series (guard.service._records.upload_key): a second upload
    # of that commit's record finds this row, so main's history keeps one run of it per series
    upload_key: Mapped[str | None] = mapped_column(String(64))
    created_s: Mapped[float] = mapped_column(Float)


class Sample(Base):
    """One process's figures: an arm's repeat at one batch size."""

    __tablename__ = "samples"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id"), index=True)
    arm: Mapped[str] = mapped_column(String(100))
    batch_size: Mapped[int] = mapped_column(Integer)
    repeat: Mapped[int] = mapped_column(Integer)
    gpu_ms_per_step: Mapped[float] = mapped_column(Float)
    tok_per_s: Mapped[float | None] = mapped_column(Float)


class Verdict(Base):
    __tablename__ = "verdicts"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id"), index=True)
    batch_size: Mapped[int] = mapped_column(Integer)
    verdict: Mapped[str] = mapped_column(String(16))
    gpu_ms_change_pct: Mapped[float | None] = mapped_column(Float)
    tok_per_s_change_pct: Mapped[float | None] = mapped_column(Float)


class MainPoint(Base):
    """The default branch's figure at one commit, for one series (workload, batch size, GPU class)."""

    __tablename__ = "main_points"
    __table_args__ = (Index("ix_main_points_series", "repo", "workload", "batch_size", "gpu_class"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    repo: Mapped[str] = mapped_column(String(200))
    workload: Mapped[str] = mapped_column(String(300))
    batch_size: Mapped[int] = mapped_column(Integer)
    gpu_class: Mapped[str] = mapped_column(String(300))
    sha: Mapped[str] = mapped_column(String(64))
    # position on the branch's first-parent line, older is smaller (git rev-list --count --first-parent)
    commit_order: Mapped[int | None] = mapped_column(Integer)
    subject: Mapped[str] = mapped_column(Text, default="")  # the commit's first line: data, escaped where shown
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id"))
    gpu_ms_per_step: Mapped[float] = mapped_column(Float)  # median over the head arm's processes
    gpu_ms_values: Mapped[list[float]] = mapped_column(JSON, default=list)  # each process's figure
    tok_per_s: Mapped[float | None] = mapped_column(Float)
    gpu_timed: Mapped[bool] = mapped_column(Boolean, default=True)  # False: the host's clock (a CPU run)
    created_s: Mapped[float] = mapped_column(Float)


class ChangePoint(Base):
    """Where a main-branch series moved, between two commits; alerted once confirmed by a
    paired run of the commits on both sides."""

    __tablename__ = "change_points"
    __table_args__ = (Index("ix_change_points_series", "repo", "workload", "batch_size", "gpu_class"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    repo: Mapped[str] = mapped_column(String(200))
    workload: Mapped[str] = mapped_column(String(300))
    batch_size: Mapped[int] = mapped_column(Integer)
    gpu_class: Mapped[str] = mapped_column(String(300))
    before_sha: Mapped[str] = mapped_column(String(64))  # the last commit before the step
    after_sha: Mapped[str] = mapped_column(String(64))  # the first commit after it
    before_order: Mapped[int] = mapped_column(Integer)
    after_order: Mapped[int] = mapped_column(Integer)
    before_ms: Mapped[float] = mapped_column(Float)  # the segments' medians
    after_ms: Mapped[float] = mapped_column(Float)
    change_pct: Mapped[float] = mapped_column(Float)  # after vs before, positive is slower
    direction: Mapped[str] = mapped_column(String(8))  # slower, faster
    p_value: Mapped[float] = mapped_column(Float)
    state: Mapped[str] = mapped_column(String(16), default="candidate")  # candidate, confirmed, dismissed
    confirmation: Mapped[dict[str, Any] | None] = mapped_column(JSON)  # the paired run of both sides
    created_s: Mapped[float] = mapped_column(Float)


class PostedComment(Base):
    """What a job wrote on GitHub: a retried job finds it here, and the sticky marker on GitHub."""

    __tablename__ = "posted_comments"
    __table_args__ = (UniqueConstraint("job_id", name="uq_posted_comments_job"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id"))
    repo: Mapped[str] = mapped_column(String(200))
    pr: Mapped[int | None] = mapped_column(Integer)
    comment_id: Mapped[int | None] = mapped_column(BigInteger)
    url: Mapped[str | None] = mapped_column(Text)
    check_run_id: Mapped[int | None] = mapped_column(BigInteger)
    created_s: Mapped[float] = mapped_column(Float)


class Confirmation(Base):
    """A change point's confirmation: the paired run of the commits on its two sides. The
    unique key is the candidate, its pair of commits and the round: a retried push job, a
    replayed delivery or a restart finds this row and queues nothing again. A second round is
    queued only when the first decided nothing (its job failed, or its run was invalid)."""

    __tablename__ = "confirmations"
    __table_args__ = (
        UniqueConstraint("change_point", "before_sha", "after_sha", "round", name="uq_confirmations_round"),
    )
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    change_point: Mapped[str] = mapped_column(String(16))  # guard.history's ChangePoint.id: series and culprit
    repo: Mapped[str] = mapped_column(String(200), index=True)
    workload: Mapped[str] = mapped_column(String(300))
    batch_size: Mapped[int] = mapped_column(Integer)
    gpu_class: Mapped[str] = mapped_column(String(300))
    before_sha: Mapped[str] = mapped_column(String(64))  # the run's base
    after_sha: Mapped[str] = mapped_column(String(64))  # the run's head
    round: Mapped[int] = mapped_column(Integer, default=1)
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id"), index=True)
    # queued; confirmed, dismissed (decided); undecided (invalid at its batch size), unmatched (another
    # workload, GPU class or batch size was measured); failed (its job failed)
    state: Mapped[str] = mapped_column(String(16), default="queued")
    confirmation: Mapped[dict[str, Any] | None] = mapped_column(JSON)  # guard.history's Confirmation
    created_s: Mapped[float] = mapped_column(Float)
    decided_s: Mapped[float | None] = mapped_column(Float)


class Alert(Base):
    """One culprit's alert: a comment on its pull request and an issue. The row is claimed
    before anything is posted and each post is recorded once it is answered, so a retried
    job continues where the last one stopped, never posting twice."""

    __tablename__ = "alerts"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    dedupe_key: Mapped[str] = mapped_column(String(300), unique=True)  # guard.history's alert_key
    repo: Mapped[str] = mapped_column(String(200), index=True)
    culprit_sha: Mapped[str] = mapped_column(String(64))
    pr_checked: Mapped[bool] = mapped_column(Boolean, default=False)  # the commit's pull request was looked up
    pr: Mapped[int | None] = mapped_column(Integer)
    # the change point ids the posted texts list: one more confirmed later updates both texts
    listed: Mapped[list[str]] = mapped_column(JSON, default=list)
    comment_id: Mapped[int | None] = mapped_column(BigInteger)
    comment_url: Mapped[str | None] = mapped_column(Text)
    issue_number: Mapped[int | None] = mapped_column(Integer)
    issue_url: Mapped[str | None] = mapped_column(Text)
    owner: Mapped[str | None] = mapped_column(String(100))  # the worker posting it now, as its job's lease owner
    state: Mapped[str] = mapped_column(String(16), default="posting")  # posting, posted
    error: Mapped[str | None] = mapped_column(Text)  # why the last try stopped; the next job tries again
    created_s: Mapped[float] = mapped_column(Float)
    posted_s: Mapped[float | None] = mapped_column(Float)


class Bisect(Base):
    """The bisect of a confirmed slowdown whose two sides are more than one commit apart: the
    first commit after `before_sha` on the first-parent line that is slower than it. One per pair
    of commits (the unique key): a replayed delivery, a retried job or a restart finds this row
    and queues nothing again. Its alert waits for it and names the commit it found."""

    __tablename__ = "bisects"
    __table_args__ = (UniqueConstraint("repo", "before_sha", "after_sha", name="uq_bisects_pair"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    repo: Mapped[str] = mapped_column(String(200), index=True)
    before_sha: Mapped[str] = mapped_column(String(64))  # good: the last commit before the step
    after_sha: Mapped[str] = mapped_column(String(64))  # bad: the first commit measured after it
    change_points: Mapped[list[str]] = mapped_column(JSON, default=list)  # guard.history's ChangePoint ids
    workload: Mapped[str] = mapped_column(String(300))
    batch_sizes: Mapped[list[int]] = mapped_column(JSON, default=list)  # the change points' batch sizes
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id"), index=True)
    # queued, running; found, not_found (bad measured not slower), failed (its job failed for good)
    state: Mapped[str] = mapped_column(String(16), default="queued")
    steps: Mapped[list[dict[str, Any]]] = mapped_column(JSON, default=list)  # guard.bisect's BisectStep, as run
    result: Mapped[dict[str, Any] | None] = mapped_column(JSON)  # guard.bisect's BisectResult
    first_bad_sha: Mapped[str | None] = mapped_column(String(64))
    error: Mapped[str | None] = mapped_column(Text)
    created_s: Mapped[float] = mapped_column(Float)
    finished_s: Mapped[float | None] = mapped_column(Float)
