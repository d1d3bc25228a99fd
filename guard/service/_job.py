"""One job, start to end, on this host: the pull request's shas (and, for a `/guard run`
comment, its sender's write access), the clone fetched, the measuring command run with the
lease kept alive, its report read back and checked like `guard comment` checks one, stored,
and posted as the App. A push's run adds to main's history and queues the confirmation of new
change points; a confirmation's run decides them, and a confirmed slowdown is alerted, once a
bisect (its own job, a run of the measuring command per step) found its culprit where the
change point spans more than one commit.

The measuring command is `guard run` (the pipeline) unless the service was given another;
it gets the job in GUARD_JOB_* variables and none of the service's secrets."""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from pydantic import BaseModel
from sqlalchemy.orm import sessionmaker

from guard._errors import GitError, GuardError
from guard._types import FailureKind, is_commit_sha
from guard.checkout import clean, default_cache_dir
from guard.publish import PublishError
from guard.publish import GitHub as RestClient
from guard.report import Report, ReportError, UnfoundedReport, read_report
from guard.service._alerts import raise_alerts
from guard.service._artifact import report_of_workflow_run
from guard.service._bisect import BISECT_KIND, queue_due_bisects, run_bisect_job
from guard.service._checkout import fetch_clone, first_parent_position
from guard.service._confirm import CONFIRM_KIND, apply_confirmation_run, confirming_job, detect_and_confirm
from guard.service._github_app import GitHubApp
from guard.service._log import event
from guard.service._post import post, remember, server_url
from guard.service._queue import update_job
from guard.service._records import CommitInfo, store_run
from guard.service._settings import ServiceSettings
from guard.service._tables import Job

logger = logging.getLogger("guard.service")

LOG_TAIL_CHARS = 2_000
POLL_S = 0.25  # how soon a running command is stopped once its lease is lost
_SECRET_ENV = ("GUARD_WEBHOOK_SECRET", "GITHUB_TOKEN", "GH_TOKEN")
_PR_SET_PDEATHSIG = 1


class JobOutcome(BaseModel):
    error: str | None = None
    # what kind of failure the error is, for its Check Run (none for a refusal); None with an error:
    # nothing to post, as there is no App to post with
    failure: FailureKind | None = None
    run_id: int | None = None
    lost: bool = False  # the lease went to another worker, or the service is stopping: not finished here
    fields: dict[str, object] = {}


class JobContext(BaseModel, arbitrary_types_allowed=True):
    settings: ServiceSettings
    sessions: sessionmaker
    app: GitHubApp | None
    owner: str
    gpu: str | None
    lost: threading.Event  # set once the lease went to another worker: stop, finish nothing
    stopping: threading.Event


def run_job(job: Job, ctx: JobContext) -> JobOutcome:
    started = time.monotonic()
    event("job", phase="started", job=job.id, kind=job.kind, repo=job.repo, pr=job.pr, head_sha=job.head_sha,
          attempt=job.attempts, worker=ctx.owner)
    outcome: JobOutcome | None = None
    try:
        outcome = _run(job, ctx)
    except GuardError as exc:
        outcome = JobOutcome(error=exc.message, failure=failure_kind(exc))
    finally:  # an internal error too: its line says so, and the worker's own handling follows
        event("job", phase="ended", job=job.id, kind=job.kind, repo=job.repo,
              outcome="internal-error" if outcome is None else "lost" if outcome.lost
              else "failed" if outcome.error is not None else "done",
              failure=outcome.failure if outcome else None, run=outcome.run_id if outcome else None,
              seconds=round(time.monotonic() - started, 2))
    return outcome


def failure_kind(exc: GuardError) -> FailureKind:
    if isinstance(exc, GitError):
        return "fetch"
    if isinstance(exc, (ReportError, UnfoundedReport)):
        return "report-refused"
    if isinstance(exc, PublishError):
        return "github"
    return "internal"


def _refused(kind: FailureKind, why: str) -> JobOutcome:
    """A `/guard run` refused before it ran: its error names the kind first."""
    return JobOutcome(error=f"{kind}: {why}", failure=kind)


def _unpinned(job: Job, pull: dict, head: str) -> str | None:
    """Why a `/guard run` may not measure the pull request's head as it is now, or None. The
    command names the commit its author reviewed (`/guard run SHA`), and a head that moved
    since is refused: the code that runs is the code that was read. A pull request from a fork
    is measured only at a named commit, as anyone can push to a fork's branch."""
    named = (job.detail or {}).get("named_sha")
    if named:
        if head.startswith(named):
            return None
        return (f"the pull request's head is now {head[:12]}, not the {named[:12]} the command named; "
                f"review it and comment `/guard run {head[:12]}` to measure it")
    repos = [((pull.get(side) or {}).get("repo") or {}).get("full_name") for side in ("head", "base")]
    if repos[0] != repos[1]:
        return (f"a pull request from a fork is measured only at the commit its reviewer names; "
                f"comment `/guard run {head[:12]}` once you have read that commit")
    return None


def _run(job: Job, ctx: JobContext) -> JobOutcome:
    rest = None
    if ctx.app is not None:
        rest = ctx.app.rest(ctx.app.installation(job.repo, job.installation_id))
    if job.kind == "command":
        if rest is None:
            return JobOutcome(error="cannot check the sender's write access: the service has no App credentials")
        if not ctx.app.can_write(rest, job.repo, job.sender or ""):
            return _refused("not-permitted", f"{job.sender} has no write access to {job.repo}")
        pull = rest.get(f"/repos/{job.repo}/pulls/{job.pr}")
        shas = [(pull.get(side) or {}).get("sha") if isinstance(pull, dict) else None for side in ("base", "head")]
        if not all(is_commit_sha(s) for s in shas):
            return JobOutcome(error=f"GET /repos/{job.repo}/pulls/{job.pr} gave no base and head shas",
                              failure="github")
        refused = _unpinned(job, pull, shas[1])
        if refused is not None:
            return _refused("not-pinned", refused)
        job.base_sha, job.head_sha = shas
        update_job(ctx.sessions, job.id, ctx.owner, base_sha=job.base_sha, head_sha=job.head_sha)
    if ctx.settings.dispatch_workflow and job.kind != "workflow_run":
        if rest is None:
            return JobOutcome(error="cannot dispatch the measuring workflow: the service has no App credentials")
        if _repeats(job) is not None:  # the workflow's inputs hold none: it would measure with another count
            return _refused("not-dispatched", "`/guard run --repeats N` runs on the service's own workers or its "
                                              "procrastinate queue; the dispatched workflow takes the repeats of "
                                              "guard.toml (measure.repeats)")
        return _dispatch(job, ctx, rest)
    out_dir = ctx.settings.work_dir / "jobs" / str(job.id) / f"attempt-{job.attempts}"
    out_dir.mkdir(parents=True, exist_ok=True)
    commit = None
    if job.kind == "workflow_run":
        if rest is None:
            return JobOutcome(error="cannot fetch the workflow run's report: the service has no App credentials")
        report = report_of_workflow_run(rest, job.repo, int(job.detail["workflow_run_id"]), out_dir)
        source = "workflow_run"
    else:
        if not (job.base_sha and job.head_sha and job.clone_url):
            return JobOutcome(error="the job has no base, head or clone URL to measure", failure="internal")
        token = ctx.app.token(ctx.app.installation(job.repo, job.installation_id)) if ctx.app else None
        clone = fetch_clone(ctx.settings.work_dir, job.repo, job.clone_url, [job.base_sha, job.head_sha], token)
        if job.kind == BISECT_KIND:
            return _bisect(job, ctx, rest, clone, out_dir.parent)
        finished = _measure(job, ctx, clone, out_dir)
        if finished is not None:
            return finished
        report = read_report(out_dir / "report.json")  # decided again from its numbers, as `guard comment` does
        source = "job"
        if job.kind == "push":
            commit = CommitInfo(**dict(zip(("order", "subject"), first_parent_position(clone, job.head_sha))))
    head = report.arm(report.head).sha
    if head != job.head_sha or (job.base_sha and report.arm(report.base).sha != job.base_sha):
        return JobOutcome(error=f"the report is for {report.arm(report.base).sha[:12]}..{head[:12]}, "
                                f"not the job's {str(job.base_sha)[:12]}..{str(job.head_sha)[:12]}",
                          failure="report-mismatch")
    with ctx.sessions() as session:
        confirming = confirming_job(session, job)
    run_id = store_run(ctx.sessions, report, repo=job.repo, source=source, pr=job.pr, job_id=job.id,
                       out_dir=str(out_dir), main_branch=job.kind == "push", commit=commit)
    if job.kind == "push":
        detect_and_confirm(ctx.sessions, job.repo, job)
    if confirming is not None:
        apply_confirmation_run(ctx.sessions, confirming.id, report, run_id)
    if (job.kind == "push" or confirming is not None) and not ctx.settings.dispatch_workflow:
        # a confirmed slowdown over several commits: its bisect first (it runs here, step after step)
        queue_due_bisects(ctx.sessions, job.repo, confirming or job)
    if job.kind == "push" or confirming is not None:
        # main's history posts nothing but alerts: those this run confirmed, and any an earlier try left unposted
        if rest is not None:
            _alert(job, ctx, rest)
    elif rest is not None:
        _post(job, ctx, rest, report)
    return JobOutcome(run_id=run_id)


class _StepEnded(Exception):
    """A bisect's step ended without a report to place it by: the job ends with this outcome."""

    def __init__(self, outcome: JobOutcome) -> None:
        super().__init__(outcome.error or "lost")
        self.outcome = outcome


def _bisect(job: Job, ctx: JobContext, rest: RestClient | None, clone: Path, job_dir: Path) -> JobOutcome:
    """guard.bisect's search with the measuring command as each step (good as base), then the
    alert the bisect held, now naming the commit it found."""
    def measure(good: str, sha: str, step_dir: Path) -> Report:
        ended = _measure(job, ctx, clone, step_dir, base=good, head=sha)
        if ended is not None:
            raise _StepEnded(ended)
        report = read_report(step_dir / "report.json")
        if (report.arm(report.base).sha, report.arm(report.head).sha) != (good, sha):
            raise _StepEnded(JobOutcome(error=f"a bisect step's report is for {report.arm(report.base).sha[:12]}.."
                                              f"{report.arm(report.head).sha[:12]}, not {good[:12]}..{sha[:12]}",
                                        failure="report-mismatch"))
        return report

    try:
        run_bisect_job(ctx.sessions, job, clone, job_dir, measure,
                       lambda message: logger.info("job %d: %s", job.id, message))
    except _StepEnded as ended:
        return ended.outcome
    if rest is not None:
        _alert(job, ctx, rest)
    return JobOutcome()


def _dispatch(job: Job, ctx: JobContext, rest: RestClient) -> JobOutcome:
    """The measurement as a workflow_dispatch to the repository's self-hosted GPU runners; its
    report comes back as a workflow_run delivery. A dispatch that may have happened is not sent
    again: the job fails saying so, as a second one would measure the pair twice."""
    workflow = ctx.settings.dispatch_workflow
    # the workflow's run-name carries guard-job: its workflow_run delivery finds this job again
    inputs = {"base": job.base_sha, "head": job.head_sha, "pr": str(job.pr or ""), "guard-job": str(job.id)}
    try:
        rest.request("POST", f"/repos/{job.repo}/actions/workflows/{workflow}/dispatches",
                     json={"ref": ctx.settings.dispatch_ref, "inputs": inputs})
    except PublishError as exc:
        return JobOutcome(error=exc.message, failure="dispatch")
    return JobOutcome()


def _alert(job: Job, ctx: JobContext, rest: RestClient) -> None:
    """The alerts due: what cannot be posted now is posted by the repository's next such job."""
    try:
        login = ctx.app.login()
    except GuardError as exc:
        logger.warning("job %d: no alerts posted now: %s", job.id, exc.message)
        return
    raise_alerts(ctx.sessions, rest, job.repo, owner=ctx.owner, login=login,
                 server_url=server_url(ctx.settings.api_url))


def _post(job: Job, ctx: JobContext, rest: RestClient, report: Report) -> None:
    posted = post(rest, report, repo=job.repo, pr=job.pr, job_id=job.id, login=ctx.app.login(),
                  mode=ctx.settings.comment_mode, server_url=server_url(ctx.settings.api_url),
                  undecided=ctx.settings.undecided_conclusion)
    remember(ctx.sessions, job.id, job.repo, job.pr, posted)


def _clean_unused_builds(clone: Path, days: float | None) -> None:
    """The clone's builds (its cache in .git) that no job has built or reused for `days`: left,
    one per pull request head, they would fill the host's disk. A build a running job holds
    stays; a failure is said and leaves the job's outcome as it was."""
    if days is None:
        return
    try:
        done = clean(clone, default_cache_dir(clone), unused_for_s=days * 86400)
    except (GuardError, OSError) as exc:
        logger.warning("could not clean the builds of %s: %s", clone, exc)
        return
    if done.builds:
        logger.info("removed %d build(s) of %s unused for %g days", len(done.builds), clone, days)


def _measure(job: Job, ctx: JobContext, clone: Path, out_dir: Path, *, base: str | None = None,
             head: str | None = None) -> JobOutcome | None:
    """Runs the measuring command (on the job's base and head, or a bisect step's); None when
    it left a report to read."""
    base, head = base or job.base_sha, head or job.head_sha
    # a confirmation and a bisect measure the batch sizes of their change points only
    batch_sizes = ",".join(str(b) for b in job.detail.get("batch_sizes", [])) \
        if job.kind in (CONFIRM_KIND, BISECT_KIND) else ""
    # a `/guard run --repeats N` (and a re-run of its check): N processes per arm in place of measure.repeats
    repeats = str(_repeats(job) or "") if job.kind not in (CONFIRM_KIND, BISECT_KIND) else ""
    command = ctx.settings.job_command or [
        sys.executable, "-m", "guard", "run", "--repo", str(clone), "--base", base, "--head", head,
        "--out", str(out_dir), "--github-repo", job.repo, *(["--batch-sizes", batch_sizes] if batch_sizes else []),
        *(["--repeats", repeats] if repeats else []),
    ]
    env = {k: v for k, v in os.environ.items() if k not in _SECRET_ENV}
    env |= {"GUARD_JOB_ID": str(job.id), "GUARD_JOB_REPO": job.repo, "GUARD_JOB_CHECKOUT": str(clone),
            "GUARD_JOB_BASE": base or "", "GUARD_JOB_HEAD": head or "",
            "GUARD_JOB_OUT": str(out_dir), "GUARD_JOB_PR": str(job.pr or ""), "GUARD_JOB_KIND": job.kind,
            "GUARD_JOB_BATCH_SIZES": batch_sizes, "GUARD_JOB_REPEATS": repeats}
    if ctx.gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = ctx.gpu
    log_path = out_dir / "job.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                   env=env, cwd=out_dir, preexec_fn=_die_with_parent)
        waited_s = 0.0
        while True:
            try:
                code = process.wait(timeout=POLL_S)
                break
            except subprocess.TimeoutExpired:
                waited_s += POLL_S
            if ctx.stopping.is_set() or ctx.lost.is_set():
                _kill(process)
                return JobOutcome(lost=True)
            if waited_s > ctx.settings.job_timeout_s:
                _kill(process)
                return JobOutcome(error=f"the measuring command ran over {ctx.settings.job_timeout_s:g} s; "
                                        f"its log is {log_path}", failure="timeout")
    _clean_unused_builds(clone, ctx.settings.cache_unused_days)
    if (out_dir / "report.json").is_file():
        return None
    tail = log_path.read_text(errors="replace")[-LOG_TAIL_CHARS:]
    return JobOutcome(error=f"the measuring command exited {code} without a report ({log_path}): {tail}",
                      failure="no-report")


def _repeats(job: Job) -> int | None:
    """The processes per arm a `/guard run --repeats N` asked for (its delivery checked N's bounds)."""
    asked = (job.detail or {}).get("repeats")
    return asked if type(asked) is int and asked > 0 else None


def _kill(process: subprocess.Popen) -> None:
    process.kill()
    process.wait()


def _die_with_parent() -> None:
    """In the child: killed when the service dies (kill -9 too), so a retried job never runs beside it."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
