"""The webhook of a real `guard serve` over loopback, with a real SQLite file: signed,
forged, unsigned, SHA-1-only, oversized and replayed deliveries, and 200 at once."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import sqlite3
import time

import httpx
import pytest

from tests.service_server import READ_TOKEN, SECRET, Service, delivery, pull_request

pytestmark = pytest.mark.slow

BASE, HEAD = "b" * 40, "a" * 40


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory):
    # no workers: the jobs stay queued, so what is counted is what the webhook queued
    with Service(tmp_path_factory.mktemp("service"), "--workers", "0", "--max-body-mib", "0.0625") as running:
        yield running


def _post(service: Service, body: bytes, headers: dict[str, str]) -> httpx.Response:
    return httpx.post(service.url + "/github/webhook", content=body, headers=headers, timeout=30)


def _payload(number: int) -> dict:
    return pull_request("octo/engine", number, BASE, HEAD, "file:///nowhere")


def test_a_signed_delivery_is_queued_before_github_gives_up_on_it(service: Service) -> None:
    body, headers = delivery("pull_request", _payload(1))
    started = time.monotonic()
    answer = _post(service, body, headers)
    # GitHub's limit, 10 s; how fast the answer is, is docs/measurements/service-load.md's to say
    assert time.monotonic() - started < 10
    assert answer.status_code == 202, answer.text
    job = answer.json()["job"]
    listed = {j["id"]: j for j in service.jobs()}
    assert listed[job]["state"] == "queued"
    assert listed[job]["delivery"] == headers["x-github-delivery"]
    assert (listed[job]["repo"], listed[job]["pr"], listed[job]["head_sha"]) == ("octo/engine", 1, HEAD)


@pytest.mark.parametrize("case", ["forged", "unsigned", "sha1-only", "tampered", "empty-signature"])
def test_a_delivery_without_a_good_sha256_signature_is_refused(service: Service, case: str) -> None:
    before = len(service.jobs())
    body, headers = delivery("pull_request", _payload(2))
    if case == "forged":
        headers["x-hub-signature-256"] = delivery("pull_request", _payload(2), secret="guessed")[1][
            "x-hub-signature-256"]
    elif case == "unsigned":
        del headers["x-hub-signature-256"]
    elif case == "sha1-only":  # GitHub's older header, signed right with the right secret
        del headers["x-hub-signature-256"]
        headers["x-hub-signature"] = "sha1=" + hmac.new(SECRET.encode(), body, hashlib.sha1).hexdigest()
    elif case == "tampered":
        body = body.replace(b'"number": 2', b'"number": 3')
    else:
        headers["x-hub-signature-256"] = "sha256="
    answer = _post(service, body, headers)
    assert answer.status_code == 401, answer.text
    assert answer.json()["error"] == "bad-signature"
    assert len(service.jobs()) == before


def test_a_sha1_signature_in_the_sha256_header_is_refused(service: Service) -> None:
    body, headers = delivery("pull_request", _payload(4))
    headers["x-hub-signature-256"] = "sha1=" + hmac.new(SECRET.encode(), body, hashlib.sha1).hexdigest()
    assert _post(service, body, headers).status_code == 401


def test_an_oversized_delivery_is_refused_before_it_is_read(service: Service) -> None:
    payload = _payload(5) | {"padding": "x" * 70_000}  # over the 64 KiB this service was given
    body, headers = delivery("pull_request", payload)
    before = len(service.jobs())
    answer = _post(service, body, headers)
    assert answer.status_code == 413
    # a body that lies about its length is cut off at the cap all the same
    chunks = (body[i:i + 4096] for i in range(0, len(body), 4096))
    chunked = {k: v for k, v in headers.items()}
    answer = httpx.post(service.url + "/github/webhook", content=chunks, headers=chunked, timeout=30)
    assert answer.status_code == 413
    assert len(service.jobs()) == before


def test_a_replayed_delivery_gives_no_second_job(service: Service) -> None:
    body, headers = delivery("pull_request", _payload(6))
    first = _post(service, body, headers).json()
    again = _post(service, body, headers)
    assert again.status_code == 202
    assert again.json() == first | {"duplicate": True}
    assert [j["delivery"] for j in service.jobs()].count(headers["x-github-delivery"]) == 1


def test_an_event_that_asks_for_nothing_is_kept_without_a_job(service: Service) -> None:
    body, headers = delivery("pull_request", _payload(7) | {"action": "closed"})
    answer = _post(service, body, headers).json()
    assert answer["job"] is None and answer["ignored"] == "unhandled-action"
    public = pull_request("octo/engine", 8, BASE, HEAD, "file:///nowhere", private=False)
    answer = _post(service, *delivery("pull_request", public)).json()
    assert answer["job"] is None and answer["ignored"] == "needs-trust-label"
    labelled = pull_request("octo/engine", 8, BASE, HEAD, "file:///nowhere", private=False, action="labeled",
                            label="safe-to-test")
    assert _post(service, *delivery("pull_request", labelled)).json()["job"] is not None


def test_200_concurrent_deliveries_give_200_jobs_none_lost_none_doubled(service: Service) -> None:
    before = {j["delivery"] for j in service.jobs()}
    deliveries = [delivery("pull_request", _payload(100 + n)) for n in range(200)]
    replays = deliveries[:50]  # each sent twice, at the same time as the rest

    async def send_all() -> list[httpx.Response]:
        limits = httpx.Limits(max_connections=200)
        async with httpx.AsyncClient(limits=limits, timeout=60) as client:
            return await asyncio.gather(*(
                client.post(service.url + "/github/webhook", content=body, headers=headers)
                for body, headers in deliveries + replays
            ))

    answers = asyncio.run(send_all())
    assert [a.status_code for a in answers] == [202] * 250
    jobs = [j for j in service.jobs() if j["delivery"] not in before]
    sent = {headers["x-github-delivery"] for _, headers in deliveries}
    assert sorted(j["delivery"] for j in jobs) == sorted(sent)
    # every answer names its delivery's one job, the replays included
    by_delivery = {j["delivery"]: j["id"] for j in jobs}
    for answer in answers:
        assert answer.json()["job"] == by_delivery[answer.json()["delivery"]]
    # and the database file holds as much: one row per delivery, in WAL mode
    db = sqlite3.connect(service.work_dir / "guard.db")
    try:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert db.execute("SELECT COUNT(*), COUNT(DISTINCT delivery) FROM jobs WHERE delivery IN (%s)" %
                          ",".join("?" * len(sent)), sorted(sent)).fetchone() == (200, 200)
    finally:
        db.close()


def test_healthz_says_what_the_service_cannot_do(service: Service) -> None:
    health = service.get("/healthz").json()
    cannot = {c["what"]: c["why"] for c in health["cannot"]}
    assert cannot["post-comments"] == "no-app-credentials"
    assert cannot["run-jobs"] == "no-workers"
    assert "verify-deliveries" not in cannot


@pytest.mark.parametrize(("path", "query", "says"), [
    ("/api/v1/jobs", "limit=-1", "limit: input should be greater than or equal to 1"),  # lifted the row cap once
    ("/api/v1/jobs", "limit=1001", "limit: input should be less than or equal to 1000"),
    ("/api/v1/jobs", "limit=ten", "limit: input should be a valid integer"),
    ("/api/v1/jobs", "before=0", "before: input should be greater than or equal to 1"),
    ("/api/v1/jobs", "state=lost", "state: input should be 'queued', 'running', 'done' or 'failed'"),
    ("/api/v1/jobs", "repo=../etc", "repo: string should match pattern"),
    ("/api/v1/jobs", "limit=1&limit=-1", "limit is given more than once; give it once"),
    ("/api/v1/jobs", "order=id", "order: is not a parameter here (the parameters here: state, repo, limit, before)"),
    ("/api/v1/history", "", "repo: field required"),
    ("/api/v1/history", "repo=octo/engine&batch_size=-2", "batch_size: input should be greater than or equal to 1"),
])
def test_every_query_parameter_is_checked_and_a_bad_one_is_named(service: Service, path: str, query: str,
                                                                  says: str) -> None:
    answer = service.get(f"{path}?{query}", timeout=30)
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"] == "bad-query" and answer.json()["message"].startswith(says), answer.json()
    assert len(service.get("/api/v1/jobs?limit=1").json()["jobs"]) <= 1


def test_without_a_secret_nothing_is_accepted_and_healthz_says_why(tmp_path) -> None:
    with Service(tmp_path / "service", "--workers", "0", env={"GUARD_WEBHOOK_SECRET": ""}) as bare:
        answer = _post(bare, *delivery("pull_request", _payload(1)))
        assert answer.status_code == 503 and answer.json()["error"] == "no-secret"
        cannot = {c["what"] for c in bare.get("/healthz").json()["cannot"]}
        assert {"verify-deliveries", "post-comments"} <= cannot
        assert bare.jobs() == []


READS = ["/", "/repos/octo/engine", "/repos/octo/engine/pulls/1", "/api/v1/jobs", "/api/v1/runs/1",
         "/api/v1/bisects/1", "/api/v1/history?repo=octo/engine"]


def test_the_dashboard_and_the_api_are_read_only_with_the_read_token(service: Service) -> None:
    wrong = "w" * len(READ_TOKEN)
    for path in READS:
        for headers in ({}, {"authorization": f"Bearer {wrong}"}, {"authorization": READ_TOKEN},
                        {"authorization": "Basic !!not-base64!!"}):
            answer = httpx.get(service.url + path, headers=headers, timeout=30)
            assert answer.status_code == 401, (path, headers, answer.text)
            assert answer.json()["error"] == "no-read-access" and "octo/engine" not in answer.text
            assert answer.headers["www-authenticate"].startswith('Basic realm="regression-guard"')
        assert httpx.get(service.url + path, auth=("anyone", wrong), timeout=30).status_code == 401
        # the token as a Bearer token, or as the password a browser's prompt sends
        assert service.get(path).status_code in (200, 404), path
        assert httpx.get(service.url + path, auth=("anyone", READ_TOKEN), timeout=30).status_code in (200, 404)
    # the ingest keeps its own token: the read token writes nothing
    taken = httpx.post(service.url + "/api/v1/runs", params={"repo": "octo/engine"}, content=b"{}",
                       headers={"authorization": f"Bearer {READ_TOKEN}"}, timeout=30)
    assert taken.status_code == 401 and taken.json()["error"] == "bad-token"
    assert httpx.get(service.url + "/healthz", timeout=30).status_code == 200  # no repository's data


def test_without_a_read_token_nothing_is_read_unless_the_operator_lets_anyone(tmp_path) -> None:
    with Service(tmp_path / "closed", "--workers", "0", env={"GUARD_READ_TOKEN": ""}) as closed:
        answer = closed.get("/api/v1/jobs")
        assert answer.status_code == 401 and "has no read token" in answer.json()["message"]
        cannot = {c["what"]: c["fix"] for c in closed.get("/healthz").json()["cannot"]}
        assert "GUARD_READ_TOKEN" in cannot["show-dashboard"]
    with Service(tmp_path / "public", "--workers", "0", "--public-read", env={"GUARD_READ_TOKEN": ""}) as public:
        assert httpx.get(public.url + "/api/v1/jobs", timeout=30).status_code == 200
        assert "show-dashboard" not in {c["what"] for c in public.get("/healthz").json()["cannot"]}


@pytest.mark.parametrize(("token", "argv", "says"), [
    ("too-short", [], "the read token has 9 characters; give one of 20 or more"),
    (READ_TOKEN, ["--public-read"], "--public-read lets anyone read, so the read token would guard nothing"),
    (READ_TOKEN, ["--read-token-file", "token.txt"], "the read token is set twice"),
])
def test_a_read_token_that_guards_nothing_stops_serve(tmp_path, monkeypatch, capsys, token: str,
                                                      argv: list[str], says: str) -> None:
    from guard.cli import main

    monkeypatch.setenv("GUARD_READ_TOKEN", token)
    (tmp_path / "token.txt").write_text(READ_TOKEN)
    monkeypatch.chdir(tmp_path)
    assert main(["serve", "--work-dir", str(tmp_path / "work"), "--workers", "0", *argv]) == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err and READ_TOKEN not in err, err


def test_a_delivery_cannot_forge_a_line_of_the_services_log(service: Service) -> None:
    """A signed delivery whose repository name carries a newline and a line of its own: the
    log names only a repository GitHub's pattern allows, and every line is one JSON event."""
    forged = '{"event": "post", "job": 1, "comment": "created"}'
    payload = _payload(9) | {"repository": {"full_name": f"octo/engine\n{forged}", "private": True}}
    body, headers = delivery("pull_request", payload)
    assert _post(service, body, headers).status_code == 202
    # the line is written, and flushed, before the answer
    lines = [json.loads(line) for line in service.log.read_text().splitlines() if line.startswith("{")]
    assert not [e for e in lines if e.get("event") == "post"]  # no worker here: nothing was posted
    (mine,) = [e for e in lines if e.get("delivery") == headers["x-github-delivery"]]
    assert mine["event"] == "delivery" and mine["repo"] is None and mine["ignored"] is not None
