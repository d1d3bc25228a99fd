"""What a bisect measured and found, as bisect.json holds it."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from guard.compare import Verdict

# stopped: a step could not be compared with good (its report says why)
BisectOutcome = Literal["found", "bad_not_slower", "stopped"]


class BisectStep(BaseModel):
    """One paired, interleaved run: a commit between good and bad (the head) against good (the base)."""

    number: int  # 1 is the first run
    sha: str
    subject: str = ""  # first line of the commit message
    position: int  # 1-based place among the commits after good, on bad's first-parent line
    verdict: Verdict
    bad: bool  # the run's verdict is a regression against good
    worst_gpu_ms_change_pct: float | None = None  # head vs good, the slowest batch size's; positive is slower
    worst_batch_size: int | None = None
    threshold_pct: float
    good_build_reused: bool  # good's cached build served this run
    out_dir: str  # the run's report.json and comment.md, relative to the bisect's folder


class BisectResult(BaseModel):
    good_sha: str
    bad_sha: str
    commits: list[str]  # after good up to bad, oldest first, first parent only
    steps: list[BisectStep]  # in the order they ran
    outcome: BisectOutcome
    first_bad_sha: str | None = None
    first_bad_subject: str = ""
    last_good_sha: str | None = None  # the commit before first_bad_sha on the line
