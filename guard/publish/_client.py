"""A small GitHub REST client: bounded retries that never repeat a write that may have
happened, rate limits honoured from their headers, pagination by `Link` headers."""

from __future__ import annotations

import email.utils
import random
import time
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlsplit

import httpx

import guard
from guard.publish._errors import MaybeApplied, PublishError

DEFAULT_API_URL = "https://api.github.com"
MAX_TRIES = 5
# Longest wait for a rate limit to reset before giving up; a job that sleeps an hour
# holds a GPU runner for nothing.
MAX_WAIT_S = 300.0
# GitHub asks to wait at least a minute after a secondary rate limit without retry-after.
SECONDARY_LIMIT_WAIT_S = 60.0
BACKOFF_BASE_S = 1.0

Sleep = Callable[[float], None]
Progress = Callable[[str], None]


class GitHub:
    """Talks to one GitHub API root (`GITHUB_API_URL`, GitHub Enterprise Server too)."""

    def __init__(
        self,
        token: str,
        api_url: str = DEFAULT_API_URL,
        *,
        max_tries: int = MAX_TRIES,
        max_wait_s: float = MAX_WAIT_S,
        timeout_s: float = 30.0,
        sleep: Sleep = time.sleep,
        progress: Progress = lambda _: None,
    ) -> None:
        if not token:
            raise PublishError("no GitHub token: set GITHUB_TOKEN for this step (the action passes its `token` input)")
        self.api_url = api_url.rstrip("/")
        self.max_tries = max_tries
        self.max_wait_s = max_wait_s
        self._sleep = sleep
        self._progress = progress
        self._http = httpx.Client(
            headers={
                "Authorization": f"Bearer {token}",
                "Accept": "application/vnd.github+json",
                "X-GitHub-Api-Version": "2022-11-28",
                "User-Agent": f"regression-guard/{guard.__version__}",
            },
            timeout=timeout_s,
            follow_redirects=False,
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> GitHub:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # -- requests ---------------------------------------------------------------------

    def request(
        self, method: str, path: str, *, json: Any = None, params: dict[str, Any] | None = None,
        ok: tuple[int, ...] = (), idempotent: bool | None = None,
    ) -> httpx.Response:
        """One API call with bounded retries. A 2xx response, or one whose status is in `ok`,
        is returned; anything else raises PublishError.

        GET, PATCH, PUT and DELETE are idempotent and retried on 5xx and broken connections.
        A POST is retried only when it certainly did not happen (rate limited, connection
        refused); when it may have happened it raises MaybeApplied, and the caller checks
        before it writes again. `idempotent=True` marks a POST that may safely happen twice."""
        url = self._url(path)
        if idempotent is None:
            idempotent = method.upper() != "POST"
        for attempt in range(1, self.max_tries + 1):
            last = attempt == self.max_tries
            try:
                response = self._http.request(method, url, json=json, params=params)
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:  # nothing was sent
                if last:
                    raise PublishError(f"cannot reach {self.api_url}: {exc}; check GITHUB_API_URL") from exc
                self._wait(self._backoff_s(attempt), f"{method} {path}: cannot connect ({exc})")
                continue
            except httpx.TransportError as exc:  # sent, but no answer: it may have happened
                if not idempotent:
                    raise MaybeApplied(f"{method} {path}: no answer ({exc!r})") from exc
                if last:
                    raise PublishError(f"{method} {path}: no answer after {attempt} tries ({exc!r})") from exc
                self._wait(self._backoff_s(attempt), f"{method} {path}: no answer ({exc!r})")
                continue

            status = response.status_code
            if 200 <= status < 300 or status in ok:
                return response
            limit_wait = self._rate_limit_wait_s(response)
            if limit_wait is not None:
                if last:
                    raise PublishError(f"{method} {path}: still rate limited after {attempt} tries")
                if limit_wait > self.max_wait_s:
                    raise PublishError(
                        f"{method} {path}: rate limited for another {limit_wait:.0f} s, longer than the "
                        f"{self.max_wait_s:.0f} s this job waits; run it again later or use a token with its own limit"
                    )
                self._wait(limit_wait, f"{method} {path}: rate limited (HTTP {status})")
                continue
            if status >= 500:
                if not idempotent:
                    raise MaybeApplied(f"{method} {path}: HTTP {status} {_message(response)}")
                if last:
                    raise PublishError(f"{method} {path}: HTTP {status} after {attempt} tries: {_message(response)}")
                self._wait(self._backoff_s(attempt), f"{method} {path}: HTTP {status}")
                continue
            raise PublishError(_explain_client_error(method, path, response))
        raise AssertionError("unreachable")  # the loop returns or raises on its last try

    def get(self, path: str, **params: Any) -> Any:
        return self.request("GET", path, params=params or None).json()

    def paginate(self, path: str, per_page: int = 100) -> Iterator[dict[str, Any]]:
        """Every item of a list endpoint, following `Link: rel="next"` to the last page."""
        url: str | None = path
        params: dict[str, Any] | None = {"per_page": per_page}
        while url is not None:
            response = self.request("GET", url, params=params)
            items = response.json()
            if not isinstance(items, list):
                raise PublishError(f"GET {path}: expected a list, got {type(items).__name__}")
            yield from items
            url = response.links.get("next", {}).get("url")
            params = None  # the next link carries its own query

    # -- internals --------------------------------------------------------------------

    def _url(self, path: str) -> str:
        if not path.startswith(("http://", "https://")):
            return f"{self.api_url}/{path.lstrip('/')}"
        # A pagination link is followed only on the API's own host: the token goes nowhere else.
        if urlsplit(path).netloc != urlsplit(self.api_url).netloc:
            raise PublishError(f"refusing to send the token to {urlsplit(path).netloc}, which is not {self.api_url}")
        return path

    def _backoff_s(self, attempt: int) -> float:
        return BACKOFF_BASE_S * 2 ** (attempt - 1) * random.uniform(0.8, 1.2)

    def _wait(self, seconds: float, why: str) -> None:
        self._progress(f"{why}; retrying in {seconds:.1f} s")
        self._sleep(seconds)

    def _rate_limit_wait_s(self, response: httpx.Response) -> float | None:
        """Seconds to wait when the response is a rate limit, else None."""
        if response.status_code not in (403, 429):
            return None
        headers = response.headers
        retry_after = headers.get("retry-after")
        if retry_after is not None:
            return _retry_after_s(retry_after)
        if headers.get("x-ratelimit-remaining") == "0" and headers.get("x-ratelimit-reset"):
            reset = float(headers["x-ratelimit-reset"])
            return max(reset - time.time(), 0.0) + 1.0
        if response.status_code == 429 or "rate limit" in _message(response).lower():
            return SECONDARY_LIMIT_WAIT_S
        return None


def _retry_after_s(value: str) -> float:
    """retry-after is seconds or an HTTP date."""
    try:
        return max(float(value), 0.0)
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value)
        return max(parsed.timestamp() - time.time(), 0.0)


def _message(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:200]
    if isinstance(body, dict):
        message = str(body.get("message", ""))
        errors = body.get("errors")
        return f"{message} {errors}" if errors else message
    return str(body)[:200]


def _explain_client_error(method: str, path: str, response: httpx.Response) -> str:
    status = response.status_code
    what = f"{method} {path}: HTTP {status} {_message(response)}".rstrip()
    if status == 401:
        return f"{what}; the token was rejected: check the `token` input"
    if status == 403:
        return (
            f"{what}; the token lacks a permission: the job needs `pull-requests: write` to comment "
            "and `statuses: write` for the commit status"
        )
    if status == 404:
        return f"{what}; check --repo and --pr, and that the token can see the repository"
    return what
