"""Change points confirmed and alerted by a real `guard serve` over loopback: a push whose
point completes a step queues one confirmation job (not again for a replayed or repeated
delivery, nor after a restart), its paired run confirms the step in both series it moved, and
one issue and one comment on the culprit's pull request say so, also when the service is
killed while it posts them."""

from __future__ import annotations

import re
import signal
import sqlite3
from pathlib import Path

import httpx
import pytest

from guard._marker import Marker
from tests.github_standin import Request
from tests.service_app import INSTALLATION, JOB_COMMAND, REPO, app_host
from tests.service_history import main_origin, seed_points, store_at
from tests.service_server import Service, delivery

pytestmark = pytest.mark.slow

STEP_AT = 5  # the sixth commit made both series slower
PR = 42


def _service(tmp_path: Path, host, *extra: str) -> Service:
    return Service(tmp_path / "service", *host.args(), "--workers", "1", "--lease-s", "2",
                   "--job-command", JOB_COMMAND, *extra)


def _push(repo: Path, before: str, after: str) -> dict:
    return {"ref": "refs/heads/main", "before": before, "after": after, "installation": {"id": INSTALLATION},
            "repository": {"full_name": REPO, "clone_url": str(repo), "default_branch": "main", "private": True}}


def _send(service: Service, body: bytes, headers: dict[str, str]) -> dict:
    answer = httpx.post(service.url + "/github/webhook", content=body, headers=headers, timeout=30)
    assert answer.status_code == 202, answer.text
    return answer.json()


def _setup(tmp_path: Path):
    """Main with ten commits, eight measured (a step at the sixth), the culprit's pull request known."""
    repo, shas = main_origin(tmp_path / "origin", 10)
    engine, sessions = store_at(tmp_path / "service")
    seed_points(sessions, shas[:8], STEP_AT)
    engine.dispose()
    host = app_host(tmp_path / "app")
    host.api.state.commit_pulls[(REPO, shas[STEP_AT])] = [
        {"number": PR, "merge_commit_sha": shas[STEP_AT], "merged_at": "2025-01-01T00:00:00Z"}]
    return repo, shas, host


def test_a_new_change_point_is_confirmed_once_and_alerted_once(tmp_path: Path) -> None:
    repo, shas, host = _setup(tmp_path)
    with host.api:
        with _service(tmp_path, host) as service:
            first = delivery("push", _push(repo, shas[7], shas[8]))
            push = _send(service, *first)
            jobs = service.wait_jobs(2)
            by_kind = {j["kind"]: j for j in jobs}
            assert sorted(by_kind) == ["confirm", "push"] and {j["state"] for j in jobs} == {"done"}, jobs
            confirm = by_kind["confirm"]
            assert (confirm["base_sha"], confirm["head_sha"], confirm["delivery"], confirm["pr"]) == (
                shas[STEP_AT - 1], shas[STEP_AT], None, None)
            assert by_kind["push"]["id"] == push["job"] and confirm["id"] > push["job"]
            env = service.work_dir / "jobs" / str(confirm["id"]) / "attempt-1" / "job-env.txt"
            assert env.read_text() == "confirm 1,2"  # the candidates' batch sizes only

            history = service.get("/api/v1/history", params={"repo": REPO}).json()
            steps = history["change_points"]
            assert sorted(c["batch_size"] for c in steps) == [1, 2]
            for step in steps:
                assert (step["state"], step["before_sha"], step["after_sha"]) == (
                    "confirmed", shas[STEP_AT - 1], shas[STEP_AT])
                assert step["confirmation"]["verdict"] == "regression"
                assert step["confirmation"]["run_id"] == str(confirm["run"])

            (issue,) = host.api.issues(REPO)
            (comment,) = host.api.comments(REPO, PR)
            assert issue["user"]["login"] == comment["user"]["login"] == "regression-guard[bot]"
            assert f"since {shas[STEP_AT][:8]}" in issue["title"] and "(2 series)" in issue["title"]
            assert Marker.parse(comment["body"]).key == f"change-point-{shas[STEP_AT]}"
            assert f"#{issue['number']}" in comment["body"] and f"pull request #{PR}" in issue["body"]
            for body in (issue["body"], comment["body"]):
                assert [line.split(" | ")[1] for line in body.splitlines() if line.startswith("| bench/")] == [
                    "1", "2"]

            # GitHub's redelivery of the same delivery: no job; the same push again as a new delivery:
            # a job whose detection finds the step again, confirmed, with its alert posted
            assert _send(service, *first) == push | {"duplicate": True}
            _send(service, *delivery("push", _push(repo, shas[7], shas[8])))
            assert len(service.wait_jobs(3)) == 3

        # a restart, and main grows: no confirmation again, no alert again
        with _service(tmp_path, host) as again:
            _send(again, *delivery("push", _push(repo, shas[8], shas[9])))
            jobs = again.wait_jobs(4)
        assert sorted(j["kind"] for j in jobs) == ["confirm", "push", "push", "push"]
        assert {j["state"] for j in jobs} == {"done"}
    assert len(host.api.requests("POST", r"/issues$")) == 1
    assert len(host.api.requests("POST", rf"/issues/{PR}/comments$")) == 1
    assert len(host.api.issues(REPO)) == 1 and len(host.api.comments(REPO, PR)) == 1
    db = sqlite3.connect(tmp_path / "service" / "guard.db")
    assert db.execute("SELECT batch_size, round, state, job_id FROM confirmations ORDER BY batch_size").fetchall() == [
        (1, 1, "confirmed", confirm["id"]), (2, 1, "confirmed", confirm["id"])]
    assert db.execute("SELECT state, pr, issue_number, comment_id FROM alerts").fetchall() == [
        ("posted", PR, issue["number"], comment["id"])]
    db.close()


@pytest.mark.parametrize("killed_at", ["issue", "comment"])
def test_a_confirmation_killed_while_it_posts_is_retried_and_posts_nothing_twice(tmp_path: Path,
                                                                               killed_at: str) -> None:
    repo, shas, host = _setup(tmp_path)
    service = _service(tmp_path, host)
    target = r"/issues$" if killed_at == "issue" else rf"/issues/{PR}/comments$"

    def kill_while_posting(request: Request) -> None:
        if request.method == "POST" and re.search(target, request.path) and service.process.poll() is None:
            service.process.send_signal(signal.SIGKILL)

    host.api.state.on_request = kill_while_posting
    with host.api:
        service.start()
        try:
            _send(service, *delivery("push", _push(repo, shas[7], shas[8])))
            service.process.wait(timeout=90)
        finally:
            service.stop()
        # the post that was under way landed, unrecorded
        assert len(host.api.issues(REPO)) == 1
        assert len(host.api.comments(REPO, PR)) == (0 if killed_at == "issue" else 1)
        host.api.state.on_request = None
        with _service(tmp_path, host) as again:
            jobs = again.wait_jobs(2)
    confirm = next(j for j in jobs if j["kind"] == "confirm")
    assert (confirm["state"], confirm["attempts"]) == ("done", 2), confirm
    assert len(host.api.requests("POST", r"/issues$")) == 1 and len(host.api.issues(REPO)) == 1
    assert len(host.api.requests("POST", rf"/issues/{PR}/comments$")) == 1
    assert len(host.api.comments(REPO, PR)) == 1
    db = sqlite3.connect(tmp_path / "service" / "guard.db")
    assert db.execute("SELECT state, issue_number, comment_id, owner FROM alerts").fetchall() == [
        ("posted", host.api.issues(REPO)[0]["number"], host.api.comments(REPO, PR)[0]["id"], None)]
    assert db.execute("SELECT COUNT(*) FROM jobs WHERE kind = 'confirm'").fetchone() == (1,)
    db.close()
