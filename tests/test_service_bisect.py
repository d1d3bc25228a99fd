"""The service's bisect of a confirmed slowdown that spans several commits, by a real `guard
serve` over loopback: main measured at some commits only, a push completes a step between two
measured commits four commits apart, its confirmation confirms it, one bisect job finds the
commit that made decode slower (guard.bisect's search, each step the measuring command), and
the alert names that commit: its pull request gets the comment, the issue lists every step.
A replayed delivery, the same push again and a restart queue no second bisect."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select, update
from sqlalchemy.orm import sessionmaker

from guard._marker import Marker

from guard.history import ChangePoint, SeriesKey
from guard.measure import find_slow_processes, processes_of, spread
from guard.report import Report
from guard.service._bisect import BISECT_KIND, queue_bisects
from guard.service._procrastinate import MEASURE_TASK, TAKE_TASK
from guard.service._store import migrate, open_engine
from guard.service._store import sessions as make_sessions
from guard.service._tables import Bisect, Job
from guard.service._tables import MainPoint as MainPointRow
from tests.conftest import commit_all, git
from tests.report_fixtures import remeasured
from tests.service_app import INSTALLATION, JOB_COMMAND, REPO, AppHost, app_host
from tests.service_history import demo_report, seed_points, store_at
from tests.service_server import Service, delivery
from tests.test_service_procrastinate import _queue_jobs, database, postgres_server  # noqa: F401  # fixtures
from tests.test_service_procrastinate import _service as procrastinate_service
from tests.test_service_procrastinate import _worker as procrastinate_worker

pytestmark = pytest.mark.slow

COMMITS = 14
CULPRIT = 7  # commit 7 (1-based) adds slow.txt: it and every later commit are slow
MEASURED = [1, 2, 3, 4, 5, 9, 10, 11, 12]  # main's points before the push: none at 6, 7 and 8
SLOW_FILE = "slow.txt"
PR, END_PR = 42, 43  # the culprit's pull request, and the one the range's end came from


def _origin(folder: Path) -> list[str]:
    folder.mkdir(parents=True)
    git(folder, "init", "--quiet", "-b", "main")
    shas = []
    for number in range(1, COMMITS + 1):
        (folder / "engine.py").write_text(f"STEP = {number}\n")
        if number == CULPRIT:
            (folder / SLOW_FILE).write_text("a slower decode\n")
        shas.append(commit_all(folder, f"commit {number}"))
    return shas


def _not_slower(report: Report) -> Report:
    """The demo's report with head measured as base, and base's processes within 0.2% of each
    other, so that the verdict is a clear pass (the demo's CPU spread leaves it inconclusive)."""
    batches = []
    for batch in report.batch_sizes:
        arms = [a.model_copy(update={"gpu_ms_per_step": spread(
            [a.gpu_ms_per_step.median * (1 + 0.001 * (i - 2)) for i in range(len(a.gpu_ms_per_step.values))])})
            if a.arm == report.base else a for a in batch.arms]
        batches.append(batch.model_copy(update={"arms": arms}))
    again = remeasured(report.model_copy(update={"batch_sizes": batches}), 1.0)
    values = {(b.batch_size, metric): {a.arm: getattr(a, field).values for a in b.arms}
              for b in again.decided() for metric, field in (("gpu_ms", "gpu_ms_per_step"), ("tok_per_s", "tok_per_s"))}
    return again.model_copy(update={"slow_processes": find_slow_processes(values, processes_of(values))})


def _push(repo: Path, before: str, after: str) -> dict:
    return {"ref": "refs/heads/main", "before": before, "after": after, "installation": {"id": INSTALLATION},
            "repository": {"full_name": REPO, "clone_url": str(repo), "default_branch": "main", "private": True}}


def _send(service: Service, body: bytes, headers: dict[str, str]) -> dict:
    answer = httpx.post(service.url + "/github/webhook", content=body, headers=headers, timeout=30)
    assert answer.status_code == 202, answer.text
    return answer.json()


def _service(tmp_path: Path, host: AppHost, env: dict[str, str]) -> Service:
    return Service(tmp_path / "service", *host.args(), "--workers", "1", "--lease-s", "2",
                   "--job-command", JOB_COMMAND, env=env)


def _scenario(tmp_path: Path, sessions: sessionmaker) -> tuple[Path, list[str], AppHost, dict[str, str]]:
    """Main's commits, its points seeded in `sessions` at their first-parent positions, the App
    (the culprit's and the range end's pull requests known), and the measuring command's env."""
    repo = tmp_path / "origin"
    shas = _origin(repo)
    measured = [shas[n - 1] for n in MEASURED]
    seed_points(sessions, measured, MEASURED.index(9))
    with sessions() as session:  # each point at its commit's first-parent position
        for number in MEASURED:
            session.execute(update(MainPointRow).where(MainPointRow.sha == shas[number - 1])
                            .values(commit_order=number))
        session.commit()
    pass_report = tmp_path / "pass.json"
    pass_report.write_text(_not_slower(demo_report()).model_dump_json())
    host = app_host(tmp_path / "app")
    for pr, sha in ((PR, shas[CULPRIT - 1]), (END_PR, shas[8])):
        host.api.state.commit_pulls[(REPO, sha)] = [
            {"number": pr, "merge_commit_sha": sha, "merged_at": "2025-01-01T00:00:00Z"}]
    return repo, shas, host, {"GUARD_TEST_SLOW_FILE": SLOW_FILE, "GUARD_TEST_PASS_REPORT": str(pass_report)}


def _steps_found(service: Service, shas: list[str], job_id: int) -> list[dict]:
    """The bisect the change points link to, checked: found commit 7 after runs of 9, 7 and 6."""
    history = service.get("/api/v1/history", params={"repo": REPO}).json()
    links = {c["bisect"] for c in history["change_points"]}
    assert len(links) == 1 and None not in links
    found = service.get(links.pop()).json()
    assert (found["state"], found["first_bad_sha"], found["job"]) == ("found", shas[CULPRIT - 1], job_id)
    assert found["commits"] == shas[5:9]
    # bad first, then halves: commit 9 (slow), 7 (slow), 6 (not): the first slow one is 7
    steps = found["steps"]
    assert [s["sha"] for s in steps] == [shas[8], shas[CULPRIT - 1], shas[5]]
    assert [(s["verdict"], s["bad"]) for s in steps] == [("regression", True), ("regression", True), ("pass", False)]
    slower_pct = max(b.gpu_ms_change.pct for b in demo_report().batch_sizes)  # what the slow report states
    assert [round(s["worst_gpu_ms_change_pct"], 1) for s in steps[:2]] == [round(slower_pct, 1)] * 2
    assert steps[2]["worst_gpu_ms_change_pct"] == 0.0
    return steps


def _alerted(host: AppHost, shas: list[str], steps: list[dict]) -> None:
    """One issue listing every step, one comment on the culprit's pull request, none on the range end's."""
    culprit = shas[CULPRIT - 1]
    (issue,) = host.api.issues(REPO)
    (comment,) = host.api.comments(REPO, PR)
    assert host.api.comments(REPO, END_PR) == []  # the range's end is not blamed
    assert f"since {culprit[:8]}" in issue["title"] and f"pull request #{PR}" in issue["body"]
    assert Marker.parse(comment["body"]).key == f"change-point-{culprit}"
    assert f"#{issue['number']}" in comment["body"] and "found it in 3 paired runs" in comment["body"]
    chain = [line for line in issue["body"].splitlines() if line.startswith("| ") and "/commit/" in line
             and line.split(" | ")[0].removeprefix("| ").isdigit()]
    assert [line.split(" | ")[0] for line in chain] == ["| 1", "| 2", "| 3"]
    for line, step in zip(chain, steps):
        assert step["sha"][:8] in line and f"{step['worst_gpu_ms_change_pct']:+.1f}%" in line
    assert "regression (slower)" in chain[0] and "pass (not slower)" in chain[2]
    assert len(host.api.requests("POST", r"/issues$")) == 1
    assert len(host.api.requests("POST", rf"/issues/{PR}/comments$")) == 1


def test_a_change_point_over_four_commits_is_bisected_once_and_its_culprit_alerted(tmp_path: Path) -> None:
    engine, sessions = store_at(tmp_path / "service")
    repo, shas, host, env = _scenario(tmp_path, sessions)
    engine.dispose()
    culprit, end = shas[CULPRIT - 1], shas[8]
    with host.api:
        with _service(tmp_path, host, env) as service:
            first = delivery("push", _push(repo, shas[11], shas[12]))
            push = _send(service, *first)
            jobs = service.wait_jobs(3)
            by_kind = {j["kind"]: j for j in jobs}
            assert sorted(by_kind) == ["bisect", "confirm", "push"] and {j["state"] for j in jobs} == {"done"}, jobs
            assert (by_kind["confirm"]["base_sha"], by_kind["confirm"]["head_sha"]) == (shas[4], end)
            bisect_job = by_kind["bisect"]
            assert (bisect_job["base_sha"], bisect_job["head_sha"], bisect_job["delivery"]) == (shas[4], end, None)
            assert bisect_job["id"] > by_kind["confirm"]["id"] > push["job"]

            steps = _steps_found(service, shas, bisect_job["id"])
            for number, step in enumerate(steps, 1):  # each step's own run, in the bisect's folder
                asked = service.work_dir / "jobs" / str(bisect_job["id"]) / "bisect" / step["out_dir"] / "job-env.txt"
                assert asked.read_text() == "bisect 1,2", number

            _alerted(host, shas, steps)
            page = service.get(f"/repos/{REPO}").text
            assert page.count('class="bisect-step"') == 2 * 3  # the bisect under each series it covers
            # commits link to the server of the App's API: the stand-in's
            assert f'first slower commit <a href="{host.api.url}/{REPO}/commit/{culprit}">' in page

            # a replayed delivery: no job; the same push as a new delivery: a push job, no second bisect
            assert _send(service, *first) == push | {"duplicate": True}
            _send(service, *delivery("push", _push(repo, shas[11], shas[12])))
            assert len(service.wait_jobs(4)) == 4

        # a restart, and main grows: no bisect again, no alert again
        with _service(tmp_path, host, env) as again:
            _send(again, *delivery("push", _push(repo, shas[12], shas[13])))
            jobs = again.wait_jobs(5)
    assert sorted(j["kind"] for j in jobs) == ["bisect", "confirm", "push", "push", "push"]
    assert {j["state"] for j in jobs} == {"done"}
    _alerted(host, shas, steps)
    db = sqlite3.connect(tmp_path / "service" / "guard.db")
    assert db.execute("SELECT before_sha, after_sha, state, first_bad_sha, job_id FROM bisects").fetchall() == [
        (shas[4], end, "found", culprit, bisect_job["id"])]
    assert db.execute("SELECT culprit_sha, state, pr FROM alerts").fetchall() == [(culprit, "posted", PR)]
    db.close()


def _point(before: int, after: int, state: str = "confirmed") -> ChangePoint:
    return ChangePoint(series=SeriesKey(repo=REPO, workload="bench.py:make", batch_size=1, gpu_class="cpu-x"),
                       before_sha=f"{before:040x}", after_sha=f"{after:040x}", before_order=before,
                       after_order=after, before_ms=10.0, after_ms=11.0, change_pct=10.0, direction="slower",
                       p_value=1e-6, state=state)


def test_only_a_confirmed_slowdown_over_several_commits_gets_a_bisect_and_only_one(tmp_path: Path) -> None:
    engine, sessions = store_at(tmp_path / "service")
    one_commit, several, candidate = _point(4, 5), _point(10, 14), _point(20, 24, state="candidate")
    with sessions() as session:
        origin = Job(kind="push", repo=REPO, clone_url="/nowhere", state="done", attempts=1, created_s=0.0, detail={})
        session.add(origin)
        session.flush()
        queued = queue_bisects(session, REPO, [one_commit, several, candidate], origin)
        session.commit()
        assert len(queued) == 1
        again = queue_bisects(session, REPO, [one_commit, several, candidate], origin)  # a replay, a restart
        session.commit()
        assert again == []
        (job,) = session.scalars(select(Job).where(Job.kind == BISECT_KIND))
        (row,) = session.scalars(select(Bisect))
        assert (job.id, job.base_sha, job.head_sha, job.detail["batch_sizes"]) == (
            queued[0], several.before_sha, several.after_sha, [1])
        assert (row.job_id, row.state, row.change_points, row.workload) == (job.id, "queued", [several.id],
                                                                           "bench.py:make")
    engine.dispose()


def test_a_bisect_goes_through_procrastinates_queue_once(tmp_path: Path, database: str) -> None:  # noqa: F811
    """With `--queue procrastinate` the bisect is made by the worker whose run confirmed the step,
    reaches the queue as every job does, runs on a `guard worker` host, and is queued once."""
    engine = open_engine(database)
    migrate(engine)
    repo, shas, host, env = _scenario(tmp_path, make_sessions(engine))
    engine.dispose()
    with host.api, procrastinate_service(tmp_path, host, database) as service, \
            procrastinate_worker(tmp_path, host, database, "gpu-a", env=env) as worker:
        _send(service, *delivery("push", _push(repo, shas[11], shas[12])))
        jobs = service.wait_jobs(3)
        by_kind = {j["kind"]: j for j in jobs}
        assert sorted(by_kind) == ["bisect", "confirm", "push"] and {j["state"] for j in jobs} == {"done"}, jobs
        steps = _steps_found(service, shas, by_kind["bisect"]["id"])
        # the same push again, a new delivery: the step is confirmed and bisected already
        _send(service, *delivery("push", _push(repo, shas[11], shas[12])))
        jobs = service.wait_jobs(4)
    assert sorted(j["kind"] for j in jobs) == ["bisect", "confirm", "push", "push"]
    bisect_id = by_kind["bisect"]["id"]
    takes, measures = _queue_jobs(database, TAKE_TASK), _queue_jobs(database, MEASURE_TASK)
    assert [t.status for t in takes[bisect_id]] == ["succeeded"]
    assert [(m.status, m.lock) for m in measures[bisect_id]] == [("succeeded", "guard-host-gpu-a")]
    assert (worker.folder / "jobs" / str(bisect_id) / "bisect" / "bisect.json").is_file()
    _alerted(host, shas, steps)
