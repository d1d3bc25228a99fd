"""A small GitHub REST client: bounded retries that never repeat a write that may have
happened, rate limits honoured from their headers, pagination by `Link` headers.

Every loop that reads from the network has an end: tries per request, retries and waiting
in all, the time and bytes of one answer, the pages of one list. httpx retries only failed
connects; the retries here are the ones GitHub's answers ask for (rate limits, 5xx)."""

from __future__ import annotations

import datetime
import email.utils
import json
import math
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
# All the retries, and all the waiting, of one client (one `guard comment`) together
MAX_RETRIES = 20
MAX_TOTAL_WAIT_S = 600.0
# One answer, from the request to its last byte: a server that trickles a byte at a time
# never trips httpx's per-read timeout
ANSWER_DEADLINE_S = 120.0
# 100 comments of 65,536 characters, each escaped to up to 6 bytes, fit
MAX_ANSWER_BYTES = 64 << 20
# 100 pages of 100 comments: far beyond any pull request's conversation
MAX_PAGES = 100

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
        self.retries = 0
        self.waited_s = 0.0
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
                response = self._send(method, url, path, json, params)
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:  # nothing was sent
                if last:
                    raise PublishError(f"cannot reach {self.api_url}: {exc}; check GITHUB_API_URL") from exc
                self._wait(self._backoff_s(attempt), f"{method} {path}: cannot connect ({exc})")
                continue
            except httpx.UnsupportedProtocol as exc:  # nothing was sent, and never will be
                raise PublishError(f"cannot use {self.api_url}: {exc} Check GITHUB_API_URL") from exc
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
        return body_json(self.request("GET", path, params=params or None), "GET", path)

    def paginate(self, path: str, per_page: int = 100) -> Iterator[dict[str, Any]]:
        """Every item of a list endpoint, following `Link: rel="next"` to the last page;
        a link back to a page already read, or more than MAX_PAGES, is an error."""
        url: str | None = path
        params: dict[str, Any] | None = {"per_page": per_page}
        seen: set[str] = set()
        while url is not None:
            response = self.request("GET", url, params=params)
            seen.add(str(response.request.url))
            items = body_json(response, "GET", path)
            if not isinstance(items, list):
                raise PublishError(f"GET {path}: expected a list, got {type(items).__name__}")
            for item in items:
                if not isinstance(item, dict):
                    raise PublishError(f"GET {path}: expected a list of objects, got a {type(item).__name__} in it")
                yield item
            url = response.links.get("next", {}).get("url")
            params = None  # the next link carries its own query
            if url is not None and str(httpx.URL(self._url(url))) in seen:
                raise PublishError(f"GET {path}: the `next` link points back to a page already read ({url}); "
                                   "GitHub's pagination is broken, stopping")
            if url is not None and len(seen) >= MAX_PAGES:
                raise PublishError(f"GET {path}: more than {MAX_PAGES} pages; stopping rather than reading forever")

    # -- internals --------------------------------------------------------------------

    def _url(self, path: str) -> str:
        if not path.startswith(("http://", "https://")):
            return f"{self.api_url}/{path.lstrip('/')}"
        # A pagination link is followed only on the API's own host: the token goes nowhere else.
        if urlsplit(path).netloc != urlsplit(self.api_url).netloc:
            raise PublishError(f"refusing to send the token to {urlsplit(path).netloc}, which is not {self.api_url}")
        return path

    def _send(
        self, method: str, url: str, path: str, payload: Any, params: dict[str, Any] | None
    ) -> httpx.Response:
        """One request, its answer read whole within ANSWER_DEADLINE_S and MAX_ANSWER_BYTES."""
        request = self._http.build_request(method, url, json=payload, params=params)
        deadline = time.monotonic() + ANSWER_DEADLINE_S
        streamed = self._http.send(request, stream=True)
        try:
            body = bytearray()
            for chunk in streamed.iter_bytes():
                body += chunk
                if len(body) > MAX_ANSWER_BYTES:
                    raise PublishError(f"{method} {path}: the answer is over {MAX_ANSWER_BYTES >> 20} MiB; "
                                       "that is no GitHub API answer: check GITHUB_API_URL")
                if time.monotonic() > deadline:
                    raise httpx.ReadTimeout(f"the answer took over {ANSWER_DEADLINE_S:g} s", request=request)
        finally:
            streamed.close()
        # the body is decoded already: the new response must not decode it again
        headers = [(k, v) for k, v in streamed.headers.multi_items() if k not in ("content-encoding", "content-length")]
        return httpx.Response(streamed.status_code, headers=headers, content=bytes(body), request=request)

    def _backoff_s(self, attempt: int) -> float:
        return BACKOFF_BASE_S * 2 ** (attempt - 1) * random.uniform(0.8, 1.2)

    def _wait(self, seconds: float, why: str) -> None:
        if self.retries >= MAX_RETRIES or self.waited_s + seconds > MAX_TOTAL_WAIT_S:
            raise PublishError(
                f"{why}; giving up: this run has retried {self.retries} times and waited {self.waited_s:.0f} s "
                f"(at most {MAX_RETRIES} retries and {MAX_TOTAL_WAIT_S:.0f} s in all); run the job again later"
            )
        self.retries += 1
        self.waited_s += seconds
        self._progress(f"{why}; retrying in {seconds:.1f} s")
        self._sleep(seconds)

    def _rate_limit_wait_s(self, response: httpx.Response) -> float | None:
        """Seconds to wait when the response is a rate limit, else None."""
        if response.status_code not in (403, 429):
            return None
        headers = response.headers
        retry_after = _retry_after_s(headers.get("retry-after"))
        if retry_after is not None:
            return retry_after
        reset = _number(headers.get("x-ratelimit-reset"))
        if headers.get("x-ratelimit-remaining") == "0" and reset is not None:
            return max(reset - time.time(), 0.0) + 1.0
        if response.status_code == 429 or "rate limit" in _message(response).lower():
            # also where retry-after or the reset time were there but not a number or a date
            return SECONDARY_LIMIT_WAIT_S
        return None


def _retry_after_s(value: str | None) -> float | None:
    """retry-after is seconds or an HTTP date; None when it is neither."""
    if value is None:
        return None
    seconds = _number(value)
    if seconds is not None:
        return max(seconds, 0.0)
    try:
        parsed = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if parsed.tzinfo is None:  # RFC 9110 dates are GMT
        parsed = parsed.replace(tzinfo=datetime.timezone.utc)
    return max(parsed.timestamp() - time.time(), 0.0)


def _number(value: str | None) -> float | None:
    """A header's finite number, or None: nan and inf are numbers to float() and to no one else."""
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def body_json(response: httpx.Response, method: str, path: str) -> Any:
    """The JSON of an answer; one that is not JSON (an HTML page from a proxy or a web
    server at GITHUB_API_URL) is an error that says where it came from."""
    try:
        return json.loads(response.content)
    except (ValueError, RecursionError):  # RecursionError: nested deeper than any API answer
        kind = response.headers.get("content-type", "no content type").split(";")[0]
        start = response.text[:80].strip().replace("\n", " ")
        raise PublishError(
            f"{method} {path}: HTTP {response.status_code} with a body that is not JSON ({kind}: {start!r}); "
            "GITHUB_API_URL must be the API (https://api.github.com, or https://HOST/api/v3), not a web page"
        ) from None


def _message(response: httpx.Response) -> str:
    try:
        body = json.loads(response.content)
    except (ValueError, RecursionError):
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
