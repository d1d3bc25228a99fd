"""What the dashboard's pages show, as the service hands it over: the history of main per
series, and a pull request's runs with their reports. Links are the service's own (built from
its routes and storage), never taken from a report; each is checked to be one a page may hold."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, Field

from guard._types import is_repo_name
from guard.bisect import BisectStep
from guard.compare import Verdict
from guard.history import ChangePoint, MainPoint, SeriesKey
from guard.report import Report


def _page_link(url: str) -> str:
    """A path on the service, or an http(s) address: no javascript:, data: or other scheme."""
    if url.startswith("/") and not url.startswith("//"):
        return url
    if re.match(r"^https?://[^/\s]+", url):
        return url
    raise ValueError(f"not a link the dashboard shows: {url[:80]!r}; give a path on the service or an http(s) URL")


def _repo_name(name: str) -> str:
    if not is_repo_name(name):
        raise ValueError(f"repository {name[:80]!r} is not OWNER/NAME")
    return name


PageLink = Annotated[str, AfterValidator(_page_link)]
RepoName = Annotated[str, AfterValidator(_repo_name)]


class ChangeBisect(BaseModel):
    """The bisect of a change point's two sides, as the service stores it: one per pair of commits."""

    before_sha: str  # good
    after_sha: str  # bad
    state: Literal["queued", "running", "found", "not_found", "failed"]
    first_bad_sha: str | None = None
    steps: list[BisectStep] = []  # in the order they ran
    url: PageLink | None = None  # the bisect in the service's API: its state, job and every step


class SeriesHistory(BaseModel):
    series: SeriesKey
    points: list[MainPoint]  # first-parent order
    change_points: list[ChangePoint] = []
    bisects: list[ChangeBisect] = []  # of its change points' pairs of commits


class PullSummary(BaseModel):
    """One pull request on the repository page: its latest run."""

    pr: int = Field(ge=1)
    title: str = ""  # from GitHub: data, escaped
    head_sha: str
    verdict: Verdict
    runs: int = Field(ge=1)
    url: PageLink  # the pull request's page on the dashboard


class RepoHistory(BaseModel):
    repo: RepoName
    series: list[SeriesHistory]
    pulls: list[PullSummary] = []
    server_url: PageLink = "https://github.com"  # where commits link to


class TraceLink(BaseModel):
    arm: str
    batch_size: int
    repeat: int
    url: PageLink  # where the service keeps the trace


class PullRun(BaseModel):
    run_id: str
    report: Report  # as the service checked it on ingest
    created_at: str | None = None
    report_url: PageLink | None = None  # report.json, as the service stores it
    trace_links: list[TraceLink] = []


class PullRuns(BaseModel):
    repo: RepoName
    pr: int = Field(ge=1)
    title: str = ""
    runs: list[PullRun]  # newest first
    server_url: PageLink = "https://github.com"
    repo_url: PageLink  # the repository's page on the dashboard
