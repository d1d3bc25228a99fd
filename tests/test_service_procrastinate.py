"""The procrastinate queue on a real PostgreSQL server: `guard serve --queue procrastinate`
defers each job, real `guard worker` processes measure it with the stand-in command in a
real clone and post as the App to the GitHub stand-in over loopback; a replayed delivery
queues nothing twice, one host measures one job at a time however many workers run as it,
a job that raised is retried by procrastinate's retry strategy, and a worker killed with
SIGKILL mid-job leaves its job to another host, which posts it once. A push's candidate
change point gets its confirmation job through the same queue, and a confirmed slowdown one
alert; a job failed for good (its command, its retries, its workers) one failing Check Run;
the trust label comes off as in the embedded mode."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import procrastinate
import psycopg
import pytest

from guard._marker import Marker
from guard.service._procrastinate import MEASURE_TASK, TAKE_TASK, prepare_database, queue_sessions
from guard.service._queue import add_job, job_state, requeue, take_over
from guard.service._store import migrate, open_engine, sessions
from tests.postgres_cluster import cluster, postgres_bin
from tests.service_app import INSTALLATION, JOB_COMMAND, REPO, AppHost, app_host, origin
from tests.service_history import main_origin, seed_points
from tests.service_server import Service, ServiceProcess, delivery, free_port, pull_request

pytestmark = pytest.mark.slow

STALLED_S = "5"  # well past a heartbeat (every quarter of it) on a busy machine
START_TIMEOUT_S = 60.0


@pytest.fixture(scope="module")
def postgres_server() -> Iterator[str]:
    if postgres_bin() is None:
        pytest.skip("no PostgreSQL here (apt-get install postgresql)")
    with cluster() as url:
        yield url


@pytest.fixture
def database(postgres_server: str) -> str:
    """A new database of its own for each test: its job ids start at 1."""
    name = f"q_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_server, autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}"')
    return postgres_server.rsplit("/", 1)[0] + "/" + name


class Worker(ServiceProcess):
    """`guard worker` as a real subprocess, ready once procrastinate's worker listens."""

    def __init__(self, folder: Path, db: str, host_name: str, *args: str, env: dict[str, str] | None = None) -> None:
        self.folder, self.log = folder, folder / "worker.log"
        folder.mkdir(parents=True, exist_ok=True)
        self.command = [sys.executable, "-m", "guard", "worker", "--db", db, "--host-name", host_name,
                        "--work-dir", str(folder), "--job-command", JOB_COMMAND, "--comment-mode", "always",
                        "--stalled-s", STALLED_S, *args]
        self.env = dict(os.environ) | (env or {})
        self.process: subprocess.Popen | None = None

    def start(self) -> Worker:
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(self.command, stdout=log, stderr=subprocess.STDOUT, env=self.env,
                                            stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + START_TIMEOUT_S
        while "Starting worker on" not in self.log.read_text():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"guard worker did not start ({self.process.poll()}): {self.log.read_text()}")
            time.sleep(0.1)
        return self

    def __enter__(self) -> Worker:
        return self.start()


def _service(tmp_path: Path, host: AppHost, db: str) -> Service:
    return Service(tmp_path / "service", *host.args(), "--queue", "procrastinate", db=db)


def _worker(tmp_path: Path, host: AppHost, db: str, name: str, *args: str, **kwargs: object) -> Worker:
    return Worker(tmp_path / f"worker-{name}-{uuid.uuid4().hex[:6]}", db, name, *host.args(), *args, **kwargs)


def _send(service: Service, body: bytes, headers: dict[str, str]) -> dict:
    answer = httpx.post(service.url + "/github/webhook", content=body, headers=headers, timeout=30)
    assert answer.status_code == 202, answer.text
    return answer.json()


def _queue_jobs(db: str, task: str) -> dict[int, list[procrastinate.jobs.Job]]:
    """procrastinate's own record of its jobs of `task`, by the service's job id."""
    app = procrastinate.App(connector=procrastinate.SyncPsycopgConnector(conninfo=db))
    with app.open():
        found: dict[int, list[procrastinate.jobs.Job]] = {}
        for queue_job in app.job_manager.list_jobs(task=task):
            found.setdefault(queue_job.task_kwargs["job_id"], []).append(queue_job)
        return found


def _wait_for(what: str, check, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not {what} after {timeout_s:g} s")
        time.sleep(0.1)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


def test_a_delivery_is_deferred_measured_by_a_worker_and_posted_once_and_a_replay_queues_nothing(
        tmp_path: Path, database: str) -> None:
    repo, base, head = origin(tmp_path / "origin")
    host = app_host(tmp_path / "app")
    markers = tmp_path / "markers"
    markers.mkdir()
    body, headers = delivery("pull_request", pull_request(REPO, 5, base, head, str(repo)))
    with host.api, _service(tmp_path, host, database) as service:
        health = service.get("/healthz").json()
        assert (health["mode"], health["workers"]) == ("procrastinate", 0)
        assert "run-jobs" not in {c["what"] for c in health["cannot"]}
        first = _send(service, body, headers)
        # replayed while its take still waits in the pool for a host: the queueing lock holds
        again = _send(service, body, headers)
        assert (again["duplicate"], again["job"]) == (True, first["job"])
        assert [j["state"] for j in service.jobs()] == ["queued"]
        (waiting,) = _queue_jobs(database, TAKE_TASK)[first["job"]]
        assert (waiting.queue, waiting.status) == ("guard", "todo")

        with _worker(tmp_path, host, database, "gpu-a", "--gpus", "0,1", env={"GUARD_TEST_MARKERS": str(markers)}):
            (job,) = service.wait_jobs(1)
            # replayed once the job is done: no take deferred again
            assert _send(service, body, headers)["duplicate"] is True
            time.sleep(1)
        assert (job["id"], job["state"], job["attempts"], job["error"]) == (first["job"], "done", 1, None), job
        comments = host.api.comments(REPO, 5)
        assert len(comments) == 1
        assert comments[0]["user"]["login"] == "regression-guard[bot]"
        marker = Marker.parse(comments[0]["body"])
        assert (marker.verdict, marker.head) == ("regression", head)
        (check,) = host.api.check_runs(REPO)
        assert (check["head_sha"], check["external_id"]) == (head, f"guard-job-{job['id']}")
        run = service.get(f"/api/v1/runs/{job['run']}").json()
        assert (run["verdict"], run["head_sha"]) == ("regression", head)
        queues = {q["name"]: q for q in service.get("/healthz").json()["queues"]}
        assert queues["guard-host-gpu-a"]["succeeded"] == 1

    takes, measures = _queue_jobs(database, TAKE_TASK), _queue_jobs(database, MEASURE_TASK)
    assert [(t.status, t.queueing_lock) for t in takes[job["id"]]] == [("succeeded", f"guard-job-{job['id']}")]
    ((measured,),) = measures.values()
    assert (measured.queue, measured.lock, measured.status) == ("guard-host-gpu-a", "guard-host-gpu-a", "succeeded")
    (started,) = markers.glob(f"started-{job['id']}-*")
    assert started.read_text().split()[1] == "0,1"  # the measuring command saw the host's GPUs
    (job_dir,) = tmp_path.glob(f"worker-gpu-a-*/jobs/{job['id']}/attempt-1")
    assert (job_dir / "report.json").is_file()


def test_two_workers_of_one_host_measure_its_jobs_one_after_the_other(tmp_path: Path, database: str) -> None:
    repo, base, head = origin(tmp_path / "origin")
    host = app_host(tmp_path / "app")
    markers = tmp_path / "markers"
    markers.mkdir()
    env = {"GUARD_TEST_MARKERS": str(markers), "GUARD_TEST_FIRST_SLEEP_S": "2"}
    with host.api, _service(tmp_path, host, database) as service, \
            _worker(tmp_path, host, database, "gpu-a", "--gpus", "3", env=env) as one, \
            _worker(tmp_path, host, database, "gpu-a", "--gpus", "3", env=env) as other:
        for number in (21, 22):
            _send(service, *delivery("pull_request", pull_request(REPO, number, base, head, str(repo))))
        jobs = service.wait_jobs(2)
        assert one.process.poll() is None and other.process.poll() is None
    assert {j["state"] for j in jobs} == {"done"}
    spans = []
    for started in markers.glob("started-*"):
        _, gpus, start = started.read_text().split()
        spans.append((float(start), float((markers / started.name.replace("started-", "ended-")).read_text()), gpus))
    assert len(spans) == 2 and {gpus for *_, gpus in spans} == {"3"}
    (a, b) = sorted(spans)
    assert b[0] >= a[1], f"two measurements at once on one host: {a[:2]} and {b[:2]}"
    measures = _queue_jobs(database, MEASURE_TASK)
    assert sorted(measures) == sorted(j["id"] for j in jobs)
    assert {(m.lock, m.status) for found in measures.values() for m in found} == {("guard-host-gpu-a", "succeeded")}
    assert len(host.api.comments(REPO, 21)) == len(host.api.comments(REPO, 22)) == 1


def test_a_worker_killed_mid_job_leaves_it_to_another_host_which_posts_it_once(tmp_path: Path, database: str) -> None:
    repo, base, head = origin(tmp_path / "origin")
    host = app_host(tmp_path / "app")
    markers = tmp_path / "markers"
    markers.mkdir()
    env = {"GUARD_TEST_MARKERS": str(markers), "GUARD_TEST_FIRST_SLEEP_S": "60"}
    with host.api, _service(tmp_path, host, database) as service:
        job_id = _send(service, *delivery("pull_request", pull_request(REPO, 9, base, head, str(repo))))["job"]
        killed = _worker(tmp_path, host, database, "gpu-a", env=env).start()
        try:
            _wait_for("measuring", lambda: list(markers.glob("started-*")))
            (started,) = markers.glob("started-*")
            command_pid = int(started.read_text().split()[0])
            killed.kill9()
        finally:
            killed.stop()
        _wait_for("the measuring command killed with its worker", lambda: not _alive(command_pid), 10)
        assert [j["state"] for j in service.jobs()] == ["running"]
        assert host.api.comments(REPO, 9) == []

        time.sleep(float(STALLED_S) + 1)  # its worker's heartbeat is that old now: the job is stalled
        with _worker(tmp_path, host, database, "gpu-b", env=env):
            (job,) = service.wait_jobs(1)
    assert (job["id"], job["state"], job["attempts"]) == (job_id, "done", 2), job
    assert len(list(markers.glob("started-*"))) == 2
    assert len(host.api.comments(REPO, 9)) == 1
    assert len(host.api.check_runs(REPO)) == 1
    ((measured,),) = _queue_jobs(database, MEASURE_TASK).values()
    # procrastinate's retry of the stalled job (its count is of runs), moved to the host that was free for it
    assert (measured.attempts, measured.status, measured.lock) == (2, "succeeded", "guard-host-gpu-b")


def test_a_worker_stopped_mid_job_hands_it_back_for_any_host(tmp_path: Path, database: str) -> None:
    repo, base, head = origin(tmp_path / "origin")
    host = app_host(tmp_path / "app")
    markers = tmp_path / "markers"
    markers.mkdir()
    env = {"GUARD_TEST_MARKERS": str(markers), "GUARD_TEST_FIRST_SLEEP_S": "60"}
    with host.api, _service(tmp_path, host, database) as service:
        job_id = _send(service, *delivery("pull_request", pull_request(REPO, 6, base, head, str(repo))))["job"]
        with _worker(tmp_path, host, database, "gpu-a", env=env) as stopped:
            _wait_for("measuring", lambda: list(markers.glob("started-*")))
            stopped.process.terminate()
            assert stopped.process.wait(timeout=60) == 0  # after its grace period the command is stopped
        (waiting,) = service.jobs()
        assert (waiting["state"], waiting["attempts"]) == ("queued", 1), waiting
        assert "host gpu-a's worker stopped during the job" in waiting["error"]
        with _worker(tmp_path, host, database, "gpu-b", env=env):
            (job,) = service.wait_jobs(1)
    assert (job["id"], job["state"], job["attempts"]) == (job_id, "done", 2), job
    assert len(host.api.comments(REPO, 6)) == 1
    (measures,) = _queue_jobs(database, MEASURE_TASK).values()
    assert sorted((m.lock, m.status) for m in measures) == [("guard-host-gpu-a", "aborted"),
                                                           ("guard-host-gpu-b", "succeeded")]
    assert [t.status for t in _queue_jobs(database, TAKE_TASK)[job_id]] == ["succeeded", "succeeded"]


def test_a_job_that_raised_is_retried_by_procrastinates_retry_strategy(tmp_path: Path, database: str) -> None:
    repo, base, head = origin(tmp_path / "origin")
    host = app_host(tmp_path / "app")
    worker = _worker(tmp_path, host, database, "gpu-a", "--retry-wait-s", "1")
    # the first attempt's output folder cannot be made: a file is in its way (job 1, attempt 1)
    (worker.folder / "jobs" / "1").mkdir(parents=True)
    (worker.folder / "jobs" / "1" / "attempt-1").write_text("in the way")
    with host.api, _service(tmp_path, host, database) as service, worker:
        job_id = _send(service, *delivery("pull_request", pull_request(REPO, 4, base, head, str(repo))))["job"]
        (job,) = service.wait_jobs(1)
    assert job_id == 1
    assert (job["state"], job["attempts"], job["error"]) == ("done", 2, None), job
    assert "FileExistsError" in worker.log.read_text()
    ((measured,),) = _queue_jobs(database, MEASURE_TASK).values()
    assert (measured.attempts, measured.status) == (2, "succeeded")
    assert len(host.api.comments(REPO, 4)) == 1


def test_a_job_and_its_take_are_committed_together_or_not_at_all(database: str) -> None:
    engine = open_engine(database)
    prepare_database(engine, database)
    made = queue_sessions(engine, database)
    fields = {"kind": "confirm", "repo": REPO, "base_sha": "b" * 40, "head_sha": "a" * 40, "detail": {}}
    try:
        with made() as session:
            add_job(session, **fields)
            session.rollback()  # the caller's transaction failed after the job was made: no take is left
        assert _queue_jobs(database, TAKE_TASK) == {}
        with made() as session:
            job_id = add_job(session, **fields).id
            assert _queue_jobs(database, TAKE_TASK) == {}  # not before the commit
            session.commit()
        ((take,),) = _queue_jobs(database, TAKE_TASK).values()
        assert (take.task_kwargs, take.queue, take.queueing_lock, take.status) == (
            {"job_id": job_id}, "guard", f"guard-job-{job_id}", "todo")
        # handed back while that take still waits: the job is queued again, and one take is enough
        owner = "procrastinate-1:gpu-a:worker-1"
        assert take_over(made, job_id, owner, "procrastinate-1:") is not None
        requeue(made, job_id, owner, "host gpu-a's worker stopped", resubmit=True)
        assert job_state(made, job_id) == "queued"
        assert [t.id for t in _queue_jobs(database, TAKE_TASK)[job_id]] == [take.id]
    finally:
        engine.dispose()


def _rows(db: str, query: str) -> list[tuple]:
    with psycopg.connect(db) as connection:
        return connection.execute(query).fetchall()


def _push(repo: Path, before: str, after: str) -> dict:
    return {"ref": "refs/heads/main", "before": before, "after": after, "installation": {"id": INSTALLATION},
            "repository": {"full_name": REPO, "clone_url": str(repo), "default_branch": "main", "private": True}}


def test_a_pushs_candidate_is_confirmed_through_the_queue_by_a_worker_and_alerted_once(
        tmp_path: Path, database: str) -> None:
    step_at, pr = 5, 42  # the sixth commit of main made both series slower; it came from pull request 42
    repo, shas = main_origin(tmp_path / "origin", 9)
    engine = open_engine(database)
    migrate(engine)
    seed_points(sessions(engine), shas[:8], step_at)
    engine.dispose()
    host = app_host(tmp_path / "app")
    host.api.state.commit_pulls[(REPO, shas[step_at])] = [
        {"number": pr, "merge_commit_sha": shas[step_at], "merged_at": "2025-01-01T00:00:00Z"}]
    with host.api, _service(tmp_path, host, database) as service, \
            _worker(tmp_path, host, database, "gpu-a") as worker:
        push = _send(service, *delivery("push", _push(repo, shas[7], shas[8])))
        jobs = service.wait_jobs(2)
        by_kind = {j["kind"]: j for j in jobs}
        assert sorted(by_kind) == ["confirm", "push"] and {j["state"] for j in jobs} == {"done"}, jobs
        confirm = by_kind["confirm"]
        assert (confirm["base_sha"], confirm["head_sha"], confirm["delivery"]) == (
            shas[step_at - 1], shas[step_at], None)
        assert by_kind["push"]["id"] == push["job"]
        steps = service.get("/api/v1/history", params={"repo": REPO}).json()["change_points"]
        assert sorted((c["batch_size"], c["state"], c["confirmation"]["run_id"]) for c in steps) == [
            (1, "confirmed", str(confirm["run"])), (2, "confirmed", str(confirm["run"]))]

        # the same push again, a new delivery: its detection finds the step confirmed, alerted already
        _send(service, *delivery("push", _push(repo, shas[7], shas[8])))
        jobs = service.wait_jobs(3)
    assert sorted(j["kind"] for j in jobs) == ["confirm", "push", "push"]
    # the confirmation was made by the worker that ran the push, and reached the queue as a delivery's job does
    takes, measures = _queue_jobs(database, TAKE_TASK), _queue_jobs(database, MEASURE_TASK)
    assert [(t.status, t.queueing_lock) for t in takes[confirm["id"]]] == [("succeeded", f"guard-job-{confirm['id']}")]
    assert [(m.status, m.lock) for m in measures[confirm["id"]]] == [("succeeded", "guard-host-gpu-a")]
    assert sorted(takes) == sorted(measures) == sorted(j["id"] for j in jobs)
    env = worker.folder / "jobs" / str(confirm["id"]) / "attempt-1" / "job-env.txt"
    assert env.read_text() == "confirm 1,2"  # measured by the worker, at the candidates' batch sizes only
    (issue,) = host.api.issues(REPO)
    (comment,) = host.api.comments(REPO, pr)
    assert issue["user"]["login"] == comment["user"]["login"] == "regression-guard[bot]"
    assert Marker.parse(comment["body"]).key == f"change-point-{shas[step_at]}" and f"#{issue['number']}" in \
        comment["body"]
    assert len(host.api.requests("POST", r"/issues$")) == 1
    assert len(host.api.requests("POST", rf"/issues/{pr}/comments$")) == 1
    assert _rows(database, "SELECT state, pr, issue_number, comment_id, owner FROM alerts") == [
        ("posted", pr, issue["number"], comment["id"], None)]
    assert _rows(database, "SELECT batch_size, state, job_id FROM confirmations ORDER BY batch_size") == [
        (1, "confirmed", confirm["id"]), (2, "confirmed", confirm["id"])]


def test_a_job_failed_for_good_by_its_command_or_its_retries_gets_one_failing_check_run(
        tmp_path: Path, database: str) -> None:
    repo, base, head = origin(tmp_path / "origin")
    host = app_host(tmp_path / "app")
    worker = _worker(tmp_path, host, database, "gpu-a", "--retry-wait-s", "0", env={"GUARD_TEST_EXIT": "3"})
    for attempt in (1, 2, 3):  # job 1 raises on each of procrastinate's tries: its output folders are files
        (worker.folder / "jobs" / "1").mkdir(parents=True, exist_ok=True)
        (worker.folder / "jobs" / "1" / f"attempt-{attempt}").write_text("in the way")
    with host.api, _service(tmp_path, host, database) as service, worker:
        raised = _send(service, *delivery("pull_request", pull_request(REPO, 7, base, head, str(repo))))["job"]
        exited = _send(service, *delivery("pull_request", pull_request(REPO, 8, base, head, str(repo))))["job"]
        jobs = {j["id"]: j for j in service.wait_jobs(2)}
        _wait_for("two check runs", lambda: len(host.api.check_runs(REPO)) == 2)
        time.sleep(1)  # what a second conclusion would take, were there one
    assert raised == 1
    assert (jobs[raised]["state"], jobs[raised]["attempts"]) == ("failed", 3), jobs[raised]
    assert jobs[raised]["error"].startswith("internal error: FileExistsError")
    assert (jobs[exited]["state"], jobs[exited]["attempts"]) == ("failed", 1), jobs[exited]
    assert jobs[exited]["error"].startswith("the measuring command exited 3")
    checks = {c["external_id"]: c for c in host.api.check_runs(REPO)}
    assert len(host.api.requests("POST", r"/check-runs$")) == 2 and not host.api.requests("PATCH", r"/check-runs/")
    for job_id, title, said in (
            (raised, "Failed: the service failed on this job", "FileExistsError"),
            (exited, "Failed: the measuring command exited without writing a report",
             "the compiler ran out of memory\n")):
        check = checks[f"guard-job-{job_id}"]
        assert (check["head_sha"], check["status"], check["conclusion"]) == (head, "completed", "failure")
        assert check["output"]["title"] == title and said in check["output"]["summary"]
    assert host.api.comments(REPO, 7) == host.api.comments(REPO, 8) == []
    measures = _queue_jobs(database, MEASURE_TASK)
    assert [(m.status, m.attempts) for m in measures[raised]] == [("failed", 3)]  # procrastinate's retries spent
    assert _rows(database, "SELECT job_id, check_run_id FROM posted_comments ORDER BY job_id") == [
        (raised, checks[f"guard-job-{raised}"]["id"]), (exited, checks[f"guard-job-{exited}"]["id"])]


def test_a_job_whose_workers_all_died_gets_one_failing_check_run_once_no_retry_is_left(
        tmp_path: Path, database: str) -> None:
    repo, base, head = origin(tmp_path / "origin")
    host = app_host(tmp_path / "app")
    markers = tmp_path / "markers"
    markers.mkdir()
    env = {"GUARD_TEST_MARKERS": str(markers), "GUARD_TEST_EVERY_SLEEP_S": "120"}
    stalled_s = 2.0  # one worker at a time here: no live worker can look stalled
    with host.api, _service(tmp_path, host, database) as service:
        job_id = _send(service, *delivery("pull_request", pull_request(REPO, 8, base, head, str(repo))))["job"]
        for attempt in (1, 2, 3):
            dying = _worker(tmp_path, host, database, f"gpu-{attempt}", "--stalled-s", f"{stalled_s:g}", env=env)
            try:
                dying.start()
                _wait_for(f"try {attempt} measuring",
                          lambda tries=attempt: len(list(markers.glob("started-*"))) == tries)
                dying.kill9()
            finally:
                dying.stop()
            time.sleep(stalled_s + 1)  # its heartbeat is that old now
            assert host.api.check_runs(REPO) == [], f"concluded after try {attempt}, with retries left"
        with _worker(tmp_path, host, database, "gpu-4", "--stalled-s", f"{stalled_s:g}", env=env):
            (job,) = service.wait_jobs(1)
            _wait_for("its check run", lambda: host.api.check_runs(REPO))
            time.sleep(1)  # what a second conclusion would take, were there one
    assert (job["id"], job["state"], job["attempts"]) == (job_id, "failed", 3), job
    assert len(list(markers.glob("started-*"))) == 3
    (check,) = host.api.check_runs(REPO)
    assert (check["conclusion"], check["head_sha"], check["external_id"]) == ("failure", head, f"guard-job-{job_id}")
    assert check["output"]["title"] == "Failed: the measuring host stopped during this job on every try"
    assert "its worker stopped 3 times" in check["output"]["summary"]
    assert len(host.api.requests("POST", r"/check-runs$")) == 1
    ((measured,),) = _queue_jobs(database, MEASURE_TASK).values()
    assert measured.status == "failed"


def test_a_job_an_operator_aborts_through_procrastinate_gets_one_failing_check_run(
        tmp_path: Path, database: str) -> None:
    repo, base, head = origin(tmp_path / "origin")
    host = app_host(tmp_path / "app")
    markers = tmp_path / "markers"
    markers.mkdir()
    env = {"GUARD_TEST_MARKERS": str(markers), "GUARD_TEST_FIRST_SLEEP_S": "60"}
    with host.api, _service(tmp_path, host, database) as service, \
            _worker(tmp_path, host, database, "gpu-a", env=env):
        job_id = _send(service, *delivery("pull_request", pull_request(REPO, 5, base, head, str(repo))))["job"]
        _wait_for("measuring", lambda: list(markers.glob("started-*")))
        ((measuring,),) = _queue_jobs(database, MEASURE_TASK).values()
        app = procrastinate.App(connector=procrastinate.SyncPsycopgConnector(conninfo=database))
        with app.open():
            assert app.job_manager.cancel_job_by_id(measuring.id, abort=True)
        (job,) = service.wait_jobs(1)
        _wait_for("its check run", lambda: host.api.check_runs(REPO))
    assert (job["id"], job["state"], job["error"]) == (job_id, "failed", "aborted through procrastinate"), job
    (check,) = host.api.check_runs(REPO)
    assert (check["conclusion"], check["external_id"]) == ("failure", f"guard-job-{job_id}")
    assert check["output"]["title"] == "Failed: the service's operator stopped this job"
    assert not list(markers.glob("ended-*"))  # the measuring command was stopped, not let finish
    ((aborted,),) = _queue_jobs(database, MEASURE_TASK).values()
    assert aborted.status == "aborted"


def test_a_push_to_a_labelled_public_pull_request_takes_the_label_off_and_defers_nothing(
        tmp_path: Path, database: str) -> None:
    repo, base, head = origin(tmp_path / "origin")
    host = app_host(tmp_path / "app")
    host.api.state.labels[(REPO, 3)] = ["bug", "safe-to-test"]
    payload = pull_request(REPO, 3, base, head, str(repo), action="synchronize", private=False)
    payload["pull_request"]["labels"] = [{"name": "bug"}, {"name": "safe-to-test"}]
    body, headers = delivery("pull_request", payload)
    with host.api, _service(tmp_path, host, database) as service:
        answer = _send(service, body, headers)
        assert (answer["job"], answer["ignored"]) == (None, "trust-label-stale")
        # the service takes it off after answering, in either mode: no worker is needed for it
        _wait_for("the label off", lambda: host.api.labels(REPO, 3) == ["bug"], 20)
        _wait_for("the outcome stored", lambda: _rows(database, "SELECT reason FROM deliveries") == [
            ("trust-label-removed",)], 20)
        assert _send(service, body, headers)["duplicate"] is True
        time.sleep(0.5)  # what a second removal would take, were there one
        assert service.jobs() == []
    (removal,) = host.api.requests("DELETE")
    assert removal.path == f"/repos/{REPO}/issues/3/labels/safe-to-test"
    assert _queue_jobs(database, TAKE_TASK) == {}


def test_the_procrastinate_queue_needs_postgresql(tmp_path: Path) -> None:
    sqlite = f"sqlite:///{tmp_path / 'guard.db'}"
    for argv, said in (
        (["serve", "--queue", "procrastinate", "--work-dir", str(tmp_path)], "--queue procrastinate keeps its queue"),
        (["serve", "--queue", "procrastinate", "--db", "postgresql://guard@127.0.0.1:9/guard", "--workers", "2"],
         "leave --workers out"),
        (["worker", "--db", sqlite], "a worker takes its jobs from procrastinate's queue in PostgreSQL"),
        (["worker", "--db", "postgresql://guard@127.0.0.1:9/guard", "--host-name", "a/b"], "--host-name 'a/b'"),
        (["worker", "--db", f"postgresql://guard:hidden@127.0.0.1:{free_port()}/guard"], "cannot reach --db"),
    ):
        done = subprocess.run([sys.executable, "-m", "guard", *argv], capture_output=True, text=True, timeout=60,
                              cwd=tmp_path)
        assert done.returncode == 2, done.stderr
        assert said in done.stderr and "Traceback" not in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1 and "hidden" not in done.stderr, done.stderr
