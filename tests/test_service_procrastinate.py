"""The procrastinate queue on a real PostgreSQL server: `guard serve --queue procrastinate`
defers each job, real `guard worker` processes measure it with the stand-in command in a
real clone and post as the App to the GitHub stand-in over loopback; a replayed delivery
queues nothing twice, one host measures one job at a time however many workers run as it,
a job that raised is retried by procrastinate's retry strategy, and a worker killed with
SIGKILL mid-job leaves its job to another host, which posts it once."""

from __future__ import annotations

import os
import signal
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
from guard.service._procrastinate import MEASURE_TASK, TAKE_TASK
from tests.postgres_cluster import cluster, postgres_bin
from tests.service_app import JOB_COMMAND, REPO, AppHost, app_host, origin
from tests.service_server import Service, delivery, free_port, pull_request

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


class Worker:
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

    def kill9(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def __enter__(self) -> Worker:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()


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
        health = httpx.get(service.url + "/healthz").json()
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
        run = httpx.get(f"{service.url}/api/v1/runs/{job['run']}").json()
        assert (run["verdict"], run["head_sha"]) == ("regression", head)
        queues = {q["name"]: q for q in httpx.get(service.url + "/healthz").json()["queues"]}
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
