"""POST /github/webhook: the body read up to its cap, its X-Hub-Signature-256 verified over
the raw bytes (githubkit) before anything parses it, then the delivery and its job stored
in one transaction (with procrastinate, the job's take deferred in it too) and 202 answered;
the job runs later, on a worker. A stale trust label is taken off after the answer
(guard.service._trust)."""

from __future__ import annotations

import json
import re
import time
from typing import Any

import anyio
from githubkit.webhooks import verify
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import JSONResponse

from guard.service._events import StaleTrustLabel, decide, repo_name
from guard.service._log import event
from guard.service._queue import record_delivery
from guard.service._state import ServiceState
from guard.service._trust import remove_stale_label

_DELIVERY = re.compile(r"^[A-Za-z0-9-]{1,64}$")
_EVENT = re.compile(r"^[a-z_]{1,64}$")


class TooLarge(Exception):
    pass


async def read_capped(request: Request, limit: int) -> bytes:
    """The body, refused past `limit` bytes whatever Content-Length claims."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise TooLarge
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise TooLarge
    return bytes(body)


def refuse(status: int, error: str, message: str) -> JSONResponse:
    return JSONResponse({"error": error, "message": message}, status_code=status)


async def webhook(request: Request) -> JSONResponse:
    started = time.monotonic()
    answer, fields = await _answer(request)
    event("delivery", status=answer.status_code, **fields, ms=round((time.monotonic() - started) * 1e3, 1))
    return answer


async def _answer(request: Request) -> tuple[JSONResponse, dict[str, Any]]:
    """The answer to a delivery, and what the log says of it."""
    state: ServiceState = request.app.state.guard
    settings = state.settings
    if settings.webhook_secret is None:
        return _refused(503, "no-secret", "this service has no webhook secret: set GUARD_WEBHOOK_SECRET or "
                                        "--webhook-secret-file, as the App's webhook secret")
    try:
        body = await read_capped(request, settings.max_body_bytes)
    except TooLarge:
        return _refused(413, "too-large", f"a delivery is at most {settings.max_body_bytes:,} bytes")
    signature = request.headers.get("x-hub-signature-256", "")
    # only SHA-256: a delivery signed with SHA-1 alone (X-Hub-Signature) is refused
    if not signature.startswith("sha256=") or not verify(settings.webhook_secret.get_secret_value(), body, signature):
        return _refused(401, "bad-signature", "X-Hub-Signature-256 is missing or does not match the body "
                                            "under this service's webhook secret")
    delivery = request.headers.get("x-github-delivery", "")
    event_name = request.headers.get("x-github-event", "")
    if not _DELIVERY.match(delivery) or not _EVENT.match(event_name):
        return _refused(400, "bad-headers", "X-GitHub-Delivery and X-GitHub-Event must be GitHub's")
    try:
        payload = json.loads(body)
    except (ValueError, RecursionError):
        payload = None
    if not isinstance(payload, dict):
        return _refused(400, "not-json", "the body is not a JSON object")
    decision = decide(event_name, payload, settings.trust_label, settings.report_workflows,
                      settings.app.app_id if settings.app else None)
    recorded = await anyio.to_thread.run_sync(
        lambda: record_delivery(state.sessions, delivery, event_name, payload, decision), limiter=state.writers)
    if state.queue is not None:
        await state.queue.enqueue_again(state.sessions, recorded)
    after = None
    if isinstance(decision, StaleTrustLabel) and not recorded.duplicate and state.app is not None:
        after = BackgroundTask(remove_stale_label, state.sessions, state.app, delivery, decision)
    return JSONResponse(recorded.model_dump(), status_code=202, background=after), {
        "delivery": delivery, "github_event": event_name, "repo": repo_name(payload), "job": recorded.job,
        "duplicate": recorded.duplicate, "ignored": recorded.ignored}


def _refused(status: int, error: str, message: str) -> tuple[JSONResponse, dict[str, Any]]:
    return refuse(status, error, message), {"refused": error}

