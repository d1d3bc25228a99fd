"""What a job that failed for good leaves. One that posts a Check Run when it succeeds (a pull
request's, a rerun's, a workflow run's report) gets it concluded `failure`, saying what failed
and what to do, so the gate is red rather than missing; a confirmation's candidates stay
candidates and may get another round; a bisect's alert waits no more and goes out naming the
range's end. Called only once the job is failed in the database: a
job that will be retried after its lease expires is not concluded early."""

from __future__ import annotations

import logging

from sqlalchemy.orm import sessionmaker

from guard._errors import GuardError
from guard._types import REFUSALS, FailureKind
from guard.publish import JobFailure
from guard.service._alerts import raise_alerts
from guard.service._bisect import BISECT_KIND, bisect_failed
from guard.service._confirm import confirmation_failed, confirming_job
from guard.service._github_app import GitHubApp
from guard.service._post import Posted, post_failed_check, remember, server_url
from guard.service._tables import Job

logger = logging.getLogger("guard.service")

# the kinds whose jobs post a Check Run; a push's and a confirmation's measure main and post none
CHECKED_KINDS = ("pull_request", "command", "rerun", "workflow_run")


def conclude_failed(sessions: sessionmaker, app: GitHubApp | None, job: Job, failure: FailureKind | None,
                    error: str) -> None:
    """`failure` None or a refusal: nothing to post (see guard.service._job.JobOutcome). Never raises: the
    job is failed already, with its own error, and the worker goes on to the next."""
    try:
        _conclude(sessions, app, job, failure, error)
    except Exception as exc:  # noqa: BLE001  # GitHub or the database away: the log says what was not done
        message = exc.message if isinstance(exc, GuardError) else f"{type(exc).__name__}: {exc}"
        logger.warning("job %d: could not record its failure on GitHub: %s", job.id, message)


def _conclude(sessions: sessionmaker, app: GitHubApp | None, job: Job, failure: FailureKind | None,
              error: str) -> None:
    with sessions() as session:
        confirming = confirming_job(session, job)
    if confirming is not None:
        confirmation_failed(sessions, confirming.id)
        return
    if job.kind == BISECT_KIND:
        if bisect_failed(sessions, job.id, error) and app is not None:
            rest = app.rest(app.installation(job.repo, job.installation_id))
            raise_alerts(sessions, rest, job.repo, owner=f"failed-bisect-{job.id}", login=app.login(),
                         server_url=server_url(app.api_url))
        return
    if failure is None or failure in REFUSALS or app is None or not job.head_sha or job.kind not in CHECKED_KINDS:
        return
    rest = app.rest(app.installation(job.repo, job.installation_id))
    check = post_failed_check(rest, job.repo, job.head_sha, JobFailure(kind=failure, detail=error, job_id=job.id))
    remember(sessions, job.id, job.repo, job.pr, Posted(comment_action="skipped", check_run_id=check))
