"""Confirmations and alerts on a real store (a SQLite file, and a real PostgreSQL server where
one is installed), the alerts posted over loopback to the GitHub stand-in: a confirmation job
queued once per candidate, its run's verdict at each candidate's batch size deciding it
(another round only after one that decided nothing), and one alert per culprit that a later
series updates instead of posting again."""

from __future__ import annotations

import re
import time
import uuid
from pathlib import Path

import pytest
from sqlalchemy import create_engine, func, select, text

from guard._marker import Marker
from guard.history import alert_key
from guard.publish import GitHub, JobFailure, alert_issue_body, failed_check_output
from guard.publish._failed_check import _TO_DO, _WHAT
from guard.service._alerts import raise_alerts
from guard.service._confirm import apply_confirmation_run, detect_and_confirm
from guard.service._queue import take_over
from guard.service._store import migrate, open_engine
from guard.service._store import sessions as make_sessions
from guard.service._tables import Alert, ChangePoint, Confirmation, Job
from tests.github_standin import GitHubStandIn
from tests.postgres_cluster import cluster, postgres_bin
from tests.service_history import REPO, demo_report, seed_points, store_at

SHAS = [f"{n:02x}" * 20 for n in range(1, 10)]  # nine commits of main; the step lands on the sixth
STEP_AT = 5
TOKEN = "alerts-token"


@pytest.fixture(scope="module")
def postgres_server():
    with cluster() as url:
        yield url


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path):
    """The service's store, migrated: a SQLite file, or a fresh database on a real PostgreSQL server."""
    if request.param == "sqlite":
        engine, sessions = store_at(tmp_path / "service")
    else:
        if postgres_bin() is None:
            pytest.skip("no PostgreSQL here (apt-get install postgresql)")
        server = request.getfixturevalue("postgres_server")
        name = f"t_{uuid.uuid4().hex[:12]}"
        admin = create_engine(server.replace("postgresql://", "postgresql+psycopg://"), isolation_level="AUTOCOMMIT")
        with admin.connect() as connection:
            connection.execute(text(f"CREATE DATABASE {name}"))
        admin.dispose()
        engine = open_engine(server.rsplit("/", 1)[0] + f"/{name}")
        migrate(engine)
        sessions = make_sessions(engine)
    yield sessions
    engine.dispose()


def _origin() -> Job:
    return Job(kind="push", repo=REPO, clone_url="file:///origin", installation_id=77)


def _states(sessions) -> dict[int, str]:
    with sessions() as session:
        return {c.batch_size: c.state for c in session.scalars(select(ChangePoint))}


def _with_verdicts(verdicts: dict[int, str]):
    report = demo_report()
    batches = [b.model_copy(update={"verdict": verdicts[b.batch_size]}) for b in report.batch_sizes]
    return report.model_copy(update={"batch_sizes": batches})


def test_a_candidate_is_queued_once_and_decided_by_its_batch_sizes_verdict(store) -> None:
    seed_points(store, SHAS, STEP_AT)
    (job_id,) = detect_and_confirm(store, REPO, _origin())
    assert _states(store) == {1: "candidate", 2: "candidate"}
    assert detect_and_confirm(store, REPO, _origin()) == []  # found again: nothing queued twice
    with store() as session:
        job = session.get(Job, job_id)
        assert (job.kind, job.base_sha, job.head_sha, job.state, job.delivery) == (
            "confirm", SHAS[STEP_AT - 1], SHAS[STEP_AT], "queued", None)
        assert job.detail["batch_sizes"] == [1, 2] and (job.clone_url, job.installation_id) == ("file:///origin", 77)

    # bs 1 passes (the step was noise there), bs 2 decides nothing
    assert apply_confirmation_run(store, job_id, _with_verdicts({1: "pass", 2: "invalid"}), run_id=7) == []
    assert _states(store) == {1: "dismissed", 2: "candidate"}
    # a second round for bs 2 alone; none for the dismissed one
    (second,) = detect_and_confirm(store, REPO, _origin())
    with store() as session:
        assert session.get(Job, second).detail["batch_sizes"] == [2]
    assert apply_confirmation_run(store, second, _with_verdicts({1: "pass", 2: "regression"}), run_id=8) == [
        next(c.change_point for c in _rows(store) if c.batch_size == 2)]
    assert _states(store) == {1: "dismissed", 2: "confirmed"}
    assert detect_and_confirm(store, REPO, _origin()) == []
    with store() as session:
        stored = session.scalars(select(ChangePoint).where(ChangePoint.batch_size == 2)).one()
        assert (stored.confirmation["verdict"], stored.confirmation["run_id"]) == ("regression", "8")
        # a decision lost to a concurrent write is applied again from its confirmation when detection runs
        stored.state, stored.confirmation = "candidate", None
        session.commit()
    detect_and_confirm(store, REPO, _origin())
    assert _states(store) == {1: "dismissed", 2: "confirmed"}


def _rows(sessions) -> list[Confirmation]:
    with sessions() as session:
        return list(session.scalars(select(Confirmation).order_by(Confirmation.id)))


def test_rounds_end_and_a_run_of_another_series_decides_nothing(store) -> None:
    seed_points(store, SHAS, STEP_AT)
    (first,) = detect_and_confirm(store, REPO, _origin())
    apply_confirmation_run(store, first, _with_verdicts({1: "invalid", 2: "invalid"}), run_id=1)
    (second,) = detect_and_confirm(store, REPO, _origin())
    apply_confirmation_run(store, second, _with_verdicts({1: "invalid", 2: "invalid"}), run_id=2)
    assert detect_and_confirm(store, REPO, _origin()) == []  # two rounds that decided nothing: no third
    assert [(r.round, r.state) for r in _rows(store)] == [(1, "undecided"), (1, "undecided"), (2, "undecided"),
                                                          (2, "undecided")]
    assert _states(store) == {1: "candidate", 2: "candidate"}


def test_a_run_on_another_gpu_class_is_unmatched(store) -> None:
    seed_points(store, SHAS, STEP_AT)
    (job_id,) = detect_and_confirm(store, REPO, _origin())
    other = demo_report()
    other = other.model_copy(update={"environment": other.environment.model_copy(update={"gpu": "NVIDIA H200"})})
    assert apply_confirmation_run(store, job_id, other, run_id=1) == []
    assert {r.state for r in _rows(store)} == {"unmatched"}
    assert _states(store) == {1: "candidate", 2: "candidate"}
    assert detect_and_confirm(store, REPO, _origin()) == []  # this host would measure the same class again


def _confirmed(store, workload: str) -> None:
    """Confirmed slowdowns of one culprit at batch sizes 1 and 2 of `workload`, as the paired
    run of a config measuring that workload leaves them."""
    seed_points(store, SHAS, STEP_AT, workload=workload)
    report = demo_report()
    report = report.model_copy(update={"workload": report.workload.model_copy(update={"entry": workload})})
    (job_id,) = detect_and_confirm(store, REPO, _origin())
    assert len(apply_confirmation_run(store, job_id, report, run_id=job_id)) == 2


def test_one_alert_per_culprit_posted_once_and_updated_for_a_later_series(store) -> None:
    culprit = SHAS[STEP_AT]
    with GitHubStandIn({TOKEN: "guard-bot"}) as api:
        api.state.commit_pulls[(REPO, culprit)] = [
            {"number": 41, "merge_commit_sha": "f" * 40, "merged_at": None},  # only holds it
            {"number": 42, "merge_commit_sha": culprit, "merged_at": "2025-01-01T00:00:00Z"},
        ]
        rest = GitHub(TOKEN, api.url)
        # a change point's workload is a string from the config: hostile here
        hostile = "bench.py:make <img src=x onerror=alert(1)> | @octo/team #12"
        _confirmed(store, "bench.py:make")
        _confirmed(store, hostile)
        assert raise_alerts(store, rest, REPO, owner="w1", login="guard-bot", server_url="https://github.com") == [
            alert_key(REPO, culprit)]
        (issue,) = api.issues(REPO)
        (comment,) = api.comments(REPO, 42)
        assert api.comments(REPO, 41) == []
        assert Marker.parse(issue["body"]).key == Marker.parse(comment["body"]).key == f"change-point-{culprit}"
        assert issue["title"].startswith(f"Decode slower since {culprit[:8]}: ") and "(4 series)" in issue["title"]
        assert api.labels(REPO, issue["number"]) == ["performance-regression"]
        assert "pull request #42" in issue["body"] and f"#{issue['number']}" in comment["body"]
        with store() as session:
            worst = max(c.change_pct for c in session.scalars(select(ChangePoint)))
        assert f"step time {worst:+.1f}% (4 series)" in issue["title"]
        for body in (issue["body"], comment["body"]):
            assert body.count("| bench.py:make |") == 2 and "@octo" not in body
            assert not re.search(r"(?<!\\)<img", body) and "\\<img src=x onerror=alert(1)\\>" in body
            assert "\\| @\u200bocto/team \\#\u200b12" in body  # the cell holds, the mention pings no one

        # again: all listed already, nothing written
        writes = len([r for r in api.state.log if r.method != "GET"])
        assert raise_alerts(store, rest, REPO, owner="w1", login="guard-bot", server_url="https://github.com") == []
        assert len([r for r in api.state.log if r.method != "GET"]) == writes

        # a third workload confirms the same culprit later: the one issue and comment, brought up to date
        _confirmed(store, "bench.py:other")
        raise_alerts(store, rest, REPO, owner="w1", login="guard-bot", server_url="https://github.com")
        assert len(api.issues(REPO)) == 1 and len(api.comments(REPO, 42)) == 1
        assert len(api.requests("POST", r"/issues$")) == 1 and len(api.requests("POST", r"/comments$")) == 1
        assert "(6 series)" in api.issues(REPO)[0]["title"] and "bench.py:other" in api.comments(REPO, 42)[0]["body"]
    with store() as session:
        (row,) = session.scalars(select(Alert))
        assert (row.state, row.pr, row.issue_number, row.comment_id, row.owner) == (
            "posted", 42, issue["number"], comment["id"], None)
        assert len(row.listed) == 6


def test_an_alert_held_by_a_running_job_is_left_to_it_and_one_without_a_pull_request_is_an_issue(store) -> None:
    with GitHubStandIn({TOKEN: "guard-bot"}) as api:
        rest = GitHub(TOKEN, api.url)
        _confirmed(store, "bench.py:make")
        with store() as session:  # another worker's job, alive, claimed it
            session.add(Job(kind="confirm", repo=REPO, state="running", lease_owner="w2",
                            lease_expires_s=time.time() + 600, attempts=1, created_s=0.0, detail={}))
            session.add(Alert(dedupe_key=alert_key(REPO, SHAS[STEP_AT]), repo=REPO, culprit_sha=SHAS[STEP_AT],
                              owner="w2", state="posting", listed=[], pr_checked=False, created_s=0.0))
            session.commit()
        assert raise_alerts(store, rest, REPO, owner="w1", login="guard-bot", server_url="https://github.com") == []
        assert api.state.log == []
        with store() as session:  # its job is over: the claim is free
            session.execute(Job.__table__.update().values(state="done"))
            session.commit()
        assert len(raise_alerts(store, rest, REPO, owner="w1", login="guard-bot",
                                server_url="https://github.com")) == 1
        (issue,) = api.issues(REPO)
        assert "pushed to the default branch directly" in issue["body"]
        assert not any(r.path.endswith("/comments") for r in api.state.log)


def test_an_alert_held_by_a_procrastinate_attempt_is_left_to_it_until_another_attempt_takes_its_job(
        store) -> None:
    dead = "procrastinate-7:host-a:worker-1"  # a `guard worker` attempt: running with no lease of the table's
    with GitHubStandIn({TOKEN: "guard-bot"}) as api:
        rest = GitHub(TOKEN, api.url)
        _confirmed(store, "bench.py:make")
        with store() as session:
            job = Job(kind="confirm", repo=REPO, state="running", lease_owner=dead, lease_expires_s=None,
                      attempts=1, created_s=0.0, detail={})
            session.add(job)
            session.add(Alert(dedupe_key=alert_key(REPO, SHAS[STEP_AT]), repo=REPO, culprit_sha=SHAS[STEP_AT],
                              owner=dead, state="posting", listed=[], pr_checked=False, created_s=0.0))
            session.commit()
        # another host's job of the repository: procrastinate says nothing of the attempt's worker, so it holds
        assert raise_alerts(store, rest, REPO, owner="procrastinate-9:host-b:worker-2", login="guard-bot",
                            server_url="https://github.com") == []
        assert api.state.log == []
        # its worker stopped; procrastinate's retry of the same queue job took the job over, and the claim with it
        retry = "procrastinate-7:host-b:worker-3"
        assert take_over(store, job.id, retry, "procrastinate-7:") is not None
        assert raise_alerts(store, rest, REPO, owner=retry, login="guard-bot", server_url="https://github.com") == [
            alert_key(REPO, SHAS[STEP_AT])]
        assert len(api.issues(REPO)) == 1


def test_an_alert_that_github_refused_is_recorded_and_tried_again(store) -> None:
    with GitHubStandIn({TOKEN: "guard-bot"}) as api:
        rest = GitHub(TOKEN, api.url, max_tries=1)
        _confirmed(store, "bench.py:make")
        api.plan("POST", rf"/repos/{REPO}/issues", "5xx", status=503)  # answered before the write: not landed
        api.plan("GET", rf"/repos/{REPO}/issues", "5xx", status=503)
        assert raise_alerts(store, rest, REPO, owner="w1", login="guard-bot", server_url="https://github.com") == []
        with store() as session:
            (row,) = session.scalars(select(Alert))
            assert row.state == "posting" and row.owner is None and "503" in row.error
        assert len(raise_alerts(store, rest, REPO, owner="w1", login="guard-bot",
                                server_url="https://github.com")) == 1
        assert len(api.issues(REPO)) == 1
    with store() as session:
        assert session.scalar(select(func.count()).select_from(Alert).where(Alert.state == "posted")) == 1


def test_the_words_of_a_failed_check_and_of_an_alert() -> None:
    for kind in _WHAT:
        output = failed_check_output(JobFailure(kind=kind, detail="```\nline one\n``` @octo", job_id=5))
        assert output.title.startswith("Failed: ") and len(output.title) <= 255
        assert _TO_DO[kind] in output.summary and "Job 5" in output.summary
        assert "\n````\n```\nline one\n``` @octo\n````\n" in output.summary  # the fence outgrows the detail's
    long = failed_check_output(JobFailure(kind="no-report", detail="x" * 10_000 + "END", job_id=1))
    assert len(long.summary) < 5_000 and "END" in long.summary
    assert set(_WHAT) == set(_TO_DO)


def test_an_alert_body_names_each_paired_run() -> None:
    from guard.history import AlertPlan, ChangePoint as Model, Confirmation as Paired, IssueAlert, SeriesKey

    def point(batch_size: int, run: str) -> Model:
        return Model(series=SeriesKey(repo=REPO, workload="w", batch_size=batch_size, gpu_class="g"),
                     before_sha="a" * 40, after_sha="b" * 40, before_order=1, after_order=2, before_ms=10.0,
                     after_ms=12.0, change_pct=20.0, direction="slower", p_value=1e-6, state="confirmed",
                     confirmation=Paired(good_sha="a" * 40, bad_sha="b" * 40, verdict="regression",
                                         gpu_ms_change_pct=19.5, run_id=run))

    plan = AlertPlan(dedupe_key="k", repo=REPO, culprit_sha="b" * 40, change_points=[point(1, "3"), point(2, "3")],
                     worst_change_pct=20.0, comment=None, issue=IssueAlert(repo=REPO, culprit_sha="b" * 40))
    body = alert_issue_body(plan, "https://github.com", None)
    assert "the service's run `/api/v1/runs/3`" in body
    assert body.count("| 10.00 → 12.00 | +20.0% | regression, +19.5% |") == 2
    assert f"[`bbbbbbbb`](https://github.com/{REPO}/commit/{'b' * 40})" in body
