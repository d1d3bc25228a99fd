"""Jobs of a real `guard serve` over loopback, end to end: leased by the embedded worker,
measured by a stand-in command in a real clone, stored, and posted as the App to the GitHub
stand-in; a service killed with SIGKILL mid-job loses no job and never posts twice."""

from __future__ import annotations

import io
import json
import os
import signal
import sqlite3
import time
import zipfile
from pathlib import Path

import httpx
import pytest

from guard._marker import Marker
from tests.github_standin import Request
from tests.service_app import INSTALLATION, JOB_COMMAND, REPO, app_host, origin
from tests.service_server import Service, delivery, pull_request

pytestmark = pytest.mark.slow

LEASE_S = "2"


def _service(tmp_path: Path, host, *extra: str, env: dict[str, str] | None = None) -> Service:
    return Service(tmp_path / "service", *host.args(), "--workers", "1", "--lease-s", LEASE_S,
                   "--job-command", JOB_COMMAND, "--comment-mode", "always", *extra, env=env)


def _send(service: Service, event: str, payload: dict) -> dict:
    answer = httpx.post(service.url + "/github/webhook", content=(d := delivery(event, payload))[0], headers=d[1],
                        timeout=30)
    assert answer.status_code == 202, answer.text
    return answer.json()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is dead too: reaped later by whoever adopted it
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


def test_a_pull_request_is_measured_stored_and_posted_as_the_app(tmp_path: Path) -> None:
    repo, base, head = origin(tmp_path / "origin")
    host = app_host(tmp_path / "app")
    with host.api, _service(tmp_path, host) as service:
        first = _send(service, "pull_request", pull_request(REPO, 5, base, head, str(repo)))
        (job,) = service.wait_jobs(1)
        assert job["id"] == first["job"] and job["state"] == "done", job
        comments = host.api.comments(REPO, 5)
        assert len(comments) == 1
        assert comments[0]["user"]["login"] == "regression-guard[bot]"
        marker = Marker.parse(comments[0]["body"])
        assert (marker.verdict, marker.head) == ("regression", head)
        (check,) = host.api.check_runs(REPO)
        assert (check["head_sha"], check["conclusion"]) == (head, "failure")
        assert check["external_id"] == f"guard-job-{job['id']}"
        assert check["output"]["summary"].startswith("<!-- regression-guard:comment")
        run = service.get(f"/api/v1/runs/{job['run']}").json()
        assert (run["verdict"], run["base_sha"], run["head_sha"], run["pr"]) == ("regression", base, head, 5)
        report = json.loads((Path(__file__).parent.parent / "docs/examples/cpu-demo/report.json").read_text())
        processes = sum(len(a["gpu_ms_per_step"]["values"]) for b in report["batch_sizes"] for a in b["arms"])
        assert len(run["samples"]) == processes
        assert [v["verdict"] for v in run["verdicts"]] == [b["verdict"] for b in report["batch_sizes"]]

        # a push to the pull request: the same sticky comment, updated; the App's token minted once
        second = _send(service, "pull_request", pull_request(REPO, 5, base, head, str(repo), action="synchronize"))
        service.wait_jobs(2)
        assert second["job"] != first["job"]
        assert len(host.api.comments(REPO, 5)) == 1
        assert host.api.state.minted == [INSTALLATION]
        assert len(host.api.check_runs(REPO)) == 2  # one per job: each run of the gate is its own
        # every call to the App's own endpoints carried a JWT the stand-in verified with the App's public key
        assert host.api.requests("POST", r"^/app/installations/77/access_tokens$")

        # the gate's "Re-run" button: the job of that check run, queued again
        check = host.api.check_runs(REPO)[0]
        rerun = _send(service, "check_run", {
            "action": "rerequested", "installation": {"id": INSTALLATION},
            "repository": {"full_name": REPO, "private": False, "clone_url": str(repo), "default_branch": "main"},
            "check_run": {"id": check["id"], "head_sha": head, "external_id": check["external_id"]},
        })
        jobs = {j["id"]: j for j in service.wait_jobs(3)}
        assert (jobs[rerun["job"]]["pr"], jobs[rerun["job"]]["base_sha"], jobs[rerun["job"]]["state"]) == (
            5, base, "done")
        assert len(host.api.comments(REPO, 5)) == 1

        # a push to the default branch: a point of its history per batch size, and nothing posted
        push = _send(service, "push", {"ref": "refs/heads/main", "before": base, "after": head,
                                       "installation": {"id": INSTALLATION},
                                       "repository": {"full_name": REPO, "clone_url": str(repo),
                                                      "default_branch": "main"}})
        service.wait_jobs(4)
        history = service.get("/api/v1/history", params={"repo": REPO}).json()
        assert sorted((p["batch_size"], p["sha"]) for p in history["points"]) == [(1, head), (2, head)]
        # the head is the origin's second commit on main's first-parent line
        assert {(p["order"], p["subject"], p["gpu_timed"]) for p in history["points"]} == {(2, "head", False)}
        assert {p["run"] for p in history["points"]} == {j["run"] for j in service.jobs() if j["id"] == push["job"]}
        assert len(host.api.check_runs(REPO)) == 3

        # the dashboard's pages, from what the service stored
        page = service.get(f"/repos/{REPO}")
        assert page.status_code == 200 and "<svg" in page.text and head[:8] in page.text
        assert 'href="/repos/octo/engine/pulls/5"' in page.text
        pull = service.get(f"/repos/{REPO}/pulls/5")
        assert pull.status_code == 200 and head[:8] in pull.text and f"/api/v1/runs/{job['run']}" in pull.text
        assert service.get("/repos/..%2F/x").status_code == 404
    # the service's log: one JSON line for each delivery answered, job started and ended, and post made
    lines = [json.loads(line) for line in service.log.read_text().splitlines() if line.startswith("{")]
    events: dict[tuple[str, str | None], list[dict]] = {}
    for e in lines:
        events.setdefault((e.get("event"), e.get("phase")), []).append(e)
    deliveries = events[("delivery", None)]
    assert [(d["job"], d["status"], d["duplicate"]) for d in deliveries] == [
        (j, 202, False) for j in (first["job"], second["job"], rerun["job"], push["job"])]
    assert deliveries[0]["delivery"] == first["delivery"] and deliveries[0]["github_event"] == "pull_request"
    ended = {e["job"]: e for e in events[("job", "ended")]}
    assert {e["job"] for e in events[("job", "started")]} == set(ended) == {
        first["job"], second["job"], rerun["job"], push["job"]}
    assert (ended[first["job"]]["outcome"], ended[first["job"]]["run"]) == ("done", job["run"])
    posts = {e["job"]: e for e in events[("post", None)]}
    assert set(posts) == {first["job"], second["job"], rerun["job"]}  # a push to main posts nothing
    assert posts[first["job"]]["comment"] == "created"
    assert posts[second["job"]]["comment"] != "created" and posts[rerun["job"]]["comment"] != "created"
    assert {p["check_run"] for p in posts.values()} == {c["id"] for c in host.api.check_runs(REPO)}


def test_dispatch_mode_sends_the_job_to_the_measuring_workflow_and_posts_what_it_measured(tmp_path: Path) -> None:
    host = app_host(tmp_path / "app")
    report = json.loads((Path(__file__).parent.parent / "docs/examples/cpu-demo/report.json").read_text())
    base, head = (next(a["sha"] for a in report["arms"] if a["name"] == report[role]) for role in ("base", "head"))
    with host.api, _service(tmp_path, host, "--dispatch-workflow", "regression-guard.yml") as service:
        job = _send(service, "pull_request", pull_request(REPO, 14, base, head, "unused"))["job"]
        (done,) = service.wait_jobs(1)
        assert (done["id"], done["state"]) == (job, "done")
        ((repo, workflow, body),) = host.api.state.dispatches
        assert (repo, workflow, body["ref"]) == (REPO, "regression-guard.yml", "main")
        assert body["inputs"] == {"base": base, "head": head, "pr": "14", "guard-job": str(job)}
        assert host.api.comments(REPO, 14) == []  # nothing measured here

        # the runner's run completes: a dispatched run lists no pull request, its title names the job
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w") as archive:
            archive.writestr("report.json", json.dumps(report))
        host.api.state.artifacts[700] = ("regression-guard", buffer.getvalue())
        _send(service, "workflow_run", {
            "action": "completed", "installation": {"id": INSTALLATION},
            "repository": {"full_name": REPO, "private": True, "clone_url": "unused", "default_branch": "main"},
            "workflow_run": {"id": 700, "name": "regression-guard", "head_sha": head, "pull_requests": [],
                             "event": "workflow_dispatch",
                             "display_title": f"regression-guard guard-job {job}",
                             "path": ".github/workflows/regression-guard.yml"},
        })
        jobs = {j["kind"]: j for j in service.wait_jobs(2)}

        # `/guard run --repeats N`: the dispatched workflow takes guard.toml's repeats, so nothing is
        # dispatched that would measure another count than the one asked for
        host.api.state.permissions[(REPO, "maintainer")] = "write"
        own = {"repo": {"full_name": REPO}}
        host.api.state.pulls[(REPO, 14)] = {"number": 14, "base": {"sha": base} | own, "head": {"sha": head} | own}
        _send(service, "issue_comment", _command("maintainer", 14, "/guard run --repeats 9"))
        (refused,) = [j for j in service.wait_jobs(3) if j["kind"] == "command"]
    assert (jobs["workflow_run"]["state"], jobs["workflow_run"]["pr"]) == ("done", 14), jobs["workflow_run"]
    assert Marker.parse(host.api.comments(REPO, 14)[0]["body"]).verdict == "regression"
    assert refused["state"] == "failed" and refused["error"].startswith("not-dispatched: "), refused
    assert len(host.api.state.dispatches) == 1


def test_kill_9_mid_job_loses_no_job_and_kills_its_command(tmp_path: Path) -> None:
    repo, base, head = origin(tmp_path / "origin")
    host = app_host(tmp_path / "app")
    markers = tmp_path / "markers"
    markers.mkdir()
    env = {"GUARD_TEST_MARKERS": str(markers), "GUARD_TEST_FIRST_SLEEP_S": "60"}
    with host.api:
        service = _service(tmp_path, host, env=env).start()
        try:
            job_id = _send(service, "pull_request", pull_request(REPO, 9, base, head, str(repo)))["job"]
            deadline = time.monotonic() + 60
            while not list(markers.iterdir()) and time.monotonic() < deadline:
                time.sleep(0.1)
            (started,) = list(markers.iterdir())
            command_pid = int(started.read_text().split()[0])
            assert [j["state"] for j in service.jobs()] == ["running"]
            service.kill9()
        finally:
            service.stop()
        deadline = time.monotonic() + 10
        while _alive(command_pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(command_pid), "the measuring command outlived the service it ran for"
        assert host.api.comments(REPO, 9) == []

        with _service(tmp_path, host, env=env) as again:
            (job,) = again.wait_jobs(1)
        assert (job["id"], job["state"], job["attempts"]) == (job_id, "done", 2)
        assert len(list(markers.glob("started-*"))) == 2
        assert len(host.api.comments(REPO, 9)) == 1
        assert len(host.api.check_runs(REPO)) == 1


def test_a_job_retried_after_it_posted_posts_nothing_twice(tmp_path: Path) -> None:
    """Killed the moment its check run reaches GitHub, after its comment: the retry finds both."""
    repo, base, head = origin(tmp_path / "origin")
    host = app_host(tmp_path / "app")
    service = _service(tmp_path, host)

    def kill_at_check_run(request: Request) -> None:
        if request.method == "POST" and request.path.endswith("/check-runs") and service.process.poll() is None:
            service.process.send_signal(signal.SIGKILL)

    host.api.state.on_request = kill_at_check_run
    with host.api:
        service.start()
        try:
            _send(service, "pull_request", pull_request(REPO, 11, base, head, str(repo)))
            service.process.wait(timeout=60)
        finally:
            service.stop()
        assert len(host.api.comments(REPO, 11)) == 1 and len(host.api.check_runs(REPO)) == 1
        host.api.state.on_request = None
        with _service(tmp_path, host) as again:
            (job,) = again.wait_jobs(1)
        assert (job["state"], job["attempts"]) == ("done", 2), job
    assert len(host.api.comments(REPO, 11)) == 1
    assert len(host.api.requests("POST", r"/issues/11/comments$")) == 1
    assert len(host.api.check_runs(REPO)) == 1
    assert len(host.api.requests("POST", r"/check-runs$")) == 1
    # the first attempt had stored its run before it was killed: the retry's replaced it
    db = sqlite3.connect(tmp_path / "service" / "guard.db")
    assert db.execute("SELECT COUNT(*), MAX(id) FROM runs WHERE job_id = ?", (job["id"],)).fetchone() == (1, job["run"])
    assert db.execute("SELECT COUNT(DISTINCT run_id) FROM samples").fetchone() == (1,)
    db.close()


def _command(sender: str, number: int, body: str = "/guard run please") -> dict:
    return {
        "action": "created", "installation": {"id": INSTALLATION},
        "repository": {"full_name": REPO, "private": False, "clone_url": "unused", "default_branch": "main"},
        "issue": {"number": number, "pull_request": {"url": "unused"}},
        "comment": {"body": body, "user": {"login": sender, "type": "User"}},
    }


def test_guard_run_comment_runs_only_for_a_user_with_write_access(tmp_path: Path) -> None:
    repo, base, head = origin(tmp_path / "origin")
    host = app_host(tmp_path / "app")
    host.api.state.permissions[(REPO, "maintainer")] = "write"
    own, fork = {"repo": {"full_name": REPO}}, {"repo": {"full_name": "mallory/engine"}}
    host.api.state.pulls[(REPO, 12)] = {"number": 12, "base": {"sha": base} | own, "head": {"sha": head} | own}
    host.api.state.pulls[(REPO, 13)] = {"number": 13, "base": {"sha": base} | own, "head": {"sha": head} | fork}
    markers = tmp_path / "markers"
    markers.mkdir()
    with host.api, _service(tmp_path, host, env={"GUARD_TEST_MARKERS": str(markers)}) as service:
        # a command's job is measured from the repository's own clone URL, which the comment event carries
        def command(sender: str, number: int, body: str = "/guard run please") -> dict:
            event = _command(sender, number, body)
            event["repository"]["clone_url"] = str(repo)
            return event

        _send(service, "issue_comment", command("stranger", 12))
        (refused,) = service.wait_jobs(1)
        assert refused["state"] == "failed" and refused["error"].startswith("not-permitted: stranger"), refused
        # a fork's head is measured only at a commit the comment names, and only while it is the head
        _send(service, "issue_comment", command("maintainer", 13))
        _send(service, "issue_comment", command("maintainer", 13, f"/guard run {base[:10]}"))  # reviewed, then moved
        unpinned = [j for j in service.wait_jobs(3) if j["pr"] == 13]
        assert [j["state"] for j in unpinned] == ["failed", "failed"], unpinned
        errors = sorted(j["error"] for j in unpinned)
        assert errors[0].startswith("not-pinned: a pull request from a fork is measured only at the commit its "
                                    f"reviewer names; comment `/guard run {head[:12]}`"), errors
        assert errors[1] == (f"not-pinned: the pull request's head is now {head[:12]}, not the {base[:10]} the "
                             f"command named; review it and comment `/guard run {head[:12]}` to measure it"), errors
        assert list(markers.iterdir()) == []  # nothing ran
        # the processes an undecided run's comment asks for: the measuring command gets them
        _send(service, "issue_comment", command("maintainer", 12, f"/guard run {head[:10].upper()} --repeats 9"))
        jobs = service.wait_jobs(4)
    ran = next(j for j in jobs if j["pr"] == 12 and j["id"] != refused["id"])
    assert (ran["state"], ran["base_sha"], ran["head_sha"]) == ("done", base, head), ran
    assert (service.work_dir / "jobs" / str(ran["id"]) / "attempt-1" / "job-repeats.txt").read_text() == "9"
    assert len(host.api.comments(REPO, 12)) == 1 and host.api.comments(REPO, 13) == []


def test_a_workflow_runs_report_is_fetched_checked_and_posted(tmp_path: Path) -> None:
    host = app_host(tmp_path / "app")
    report = json.loads((Path(__file__).parent.parent / "docs/examples/cpu-demo/report.json").read_text())
    head = next(a["sha"] for a in report["arms"] if a["name"] == report["head"])
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("report.json", json.dumps(report))
    host.api.state.artifacts[555] = ("regression-guard-report", buffer.getvalue())
    forged = json.loads(json.dumps(report))
    forged["verdict"] = "pass"  # what a pull request's run could write: its numbers say otherwise
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("report.json", json.dumps(forged))
    host.api.state.artifacts[556] = ("regression-guard-report", buffer.getvalue())

    def run_event(run_id: int, pr: int, event: str = "pull_request_target") -> dict:
        return {
            "action": "completed", "installation": {"id": INSTALLATION},
            "repository": {"full_name": REPO, "private": False, "clone_url": "unused", "default_branch": "main"},
            "workflow_run": {"id": run_id, "name": "regression-guard measure", "head_sha": head,
                             "path": ".github/workflows/regression-guard-measure.yml", "event": event,
                             "repository": {"full_name": REPO}, "head_repository": {"full_name": "mallory/engine"},
                             "pull_requests": [{"number": pr}]},
        }

    with host.api, _service(tmp_path, host) as service:
        # a fork's own workflow of the same file and name, on pull_request, with a report whose
        # numbers hold up: not taken, whatever it says (it could be any numbers at all)
        forged = _send(service, "workflow_run", run_event(555, 23, event="pull_request"))
        assert (forged["ignored"], forged["job"]) == ("fork-defined-run", None), forged
        _send(service, "workflow_run", run_event(555, 21))
        _send(service, "workflow_run", run_event(556, 22))
        jobs = {j["pr"]: j for j in service.wait_jobs(2)}
    assert 23 not in jobs and host.api.comments(REPO, 23) == [] and len(host.api.check_runs(REPO)) == 2
    assert jobs[21]["state"] == "done", jobs[21]
    assert Marker.parse(host.api.comments(REPO, 21)[0]["body"]).verdict == "regression"
    assert jobs[22]["state"] == "failed" and "numbers do not give" in jobs[22]["error"], jobs[22]
    assert host.api.comments(REPO, 22) == []


def test_a_report_is_ingested_only_with_its_repositorys_token_and_only_if_it_holds(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text(f"{REPO} {'t' * 32}\nother/repo {'u' * 32}\n")
    report = (Path(__file__).parent.parent / "docs/examples/cpu-demo/report.json").read_text()
    with Service(tmp_path / "service", "--workers", "0", "--ingest-tokens-file", str(tokens)) as service:
        url = service.url + "/api/v1/runs"

        def ingest(body: str, token: str, **params: str) -> httpx.Response:
            return httpx.post(url, content=body, params={"repo": REPO} | params,
                              headers={"authorization": f"Bearer {token}"} if token else {}, timeout=30)

        assert ingest(report, "u" * 32).status_code == 401  # another repository's token
        assert ingest(report, "").status_code == 401
        forged = json.loads(report)
        forged["verdict"] = "pass"
        refused = ingest(json.dumps(forged), "t" * 32)
        assert refused.status_code == 422 and "numbers do not give" in refused.json()["message"]
        assert ingest("{not json", "t" * 32).status_code == 422
        taken = ingest(report, "t" * 32, main_branch="1")
        assert taken.status_code == 201, taken.text
        run = service.get(f"/api/v1/runs/{taken.json()['run']}").json()
        assert run["source"] == "ingest" and run["verdict"] == "regression"
        history = service.get("/api/v1/history", params={"repo": REPO, "batch_size": 2}).json()
    parsed = json.loads(report)
    head = next(a for a in parsed["batch_sizes"] if a["batch_size"] == 2)["arms"]
    head_median = next(a for a in head if a["arm"] == parsed["head"])["gpu_ms_per_step"]["median"]
    assert [(p["batch_size"], p["gpu_ms_per_step"]) for p in history["points"]] == [(2, head_median)]


def test_one_worker_per_gpu_and_one_job_per_gpu_at_a_time(tmp_path: Path) -> None:
    repo, base, head = origin(tmp_path / "origin")
    markers = tmp_path / "markers"
    markers.mkdir()
    # every job waits on its first start, so jobs overlap if they may; no App: nothing is posted
    env = {"GUARD_TEST_MARKERS": str(markers), "GUARD_TEST_FIRST_SLEEP_S": "1.5"}
    with Service(tmp_path / "service", "--gpus", "0,1", "--lease-s", LEASE_S, "--job-command", JOB_COMMAND,
                 env=env) as service:
        assert service.get("/healthz").json()["workers"] == 2
        for number in range(4):
            _send(service, "pull_request", pull_request(REPO, 30 + number, base, head, str(repo)))
        jobs = service.wait_jobs(4)
    assert {j["state"] for j in jobs} == {"done"}
    spans = []
    for started in markers.glob("started-*"):
        _, gpu, start = started.read_text().split()
        end = float((markers / started.name.replace("started-", "ended-")).read_text())
        spans.append((float(start), end, gpu))
    assert len(spans) == 4 and {gpu for *_, gpu in spans} == {"0", "1"}
    for a in spans:
        overlapping = [b for b in spans if b is not a and b[0] < a[1] and a[0] < b[1]]
        assert len(overlapping) <= 1, "more jobs at once than GPUs"
        assert all(b[2] != a[2] for b in overlapping), "two jobs at once on one GPU"
    assert any(b is not a and b[0] < a[1] and a[0] < b[1] for a in spans for b in spans), \
        "the two GPUs never ran at once"


def test_a_worker_that_lost_its_lease_stops_the_command_and_finishes_nothing(tmp_path: Path) -> None:
    repo, base, head = origin(tmp_path / "origin")
    markers = tmp_path / "markers"
    markers.mkdir()
    env = {"GUARD_TEST_MARKERS": str(markers), "GUARD_TEST_FIRST_SLEEP_S": "60"}
    with Service(tmp_path / "service", "--lease-s", LEASE_S, "--job-command", JOB_COMMAND, env=env) as service:
        job_id = _send(service, "pull_request", pull_request(REPO, 40, base, head, str(repo)))["job"]
        deadline = time.monotonic() + 60
        while not list(markers.iterdir()) and time.monotonic() < deadline:
            time.sleep(0.1)
        (started,) = list(markers.iterdir())
        command_pid = int(started.read_text().split()[0])
        # another worker, as if this one had stalled past its lease, now holds the job
        db = sqlite3.connect(service.work_dir / "guard.db")
        with db:
            db.execute("UPDATE jobs SET lease_owner = 'elsewhere', lease_expires_s = :far WHERE id = :id",
                       {"far": time.time() + 3600, "id": job_id})
        db.close()
        deadline = time.monotonic() + 10
        while _alive(command_pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(command_pid), "the command ran on after its worker lost the lease"
        time.sleep(1)
        (job,) = service.jobs()
    assert (job["state"], job["finished_at"], job["run"]) == ("running", None, None)


def test_a_service_stopped_cleanly_puts_its_running_job_back_uncounted(tmp_path: Path) -> None:
    repo, base, head = origin(tmp_path / "origin")
    markers = tmp_path / "markers"
    markers.mkdir()
    env = {"GUARD_TEST_MARKERS": str(markers), "GUARD_TEST_FIRST_SLEEP_S": "60"}
    service = Service(tmp_path / "service", "--lease-s", "30", "--job-command", JOB_COMMAND, env=env).start()
    try:
        _send(service, "pull_request", pull_request(REPO, 41, base, head, str(repo)))
        deadline = time.monotonic() + 60
        while not list(markers.iterdir()) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert list(markers.iterdir())
    finally:
        service.stop()  # SIGTERM
    # uvicorn shuts down gracefully, then exits by the signal it caught
    assert service.process.returncode == -signal.SIGTERM and "Traceback" not in service.log.read_text()
    db = sqlite3.connect(service.work_dir / "guard.db")
    assert db.execute("SELECT state, attempts, lease_owner FROM jobs").fetchall() == [("queued", 0, None)]
    db.close()
    # queued again at once, not after its 30 s lease: the next start takes it and it counts one attempt
    with Service(tmp_path / "service", "--lease-s", "30", "--job-command", JOB_COMMAND, env=env) as again:
        (job,) = again.wait_jobs(1, timeout_s=25)
    assert (job["state"], job["attempts"]) == ("done", 1), job
