"""A failed job's Check Run, from a real `guard serve` over loopback: a measuring command that
exits without a report concludes the job's Check Run `failure` with what failed and what to
do; a job whose worker dies is not concluded while it will be retried, and is concluded once
its retries are spent; a stranger's `/guard run` writes nothing."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import httpx
import pytest

from tests.service_app import INSTALLATION, JOB_COMMAND, REPO, app_host, origin
from tests.service_server import Service, delivery, pull_request

pytestmark = pytest.mark.slow


def _service(tmp_path: Path, host, env: dict[str, str]) -> Service:
    return Service(tmp_path / "service", *host.args(), "--workers", "1", "--lease-s", "2",
                   "--job-command", JOB_COMMAND, "--comment-mode", "always", env=env)


def _send(service: Service, body: bytes, headers: dict[str, str]) -> dict:
    answer = httpx.post(service.url + "/github/webhook", content=body, headers=headers, timeout=30)
    assert answer.status_code == 202, answer.text
    return answer.json()


def _check_runs(host, count: int, timeout_s: float = 30) -> list[dict]:  # type: ignore[no-untyped-def]
    """The Check Runs once `count` are there: a job is failed in the database first, and its
    Check Run posted after that, so the job's state can come before it."""
    deadline = time.monotonic() + timeout_s
    while len(found := host.api.check_runs(REPO)) < count and time.monotonic() < deadline:
        time.sleep(0.1)
    return found


def test_a_job_whose_command_fails_concludes_its_check_run_failure(tmp_path: Path) -> None:
    repo, base, head = origin(tmp_path / "origin")
    host = app_host(tmp_path / "app")
    with host.api, _service(tmp_path, host, {"GUARD_TEST_EXIT": "3"}) as service:
        sent = delivery("pull_request", pull_request(REPO, 7, base, head, str(repo)))
        job_id = _send(service, *sent)["job"]
        (job,) = service.wait_jobs(1)
        assert job["state"] == "failed" and job["error"].startswith("the measuring command exited 3"), job
        (check,) = _check_runs(host, 1)
        assert (check["head_sha"], check["status"], check["conclusion"], check["external_id"]) == (
            head, "completed", "failure", f"guard-job-{job_id}")
        output = check["output"]
        assert output["title"] == "Failed: the measuring command exited without writing a report"
        # the log's end, as data in a code block, and what to do
        assert "```\nthe measuring command exited 3" in output["summary"]
        assert "the compiler ran out of memory\n" in output["summary"] and "re-run this check" in output["summary"]
        assert host.api.comments(REPO, 7) == []  # no verdict: the sticky comment is left as it was

        # the same delivery again: no second job, no second Check Run
        assert _send(service, *sent)["duplicate"] is True
        # the gate's Re-run: a job of its own, failing the same way on its own Check Run
        _send(service, *delivery("check_run", {
            "action": "rerequested", "installation": {"id": INSTALLATION},
            "repository": {"full_name": REPO, "private": True, "clone_url": str(repo), "default_branch": "main"},
            "check_run": {"id": check["id"], "head_sha": head, "external_id": check["external_id"]}}))
        jobs = service.wait_jobs(2)
    assert {j["state"] for j in jobs} == {"failed"}
    assert sorted(c["external_id"] for c in _check_runs(host, 2)) == sorted(f"guard-job-{j['id']}" for j in jobs)
    assert {c["conclusion"] for c in host.api.check_runs(REPO)} == {"failure"}
    db = sqlite3.connect(tmp_path / "service" / "guard.db")
    assert db.execute("SELECT job_id, check_run_id FROM posted_comments WHERE job_id = ?", (job_id,)).fetchall() == [
        (job_id, check["id"])]
    db.close()


def test_a_job_is_not_concluded_while_it_will_be_retried_and_is_once_its_worker_died_every_time(
        tmp_path: Path) -> None:
    repo, base, head = origin(tmp_path / "origin")
    host = app_host(tmp_path / "app")
    markers = tmp_path / "markers"
    markers.mkdir()
    env = {"GUARD_TEST_MARKERS": str(markers), "GUARD_TEST_EVERY_SLEEP_S": "120"}
    with host.api:
        for attempt in (1, 2, 3):
            service = _service(tmp_path, host, env).start()
            try:
                if attempt == 1:
                    _send(service, *delivery("pull_request", pull_request(REPO, 8, base, head, str(repo))))
                deadline = time.monotonic() + 60
                while len(list(markers.glob("started-*"))) < attempt and time.monotonic() < deadline:
                    time.sleep(0.1)
                assert len(list(markers.glob("started-*"))) == attempt
                service.kill9()  # the host dies mid-measurement: the lease runs out, the job is taken again
            finally:
                service.stop()
            assert host.api.check_runs(REPO) == [], f"concluded after attempt {attempt}, with retries left"
        with _service(tmp_path, host, env) as service:
            (job,) = service.wait_jobs(1, timeout_s=30)
    assert (job["state"], job["attempts"]) == ("failed", 3), job
    (check,) = _check_runs(host, 1)
    assert (check["conclusion"], check["head_sha"]) == ("failure", head)
    assert check["output"]["title"] == "Failed: the measuring host stopped during this job on every try"
    assert "its worker stopped 3 times" in check["output"]["summary"]


def test_a_strangers_guard_run_writes_nothing(tmp_path: Path) -> None:
    host = app_host(tmp_path / "app")
    host.api.state.pulls[(REPO, 9)] = {"number": 9, "base": {"sha": "b" * 40}, "head": {"sha": "a" * 40}}
    with host.api, _service(tmp_path, host, {}) as service:
        _send(service, *delivery("issue_comment", {
            "action": "created", "installation": {"id": INSTALLATION},
            "repository": {"full_name": REPO, "private": False, "clone_url": "unused", "default_branch": "main"},
            "issue": {"number": 9, "pull_request": {"url": "unused"}},
            "comment": {"body": "/guard run", "user": {"login": "stranger", "type": "User"}}}))
        (job,) = service.wait_jobs(1)
    assert job["state"] == "failed" and job["error"].startswith("not-permitted"), job
    # anyone may comment: a Check Run from their command would let anyone set another's merge gate
    assert host.api.check_runs(REPO) == [] and host.api.comments(REPO, 9) == []
    assert not [r for r in host.api.state.log if r.method != "GET" and not r.path.startswith("/app/")]
