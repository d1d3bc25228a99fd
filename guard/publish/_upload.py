"""The upload of a record to the service (`guard upload`): the record checked here first, as the
service will check it, then sent with the repository's ingest token. The service keeps one run
per commit and series, so a request that may have landed is sent again safely: broken
connections, timeouts and busy answers (5xx, 429) are retried by tenacity, with backoff."""

from __future__ import annotations

import ipaddress
import time
from collections.abc import Callable
from pathlib import Path
from typing import Literal

import httpx
import tenacity
from pydantic import BaseModel, ValidationError

import guard
from guard._types import is_repo_name
from guard.publish._errors import PublishError
from guard.record import read_record

RECORDS_PATH = "/api/v1/records"
UPLOAD_TRIES = 5
FIRST_WAIT_S = 2.0
MOST_WAIT_S = 30.0
TIMEOUT_S = 60.0

Sleep = Callable[[float], None]
Progress = Callable[[str], None]


class UploadError(PublishError):
    """The service refused the record, or did not answer after every try."""


class Uploaded(BaseModel):
    """The service's answer: the run that holds the record, and whether it is new."""

    run: int
    outcome: Literal["created", "unchanged", "replaced"]


class _Busy(Exception):
    """An answer that asks to try again later (5xx, 429)."""

    def __init__(self, response: httpx.Response) -> None:
        super().__init__(f"HTTP {response.status_code}")
        self.response = response


def upload_record(path: Path, service_url: str, repo: str, token: str, *, tries: int = UPLOAD_TRIES,
                  sleep: Sleep = time.sleep, progress: Progress = lambda _: None) -> Uploaded:
    """Sends the record at `path` to the service at `service_url` for `repo` (OWNER/NAME)."""
    if not is_repo_name(repo):
        raise UploadError(f"--repo {repo!r} is not OWNER/NAME")
    if not token:
        raise UploadError("no ingest token: set GUARD_SERVICE_TOKEN for this step (the action passes its "
                          "`service-token` input)")
    url = records_url(service_url)
    read_record(path)  # refused here, with the same words, rather than by the service
    body = path.read_bytes()
    retrying = tenacity.Retrying(
        stop=tenacity.stop_after_attempt(tries),
        wait=tenacity.wait_exponential(multiplier=FIRST_WAIT_S, max=MOST_WAIT_S) + tenacity.wait_random(0, 1),
        retry=tenacity.retry_if_exception_type((httpx.TransportError, _Busy)),
        before_sleep=lambda state: progress(f"upload to {url.host}: {_why(state)}; trying again"),
        sleep=sleep,
        reraise=True,
    )
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json",
               "User-Agent": f"regression-guard/{guard.__version__}"}
    with httpx.Client(timeout=TIMEOUT_S, follow_redirects=False) as client:
        try:
            for attempt in retrying:
                with attempt:
                    response = client.post(url, params={"repo": repo}, content=body, headers=headers)
                    if response.status_code >= 500 or response.status_code == 429:
                        raise _Busy(response)
        except _Busy as exc:
            raise UploadError(f"{url} answered HTTP {exc.response.status_code} to each of {tries} tries: "
                              f"{_message(exc.response)}; the service's log says why") from exc
        except httpx.TransportError as exc:
            raise UploadError(f"no answer from {url} after {tries} tries ({exc!r}); check service-url and that "
                              "the service is up") from exc
    if response.status_code not in (200, 201):
        raise UploadError(f"{url} refused the record (HTTP {response.status_code}): {_message(response)}")
    try:
        return Uploaded.model_validate_json(response.content)
    except ValidationError as exc:
        raise UploadError(f"{url} answered HTTP {response.status_code} with no run: is it regression-guard's "
                          "service? Check service-url") from exc


def records_url(service_url: str) -> httpx.URL:
    """The service's records route. HTTPS, or HTTP to this host only: the token must not cross a
    network in the clear."""
    try:
        base = httpx.URL(service_url.strip())
    except httpx.InvalidURL as exc:
        raise UploadError(f"service-url {service_url!r} is not a URL; give https://HOST[:PORT]") from exc
    if base.scheme not in ("https", "http") or not base.host:
        raise UploadError(f"service-url {service_url!r} is not an http(s) URL; give https://HOST[:PORT]")
    if base.scheme == "http" and not _loopback(base.host):
        raise UploadError(f"service-url {service_url!r} is plain HTTP to another host, which would send the token "
                          "in the clear; give its https:// URL")
    if base.query or base.fragment:
        raise UploadError(f"service-url {service_url!r} has a query or fragment; give https://HOST[:PORT][/PATH]")
    return base.copy_with(path=base.path.rstrip("/") + RECORDS_PATH)


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _why(state: tenacity.RetryCallState) -> str:
    failed = state.outcome.exception() if state.outcome else None
    return str(failed) if isinstance(failed, _Busy) else f"no answer ({failed!r})"


def _message(response: httpx.Response) -> str:
    """The service's own message (its refusals are {"error", "message"}), else the answer's status."""
    try:
        found = response.json().get("message")
    except (ValueError, AttributeError):
        found = None
    return str(found)[:2000] if found else response.reason_phrase or "no message"
