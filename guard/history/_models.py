"""The history of main as data: one series per (repository, workload, batch size, GPU class),
its points in first-parent order, the change points found in it and the alerts they call for."""

from __future__ import annotations

import hashlib
from typing import Literal

from pydantic import BaseModel, Field

from guard._types import CommitSha, RepoName

ChangeState = Literal["candidate", "confirmed", "dismissed"]
Direction = Literal["slower", "faster"]


class GpuClass(BaseModel):
    """What a series is measured on. Two points of one series ran on the same GPU model with the
    same driver and limits: a new driver starts a new series rather than a step in the old one."""

    key: str  # short and stable: a readable stem and a hash of the fields below
    gpu: str | None = None  # model name; None on a CPU-only run
    gpu_capability: str | None = None
    driver: str | None = None
    cuda_driver: str | None = None
    mig_mode: str | None = None
    power_limit_w: float | None = None
    max_sm_clock_mhz: float | None = None
    max_mem_clock_mhz: float | None = None
    cpu: str | None = None  # only where there is no GPU: then the host's CPU model decides


class SeriesKey(BaseModel, frozen=True):
    repo: RepoName
    workload: str  # the workload's entry (and options), see workload_name
    batch_size: int = Field(ge=1)
    gpu_class: str  # GpuClass.key

    @property
    def id(self) -> str:
        return f"{self.repo}|{self.workload}|{self.batch_size}|{self.gpu_class}"


class MainPoint(BaseModel):
    """One commit of main measured: the pushed commit's (the report's head arm's) figures."""

    series: SeriesKey
    sha: CommitSha
    order: int  # position on main's first-parent line, older is smaller; the service counts it
    subject: str = ""  # first line of the commit message, from git: data, escaped where shown
    committed_at: str | None = None  # ISO 8601
    gpu_ms_per_step: float = Field(gt=0, allow_inf_nan=False)  # median over the arm's processes
    gpu_ms_values: list[float] = []  # each process's step time (its mean; schema 11 and older: its median)
    tok_per_s: float | None = None
    gpu_timed: bool = True  # CUDA-event time; False: the host's wall clock (a CPU run)
    run_id: str | None = None  # the service's run that measured it


class Confirmation(BaseModel):
    """A paired, interleaved run of the commits on both sides of a change point."""

    good_sha: CommitSha  # the last commit before the step: the run's base
    bad_sha: CommitSha  # the first commit after it: the run's head
    verdict: str  # the run's verdict (guard.compare.Verdict)
    gpu_ms_change_pct: float | None = None  # head vs base, positive is slower
    run_id: str | None = None


class ChangePoint(BaseModel):
    series: SeriesKey
    before_sha: CommitSha  # last point of the segment before the step
    after_sha: CommitSha  # first point of the segment after it: the culprit when main is measured per commit
    before_order: int
    after_order: int
    before_ms: float  # median of the segment before
    after_ms: float  # median of the segment after
    change_pct: float  # after vs before, positive is slower
    direction: Direction
    p_value: float  # Welch's t-test between the two segments
    state: ChangeState = "candidate"
    confirmation: Confirmation | None = None

    @property
    def id(self) -> str:
        """Stable over recomputation as main grows: the series and the commit where the step lands."""
        return hashlib.sha256(f"{self.series.id}|{self.after_sha}".encode()).hexdigest()[:16]


class PairedRun(BaseModel):
    """What a confirmation asks of the measuring stage: base and head, interleaved on one host."""

    change_point_id: str
    repo: RepoName
    base_sha: CommitSha
    head_sha: CommitSha
    batch_sizes: list[int]
    gpu_class: str


class PullComment(BaseModel):
    repo: RepoName
    pr: int
    sha: CommitSha  # the culprit, the pull request's merge commit on main


class IssueAlert(BaseModel):
    repo: RepoName
    culprit_sha: CommitSha
    labels: list[str] = ["performance-regression"]


class AlertPlan(BaseModel):
    """One alert per culprit commit: every confirmed slowdown it caused, in every series, goes
    into one comment on its pull request (when there is one) and one issue."""

    dedupe_key: str  # the posted-alerts table's key: an alert with a posted key is not planned again
    repo: RepoName
    culprit_sha: CommitSha
    change_points: list[ChangePoint]
    worst_change_pct: float
    comment: PullComment | None
    issue: IssueAlert
