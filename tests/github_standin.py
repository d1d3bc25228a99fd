"""A stand-in for the parts of the GitHub REST API the guard uses, served over real HTTP
on loopback. It keeps state (comments, statuses), pages lists with `Link` headers,
checks the token, refuses bodies over 65,536 characters with 422, and plays faults that
a test plans: 5xx answers (before or after the write happened), dropped connections,
rate limits with `retry-after` or reset headers (well formed or not), and the answers of
a broken server or proxy: an HTML page with status 200, a `next` link back to the same
page or on to pages without end, a body trickled a byte at a time."""

from __future__ import annotations

import json
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

MAX_BODY = 65_536


@dataclass
class Fault:
    method: str
    path: str  # regex over the path without query
    # "5xx", "5xx-after-write", "drop-after-write", "retry-after", "reset", "secondary";
    # "html-200", "self-next", "endless-next", "trickle"
    kind: str
    times: int = 1
    status: int = 502
    wait_s: float = 0.0
    header: str | None = None  # retry-after or x-ratelimit-reset sent as this text, as it is


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    token: str | None
    body: Any


@dataclass
class State:
    users: dict[str, str | None]  # token -> login; None: a token that may not GET /user (the Actions token)
    comments: dict[tuple[str, int], list[dict[str, Any]]] = field(default_factory=dict)
    statuses: dict[tuple[str, str], list[dict[str, Any]]] = field(default_factory=dict)
    faults: list[Fault] = field(default_factory=list)
    log: list[Request] = field(default_factory=list)
    next_id: int = 1000
    lock: threading.Lock = field(default_factory=threading.Lock)


class GitHubStandIn:
    """`with GitHubStandIn({"tok": "someone"}) as api:` serves on `api.url` until the block ends."""

    def __init__(self, users: dict[str, str | None], prefix: str = "") -> None:
        self.state = State(users=users)
        self.prefix = prefix  # "/api/v3" to stand in for GitHub Enterprise Server
        state, prefix_ = self.state, prefix

        class Handler(_Handler):
            pass

        Handler.state = state
        Handler.prefix = prefix_
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}{self.prefix}"

    def __enter__(self) -> GitHubStandIn:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    # -- test helpers -----------------------------------------------------------------

    def plan(
        self, method: str, path: str, kind: str, times: int = 1, status: int = 502, wait_s: float = 0.0,
        header: str | None = None,
    ) -> None:
        self.state.faults.append(Fault(method, path, kind, times, status, wait_s, header))

    def add_comment(self, repo: str, pr: int, login: str, body: str) -> dict[str, Any]:
        with self.state.lock:
            return _create_comment(self.state, repo, pr, login, body, "http://stand-in")

    def comments(self, repo: str, pr: int) -> list[dict[str, Any]]:
        return list(self.state.comments.get((repo, pr), []))

    def statuses(self, repo: str, sha: str) -> list[dict[str, Any]]:
        return list(self.state.statuses.get((repo, sha), []))

    def requests(self, method: str | None = None, path: str = "") -> list[Request]:
        return [r for r in self.state.log if (method is None or r.method == method) and re.search(path, r.path)]


def _create_comment(state: State, repo: str, pr: int, login: str, body: str, base: str) -> dict[str, Any]:
    state.next_id += 1
    comment = {
        "id": state.next_id,
        "body": body,
        "user": {"login": login},
        "html_url": f"{base}/{repo}/pull/{pr}#issuecomment-{state.next_id}",
    }
    state.comments.setdefault((repo, pr), []).append(comment)
    return comment


class _Handler(BaseHTTPRequestHandler):
    state: State
    prefix: str
    protocol_version = "HTTP/1.1"

    def log_message(self, *_: object) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PATCH(self) -> None:
        self._handle("PATCH")

    def do_DELETE(self) -> None:
        self._handle("DELETE")

    # -- dispatch ---------------------------------------------------------------------

    def _handle(self, method: str) -> None:
        parts = urlsplit(self.path)
        path = parts.path.removeprefix(self.prefix)
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        body = json.loads(raw) if raw else None
        auth = self.headers.get("authorization", "")
        token = auth.removeprefix("Bearer ") if auth.startswith("Bearer ") else None
        state = self.state
        with state.lock:
            state.log.append(Request(method, path, parse_qs(parts.query), token, body))
            fault = self._take_fault(method, path)
        if token is None or token not in state.users:
            return self._send(401, {"message": "Bad credentials"})
        if fault is not None and fault.kind in ("5xx", "retry-after", "reset", "secondary", "html-200"):
            return self._send_fault(fault)
        with state.lock:
            status, payload, headers = self._route(method, path, parse_qs(parts.query), token, body)
        if fault is not None and fault.kind == "self-next":
            headers = headers | {"link": f'<http://{self.headers["host"]}{self.path}>; rel="next"'}
        if fault is not None and fault.kind == "endless-next":
            page = int(parse_qs(parts.query).get("page", ["1"])[0])
            fault.times += 1  # every later page too
            headers = headers | {"link": f'<http://{self.headers["host"]}{parts.path}?page={page + 1}>; rel="next"'}
        if fault is not None and fault.kind == "trickle":
            return self._trickle(status, payload, headers, fault.wait_s)
        if fault is not None and fault.kind == "5xx-after-write":
            return self._send(fault.status, {"message": "Server Error"})
        if fault is not None and fault.kind == "drop-after-write":
            self.close_connection = True
            self.connection.shutdown(2)  # the write happened; no answer comes
            return None
        return self._send(status, payload, headers)

    def _take_fault(self, method: str, path: str) -> Fault | None:
        for fault in self.state.faults:
            if fault.times > 0 and fault.method == method and re.fullmatch(fault.path, path):
                fault.times -= 1
                return fault
        return None

    def _send_fault(self, fault: Fault) -> None:
        if fault.kind == "5xx":
            return self._send(fault.status, {"message": "Server Error"})
        if fault.kind == "retry-after":
            value = fault.header if fault.header is not None else f"{fault.wait_s:g}"
            return self._send(429, {"message": "Too many requests"}, {"retry-after": value})
        if fault.kind == "reset":
            reset = fault.header if fault.header is not None else str(int(time.time() + fault.wait_s))
            return self._send(
                403, {"message": "API rate limit exceeded"},
                {"x-ratelimit-remaining": "0", "x-ratelimit-reset": reset},
            )
        if fault.kind == "html-200":  # a web server or a captive proxy where the API should be
            page = b"<!DOCTYPE html>\n<html><head><title>Sign in</title></head><body>Sign in</body></html>\n"
            self.send_response(200)
            self.send_header("content-type", "text/html; charset=utf-8")
            self.send_header("content-length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)
            return None
        return self._send(403, {"message": "You have exceeded a secondary rate limit."})

    def _trickle(self, status: int, payload: Any, headers: dict[str, str], every_s: float) -> None:
        """The answer chunked, one byte per `every_s`: each read is quick, the whole is not."""
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("transfer-encoding", "chunked")
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        try:
            for byte in data:
                self.wfile.write(b"1\r\n" + bytes([byte]) + b"\r\n")
                self.wfile.flush()
                time.sleep(every_s)
            self.wfile.write(b"0\r\n\r\n")
        except OSError:  # the client gave up
            self.close_connection = True

    def _route(
        self, method: str, path: str, query: dict[str, list[str]], token: str, body: Any
    ) -> tuple[int, Any, dict[str, str]]:
        state = self.state
        base = f"http://{self.headers['host']}"
        login = state.users[token]
        if path == "/user" and method == "GET":
            if login is None:
                return 403, {"message": "Resource not accessible by integration"}, {}
            return 200, {"login": login, "type": "User"}, {}
        writer = login or "github-actions[bot]"
        match = re.fullmatch(r"/repos/([^/]+/[^/]+)/issues/(\d+)/comments", path)
        if match:
            repo, pr = match[1], int(match[2])
            if method == "GET":
                return self._page(state.comments.get((repo, pr), []), query, base + self.prefix + path)
            if method == "POST":
                if len(body["body"]) > MAX_BODY:
                    return 422, {"message": "Validation Failed", "errors": [{"message": "body is too long"}]}, {}
                return 201, _create_comment(state, repo, pr, writer, body["body"], base), {}
        match = re.fullmatch(r"/repos/([^/]+/[^/]+)/issues/comments/(\d+)", path)
        if match:
            repo, comment_id = match[1], int(match[2])
            found = [
                (key, c) for key, items in state.comments.items() if key[0] == repo
                for c in items if c["id"] == comment_id
            ]
            if not found:
                return 404, {"message": "Not Found"}, {}
            key, comment = found[0]
            if comment["user"]["login"] != writer:
                return 403, {"message": "Must have admin rights to Repository."}, {}
            if method == "PATCH":
                if len(body["body"]) > MAX_BODY:
                    return 422, {"message": "Validation Failed", "errors": [{"message": "body is too long"}]}, {}
                comment["body"] = body["body"]
                return 200, comment, {}
            if method == "DELETE":
                state.comments[key].remove(comment)
                return 204, None, {}
        match = re.fullmatch(r"/repos/([^/]+/[^/]+)/statuses/([0-9a-f]{40})", path)
        if match and method == "POST":
            status = dict(body) | {"id": len(state.statuses) + 1, "creator": {"login": writer}}
            state.statuses.setdefault((match[1], match[2]), []).append(status)
            return 201, status, {}
        return 404, {"message": "Not Found"}, {}

    def _page(self, items: list[Any], query: dict[str, list[str]], url: str) -> tuple[int, Any, dict[str, str]]:
        per_page = min(int(query.get("per_page", ["30"])[0]), 100)
        page = int(query.get("page", ["1"])[0])
        last = max(1, -(-len(items) // per_page))
        chunk = items[(page - 1) * per_page: page * per_page]
        links = []
        if page < last:
            links.append(f'<{url}?per_page={per_page}&page={page + 1}>; rel="next"')
        links.append(f'<{url}?per_page={per_page}&page={last}>; rel="last"')
        return 200, chunk, {"link": ", ".join(links)}

    def _send(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = b"" if payload is None else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)
