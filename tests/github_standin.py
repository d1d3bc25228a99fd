"""A stand-in for the parts of the GitHub REST API the guard uses, served over real HTTP
on loopback. It keeps state (comments, statuses), pages lists with `Link` headers,
checks the token, refuses bodies over 65,536 characters with 422, and plays faults that
a test plans: 5xx answers (before or after the write happened), dropped connections,
rate limits with `retry-after` or reset headers (well formed or not), and the answers of
a broken server or proxy: an HTML page with status 200, a `next` link back to the same
page or on to pages without end, a body trickled a byte at a time.

As a GitHub App's host (`app=StandInApp(...)`): the App's JWT checked against its public key
(RS256, issuer, expiry), installation tokens minted and counted, collaborator permissions,
pull requests (and those of a commit), check runs, workflow dispatches, workflow-run artifacts,
issues (created, listed by label, edited) and a pull request's labels (removed)."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

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
class StandInApp:
    app_id: str
    public_key_pem: str
    slug: str = "regression-guard"
    installations: dict[str, int] = field(default_factory=dict)  # OWNER/NAME -> installation id


@dataclass
class State:
    users: dict[str, str | None]  # token -> login; None: a token that may not GET /user (the Actions token)
    app: StandInApp | None = None
    bot_logins: dict[str, str] = field(default_factory=dict)  # installation token -> SLUG[bot]
    minted: list[int] = field(default_factory=list)  # installation ids tokens were minted for
    permissions: dict[tuple[str, str], str] = field(default_factory=dict)  # (repo, login) -> admin/write/read
    pulls: dict[tuple[str, int], dict[str, Any]] = field(default_factory=dict)
    check_runs: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    dispatches: list[tuple[str, str, Any]] = field(default_factory=list)  # (repo, workflow, body)
    artifacts: dict[int, tuple[str, bytes]] = field(default_factory=dict)  # workflow run id -> (name, zip)
    commit_pulls: dict[tuple[str, str], list[dict[str, Any]]] = field(default_factory=dict)  # (repo, sha) -> pulls
    issues: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # repo -> issues, oldest first
    labels: dict[tuple[str, int], list[str]] = field(default_factory=dict)  # (repo, issue or pull) -> label names
    on_request: Callable[[Request], None] | None = None  # called after each request is logged
    comments: dict[tuple[str, int], list[dict[str, Any]]] = field(default_factory=dict)
    statuses: dict[tuple[str, str], list[dict[str, Any]]] = field(default_factory=dict)
    faults: list[Fault] = field(default_factory=list)
    log: list[Request] = field(default_factory=list)
    next_id: int = 1000
    lock: threading.Lock = field(default_factory=threading.Lock)


class GitHubStandIn:
    """`with GitHubStandIn({"tok": "someone"}) as api:` serves on `api.url` until the block ends."""

    def __init__(self, users: dict[str, str | None], prefix: str = "", app: StandInApp | None = None) -> None:
        self.state = State(users=users, app=app)
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

    def check_runs(self, repo: str) -> list[dict[str, Any]]:
        return list(self.state.check_runs.get(repo, []))

    def issues(self, repo: str) -> list[dict[str, Any]]:
        return list(self.state.issues.get(repo, []))

    def labels(self, repo: str, number: int) -> list[str]:
        return list(self.state.labels.get((repo, number), []))

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
        scheme, _, token = auth.partition(" ")
        token = token if scheme.lower() in ("bearer", "token") and token else None
        state = self.state
        request = Request(method, path, parse_qs(parts.query), token, body)
        with state.lock:
            state.log.append(request)
            fault = self._take_fault(method, path)
        if state.on_request is not None:
            state.on_request(request)
        blob = re.fullmatch(r"/blobs/(\d+)\.zip", path)
        if blob is not None and method == "GET":
            found = state.artifacts.get(int(blob[1]))
            return self._send_bytes(200, found[1]) if found else self._send(404, {"message": "Not Found"})
        if state.app is not None and _needs_jwt(path):
            return self._as_app(method, path, token)
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

    def _as_app(self, method: str, path: str, token: str | None) -> None:
        """The App's own endpoints: a JWT signed with the App's key, not yet expired."""
        import jwt

        app = self.state.app
        try:
            claims = jwt.decode(token or "", app.public_key_pem, algorithms=["RS256"],
                                options={"require": ["exp", "iat", "iss"]})
        except jwt.PyJWTError as exc:
            return self._send(401, {"message": f"A JSON web token could not be decoded: {exc}"})
        if str(claims["iss"]) != app.app_id:
            return self._send(401, {"message": "Integration not found"})
        if path == "/app" and method == "GET":
            return self._send(200, {"id": int(app.app_id), "slug": app.slug, "name": app.slug})
        match = re.fullmatch(r"/repos/([^/]+/[^/]+)/installation", path)
        if match and method == "GET":
            installation = app.installations.get(match[1])
            if installation is None:
                return self._send(404, {"message": "Not Found"})
            return self._send(200, {"id": installation, "app_id": int(app.app_id)})
        match = re.fullmatch(r"/app/installations/(\d+)/access_tokens", path)
        if match and method == "POST":
            installation = int(match[1])
            if installation not in app.installations.values():
                return self._send(404, {"message": "Not Found"})
            with self.state.lock:
                self.state.minted.append(installation)
                minted = f"ghs_standin_{installation}_{len(self.state.minted)}"
                self.state.users[minted] = None  # GET /user is not for an installation
                self.state.bot_logins[minted] = f"{app.slug}[bot]"
            expires = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 3600))
            return self._send(201, {"token": minted, "expires_at": expires})
        return self._send(404, {"message": "Not Found"})

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
        writer = login or state.bot_logins.get(token, "github-actions[bot]")
        answer = _app_route(state, method, path, body, writer, base)
        if answer is not None:
            return answer
        answer = self._issues(method, path, query, body, writer, base)
        if answer is not None:
            return answer
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

    def _issues(
        self, method: str, path: str, query: dict[str, list[str]], body: Any, writer: str, base: str
    ) -> tuple[int, Any, dict[str, str]] | None:
        """Issues as the alerts use them, and the labels of an issue or a pull request."""
        state = self.state
        match = re.fullmatch(r"/repos/([^/]+/[^/]+)/issues", path)
        if match and method == "POST":
            state.next_id += 1
            issue = {"number": state.next_id, "title": body["title"], "body": body.get("body", ""),
                     "labels": [{"name": n} for n in body.get("labels", [])], "user": {"login": writer},
                     "state": "open", "html_url": f"{base}/{match[1]}/issues/{state.next_id}"}
            state.issues.setdefault(match[1], []).append(issue)
            state.labels[(match[1], issue["number"])] = list(body.get("labels", []))
            return 201, issue, {}
        if match and method == "GET":
            wanted = [n for n in query.get("labels", [""])[0].split(",") if n]
            found = [i for i in state.issues.get(match[1], [])
                     if all(n in state.labels.get((match[1], i["number"]), []) for n in wanted)]
            if query.get("direction", ["desc"])[0] == "desc":
                found = found[::-1]
            return self._page(found, query, base + self.prefix + path)
        match = re.fullmatch(r"/repos/([^/]+/[^/]+)/issues/(\d+)", path)
        if match and method == "PATCH":
            found = [i for i in state.issues.get(match[1], []) if i["number"] == int(match[2])]
            if not found:
                return 404, {"message": "Not Found"}, {}
            found[0].update({k: v for k, v in body.items() if k in ("title", "body", "state")})
            return 200, found[0], {}
        match = re.fullmatch(r"/repos/([^/]+/[^/]+)/issues/(\d+)/labels/([^/]+)", path)
        if match and method == "DELETE":
            names = state.labels.get((match[1], int(match[2])), [])
            if unquote(match[3]) not in names:
                return 404, {"message": "Label does not exist"}, {}
            names.remove(unquote(match[3]))
            return 200, [{"name": n} for n in names], {}
        return None

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

    def _send_bytes(self, status: int, data: bytes) -> None:
        self.send_response(status)
        self.send_header("content-type", "application/zip")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _send(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = b"" if payload is None else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)


def _check_run_refused(body: Any) -> dict[str, str] | None:
    """What GitHub's REST docs ask of a check run, read strictly: a conclusion it knows (a
    client may not set `stale`), a `details_url` of http(s) where one is given (GitHub refuses
    an empty one), and one for `action_required`, whose details are to be found there."""
    if not isinstance(body, dict):
        return None
    conclusion, details = body.get("conclusion"), body.get("details_url")
    if conclusion is not None and conclusion not in CHECK_CONCLUSIONS:
        return {"resource": "CheckRun", "field": "conclusion", "code": "invalid"}
    if details is not None and not (isinstance(details, str) and re.match(r"https?://", details)):
        return {"resource": "CheckRun", "field": "details_url", "code": "custom",
                "message": "details_url must use the http or https scheme"}
    if conclusion == "action_required" and details is None:
        return {"resource": "CheckRun", "field": "details_url", "code": "missing_field",
                "message": "details_url is needed where the conclusion is action_required"}
    return None


# what a client may conclude a check run with (GitHub sets `stale` itself)
CHECK_CONCLUSIONS = ("action_required", "cancelled", "failure", "neutral", "success", "skipped", "timed_out")


def _needs_jwt(path: str) -> bool:
    return path == "/app" or path.startswith("/app/") or bool(re.fullmatch(r"/repos/[^/]+/[^/]+/installation", path))


def _app_route(
    state: State, method: str, path: str, body: Any, writer: str, base: str
) -> tuple[int, Any, dict[str, str]] | None:
    """What an installation token may do beyond comments and statuses."""
    match = re.fullmatch(r"/repos/([^/]+/[^/]+)/collaborators/([^/]+)/permission", path)
    if match and method == "GET":
        permission = state.permissions.get((match[1], match[2]), "read")
        return 200, {"permission": permission, "role_name": permission, "user": {"login": match[2]}}, {}
    match = re.fullmatch(r"/repos/([^/]+/[^/]+)/pulls/(\d+)", path)
    if match and method == "GET":
        pull = state.pulls.get((match[1], int(match[2])))
        return (200, pull, {}) if pull else (404, {"message": "Not Found"}, {})
    match = re.fullmatch(r"/repos/([^/]+/[^/]+)/check-runs(?:/\d+)?", path)
    if match and method in ("POST", "PATCH") and (refused := _check_run_refused(body)) is not None:
        return 422, {"message": "Validation Failed", "errors": [refused]}, {}
    match = re.fullmatch(r"/repos/([^/]+/[^/]+)/check-runs", path)
    if match and method == "POST":
        state.next_id += 1
        run = dict(body) | {"id": state.next_id, "app": {"slug": writer}}
        state.check_runs.setdefault(match[1], []).append(run)
        return 201, run, {}
    match = re.fullmatch(r"/repos/([^/]+/[^/]+)/check-runs/(\d+)", path)
    if match and method == "PATCH":
        found = [r for r in state.check_runs.get(match[1], []) if r["id"] == int(match[2])]
        if not found:
            return 404, {"message": "Not Found"}, {}
        found[0].update(body)
        return 200, found[0], {}
    match = re.fullmatch(r"/repos/([^/]+/[^/]+)/commits/([0-9a-f]{40})/check-runs", path)
    if match and method == "GET":
        runs = [r for r in state.check_runs.get(match[1], []) if r["head_sha"] == match[2]]
        return 200, {"total_count": len(runs), "check_runs": runs}, {}
    match = re.fullmatch(r"/repos/([^/]+/[^/]+)/commits/([0-9a-f]{40})/pulls", path)
    if match and method == "GET":
        return 200, state.commit_pulls.get((match[1], match[2]), []), {}
    match = re.fullmatch(r"/repos/([^/]+/[^/]+)/actions/workflows/([^/]+)/dispatches", path)
    if match and method == "POST":
        state.dispatches.append((match[1], match[2], body))
        return 204, None, {}
    match = re.fullmatch(r"/repos/([^/]+/[^/]+)/actions/runs/(\d+)/artifacts", path)
    if match and method == "GET":
        found = state.artifacts.get(int(match[2]))
        artifacts = [{"id": int(match[2]), "name": found[0], "expired": False}] if found else []
        return 200, {"total_count": len(artifacts), "artifacts": artifacts}, {}
    match = re.fullmatch(r"/repos/([^/]+/[^/]+)/actions/artifacts/(\d+)/zip", path)
    if match and method == "GET":
        # GitHub redirects to a signed URL on another host; here, this server's unauthenticated /blobs/
        return 302, None, {"location": f"{base}/blobs/{match[2]}.zip"}
    return None
