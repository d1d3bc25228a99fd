"""The JSON API: health, jobs, runs, bisects, the default branch's history, and the ingest of a
report.json from a CI job, authenticated by its repository's token and read back like
`guard comment` reads one (schema, size, verdicts decided again from its numbers), or of a
record.json of one default-branch commit, read back the same way into main's history."""

from __future__ import annotations

import hmac
import tempfile
from pathlib import Path
from typing import Literal, TypeVar

import anyio
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse

from guard._errors import GuardError
from guard._types import RepoName
from guard.record import MAX_RECORD_BYTES, RecordError, parse_record
from guard.report import MAX_REPORT_BYTES, read_report
from guard.service._confirm import decided_confirmations
from guard.service._queue import list_jobs
from guard.service._records import StoredRecord, bisect_detail, history, iso, run_detail, store_record, store_run
from guard.service._series import redetect
from guard.service._settings import cannot_yet
from guard.service._state import ServiceState
from guard.service._tables import JOB_STATES, Job
from guard.service._webhook import TooLarge, read_capped, refuse

MAX_JOBS_LISTED = 1000
Q = TypeVar("Q", bound="_Query")


def _state(request: Request) -> ServiceState:
    return request.app.state.guard


async def healthz(request: Request) -> JSONResponse:
    state = _state(request)
    settings = state.settings
    cannot = cannot_yet(settings)
    alive = sum(1 for w in state.workers if w.is_alive())
    if alive == 0 and state.queue is None:
        cannot.append({"what": "run-jobs", "why": "no-workers", "fix": "start with --workers 1 or more"})
    # procrastinate's count per queue: the pool, and each host that took a job
    queues = {"queues": await state.queue.counts()} if state.queue is not None else {}
    return JSONResponse({
        "status": "ok", "database": state.engine.dialect.name, "workers": alive,
        "mode": "dispatch" if settings.dispatch_workflow else settings.queue, "cannot": cannot,
    } | queues)


def job_json(job: Job) -> dict[str, object]:
    return {
        "id": job.id, "delivery": job.delivery, "kind": job.kind, "state": job.state, "repo": job.repo,
        "pr": job.pr, "base_sha": job.base_sha, "head_sha": job.head_sha, "attempts": job.attempts,
        "created_at": iso(job.created_s), "started_at": iso(job.started_s), "finished_at": iso(job.finished_s),
        "error": job.error, "run": job.run_id,
    }


class _Query(BaseModel):
    """A request's query parameters, each checked, none unknown: a bad one is a 400 naming it."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class _JobsQuery(_Query):
    state: Literal[JOB_STATES] | None = None  # type: ignore[valid-type]
    repo: RepoName | None = None
    limit: int = Field(default=100, ge=1, le=MAX_JOBS_LISTED)
    before: int | None = Field(default=None, ge=1)


class _HistoryQuery(_Query):
    repo: RepoName
    workload: str | None = None
    batch_size: int | None = Field(default=None, ge=1)


def _query(request: Request, model: type[Q]) -> Q | JSONResponse:
    """The query parameters as `model`, or the 400 that says which one is wrong and why."""
    given = request.query_params
    repeated = sorted({k for k in given if len(given.getlist(k)) > 1})
    if repeated:
        return refuse(400, "bad-query", f"{repeated[0]} is given more than once; give it once")
    try:
        return model.model_validate(dict(given))
    except ValidationError as exc:
        first = exc.errors()[0]
        name = ".".join(str(part) for part in first["loc"]) or "query"
        why = "is not a parameter here" if first["type"] == "extra_forbidden" else first["msg"].lower()
        known = ", ".join(model.model_fields)
        return refuse(400, "bad-query", f"{name}: {why} (the parameters here: {known})")


async def jobs(request: Request) -> JSONResponse:
    state = _state(request)
    query = _query(request, _JobsQuery)
    if isinstance(query, JSONResponse):
        return query
    found = await run_in_threadpool(list_jobs, state.sessions, query.state, query.repo, query.limit, query.before)
    # the next page: the jobs before the last one listed
    more = {"next_before": found[-1].id} if len(found) == query.limit else {}
    return JSONResponse({"jobs": [job_json(j) for j in found]} | more)


async def run(request: Request) -> JSONResponse:
    found = await run_in_threadpool(run_detail, _state(request).sessions, request.path_params["run_id"])
    if found is None:
        return refuse(404, "no-run", f"no run {request.path_params['run_id']}")
    return JSONResponse(found)


async def bisect(request: Request) -> JSONResponse:
    found = await run_in_threadpool(bisect_detail, _state(request).sessions, request.path_params["bisect_id"])
    if found is None:
        return refuse(404, "no-bisect", f"no bisect {request.path_params['bisect_id']}")
    return JSONResponse(found)


async def history_of(request: Request) -> JSONResponse:
    query = _query(request, _HistoryQuery)
    if isinstance(query, JSONResponse):
        return query
    found = await run_in_threadpool(history, _state(request).sessions, query.repo, query.workload, query.batch_size)
    return JSONResponse(found)


def _may_upload(request: Request, repo: str) -> bool:
    """The request sends the repository's ingest token (--ingest-tokens-file), compared in constant time."""
    expected = _state(request).settings.ingest_tokens.get(repo)
    given = request.headers.get("authorization", "").removeprefix("Bearer ")
    return expected is not None and hmac.compare_digest(given.encode(), expected.get_secret_value().encode())


_NO_UPLOAD = "give repo=OWNER/NAME and its ingest token as `Authorization: Bearer TOKEN`"


async def ingest(request: Request) -> JSONResponse:
    state = _state(request)
    params = request.query_params
    repo = params.get("repo", "")
    if not _may_upload(request, repo):
        return refuse(401, "bad-token", _NO_UPLOAD)
    pr = params.get("pr")
    if pr is not None and not (pr.isdigit() and int(pr) > 0):
        return refuse(400, "bad-pr", "pr is a pull request number")
    try:
        body = await read_capped(request, MAX_REPORT_BYTES)
    except TooLarge:
        return refuse(413, "too-large", f"a report is at most {MAX_REPORT_BYTES:,} bytes")
    main_branch = params.get("main_branch") in ("1", "true")

    def check_and_store() -> int:
        folder = state.settings.work_dir / "ingest"
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, suffix=".json", delete=False) as upload:
            upload.write(body)
        report = read_report(Path(upload.name))
        return store_run(state.sessions, report, repo=repo, source="ingest", pr=int(pr) if pr else None,
                         out_dir=upload.name, main_branch=main_branch)

    try:
        run_id = await run_in_threadpool(check_and_store)
    except GuardError as exc:
        return refuse(422, "unfounded-report", exc.message)
    return JSONResponse({"run": run_id}, status_code=201)


class _RecordQuery(_Query):
    repo: RepoName


async def ingest_record(request: Request) -> JSONResponse:
    """A record of one default-branch commit into main's history: 201 with a new run, 200 with
    the run that already holds this record (a retry) or that now holds it in place of the
    commit's earlier record in the same series."""
    state = _state(request)
    query = _query(request, _RecordQuery)
    if isinstance(query, JSONResponse):
        return query
    if not _may_upload(request, query.repo):
        return refuse(401, "bad-token", _NO_UPLOAD)
    try:
        body = await read_capped(request, MAX_RECORD_BYTES)
    except TooLarge:
        return refuse(413, "too-large", f"a record is at most {MAX_RECORD_BYTES:,} bytes")

    def check_and_store() -> StoredRecord:
        record = parse_record(body, "the upload")
        if not record.measured:
            raise RecordError(f"the upload is the record of {record.arm.sha[:12]}, which was not measured "
                              f"(arm.status {record.arm.status}): it has no figures for main's history")
        stored = store_record(state.sessions, record, repo=query.repo)
        if stored.outcome != "unchanged":  # a new point: the series' change points found again
            with state.sessions() as session:
                decided = decided_confirmations(session, query.repo)
            redetect(state.sessions, query.repo, decided)
        return stored

    try:  # a writer among the deliveries' (guard.service._store.concurrent_writers)
        stored = await anyio.to_thread.run_sync(check_and_store, limiter=state.writers)
    except GuardError as exc:
        return refuse(422, "unfounded-record", exc.message)
    return JSONResponse({"run": stored.run_id, "outcome": stored.outcome},
                        status_code=201 if stored.outcome == "created" else 200)
