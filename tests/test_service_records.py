"""A record of one default-branch commit uploaded to a real `guard serve` over loopback, on a
real PostgreSQL server (and on SQLite): it shows in main's history and on the dashboard, a
retried upload adds nothing (one after the other, or many at once), another record of the
commit replaces it in place, and a record that does not hold up is refused with the reason."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import create_engine, text

from guard.cli import main
from guard.history import gpu_class, points_from_report, workload_name
from guard.record import Record
from tests.postgres_cluster import cluster, postgres_bin
from tests.service_history import REPO, demo_record, demo_report
from tests.service_server import Service

pytestmark = pytest.mark.slow

TOKEN = "ingest-token-for-the-tests-0123456789"
SUBJECT = 'speed up decode <script>alert("subject")</script>'


@pytest.fixture(scope="module")
def postgres_url() -> Iterator[str | None]:
    if postgres_bin() is None:
        yield None
        return
    with cluster() as url:
        yield url


@pytest.fixture(params=["postgresql", "sqlite"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The service's database: a fresh one of the PostgreSQL server per test, or SQLite in tmp_path."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'guard.db'}"
    server = request.getfixturevalue("postgres_url")
    if server is None:
        pytest.skip("no PostgreSQL here (apt-get install postgresql)")
    name = f"records_{abs(hash(request.node.nodeid)) % 10**9}"
    admin = create_engine(server.replace("postgresql://", "postgresql+psycopg://"), isolation_level="AUTOCOMMIT")
    with admin.connect() as db:
        db.execute(text(f"CREATE DATABASE {name}"))
    admin.dispose()
    return server.rsplit("/", 1)[0] + f"/{name}"


def _service(tmp_path: Path, db_url: str) -> Service:
    tokens = tmp_path / "ingest-tokens"
    tokens.write_text(f"{REPO} {TOKEN}\nother/repo {'u' * 32}\n")
    return Service(tmp_path / "service", "--workers", "0", "--ingest-tokens-file", str(tokens), db=db_url)


def _post(service: Service, body: bytes | str, token: str = TOKEN, **params: str) -> httpx.Response:
    return httpx.post(service.url + "/api/v1/records", content=body, params={"repo": REPO} | params,
                      headers={"authorization": f"Bearer {token}"} if token else {}, timeout=30)


def _rows(db_url: str) -> dict[str, int]:
    engine = create_engine(db_url.replace("postgresql://", "postgresql+psycopg://"))
    with engine.connect() as db:
        found = {table: db.execute(text(f"SELECT COUNT(*) FROM {table}")).scalar() for table in
                 ("runs", "samples", "main_points")}
    engine.dispose()
    return found


def _slower(record: Record, factor: float) -> Record:
    """The same commit measured again: every process's step time `factor` times as long."""
    batches = []
    for batch in record.batch_sizes:
        step = batch.stats.gpu_ms_per_step
        values = [v * factor for v in step.values]
        spread = step.model_copy(update={"values": values, "median": step.median * factor, "min": min(values),
                                         "max": max(values)})
        batches.append(batch.model_copy(update={"stats": batch.stats.model_copy(update={"gpu_ms_per_step": spread})}))
    return record.model_copy(update={"batch_sizes": batches, "started_at": "2026-01-02T00:00:00+00:00"})


def test_a_record_joins_mains_history_once_however_often_it_is_sent(tmp_path: Path, db_url: str, monkeypatch,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    record = demo_record(subject=SUBJECT)
    path = tmp_path / "record.json"
    path.write_text(record.model_dump_json(indent=2) + "\n")
    report = demo_report()
    # the points a push's report of this commit would give: the same series, the same figures
    expected = {p.series.batch_size: p for p in points_from_report(report, REPO, order=1)}
    monkeypatch.setenv("GUARD_SERVICE_TOKEN", TOKEN)
    with _service(tmp_path, db_url) as service:
        assert main(["upload", "--record", str(path), "--service-url", service.url, "--repo", REPO]) == 0
        assert ", a new point of main's history" in capsys.readouterr().err
        history = service.get("/api/v1/history", params={"repo": REPO}).json()
        (run_id,) = {p["run"] for p in history["points"]}
        assert {p["batch_size"]: (p["sha"], p["workload"], p["gpu_class"], p["gpu_ms_per_step"], p["gpu_ms_values"],
                                  p["subject"]) for p in history["points"]} == {
            size: (p.sha, p.series.workload, p.series.gpu_class, p.gpu_ms_per_step, p.gpu_ms_values, SUBJECT)
            for size, p in expected.items()}
        assert {p["gpu_class"] for p in history["points"]} == {gpu_class(report.environment,
                                                                         report.gpu_fingerprint).key}
        run = service.get(f"/api/v1/runs/{run_id}").json()
        assert (run["source"], run["base_sha"], run["head_sha"], run["verdict"], run["verdicts"]) == (
            "record", None, record.arm.sha, None, [])
        assert len(run["samples"]) == sum(len(b.stats.gpu_ms_per_step.values) for b in record.batch_sizes)
        rows = _rows(db_url)

        # sent again, by the command and by hand: the same run, nothing added
        assert main(["upload", "--record", str(path), "--service-url", service.url, "--repo", REPO]) == 0
        assert ", already there: nothing changed" in capsys.readouterr().err
        again = _post(service, path.read_bytes())
        assert (again.status_code, again.json()) == (200, {"run": run_id, "outcome": "unchanged"})
        assert _rows(db_url) == rows

        # the commit measured again (a re-run of its workflow): its figures replace the first's, in place
        slower = _post(service, _slower(record, 1.5).model_dump_json())
        assert (slower.status_code, slower.json()) == (200, {"run": run_id, "outcome": "replaced"})
        assert _rows(db_url) == rows
        points = service.get("/api/v1/history", params={"repo": REPO}).json()["points"]
        assert {p["batch_size"]: p["gpu_ms_per_step"] for p in points} == pytest.approx(
            {size: p.gpu_ms_per_step * 1.5 for size, p in expected.items()})

        # the dashboard's page of the repository shows the point, the subject escaped
        page = service.get(f"/repos/{REPO}").text
        assert record.arm.sha[:12] in page
        assert "<script>" not in page and "&lt;script&gt;" in page


def test_many_copies_of_one_upload_at_once_leave_one_run(tmp_path: Path, db_url: str) -> None:
    body = demo_record().model_dump_json()
    with _service(tmp_path, db_url) as service:

        async def send_all() -> list[httpx.Response]:
            async with httpx.AsyncClient(timeout=60) as client:
                return await asyncio.gather(*(client.post(
                    service.url + "/api/v1/records", content=body, params={"repo": REPO},
                    headers={"authorization": f"Bearer {TOKEN}"}) for _ in range(12)))

        answers = asyncio.run(send_all())
    assert sorted(a.status_code for a in answers) == [200] * 11 + [201], [a.text for a in answers]
    assert len({a.json()["run"] for a in answers}) == 1
    assert sorted(a.json()["outcome"] for a in answers) == ["created"] + ["unchanged"] * 11
    assert _rows(db_url)["runs"] == 1 and _rows(db_url)["main_points"] == len(demo_record().batch_sizes)


def test_a_record_that_does_not_hold_up_is_refused_with_the_reason(tmp_path: Path, db_url: str) -> None:
    good = demo_record()
    forged = json.loads(good.model_dump_json())
    forged["batch_sizes"][0]["stats"]["gpu_ms_per_step"]["median"] /= 2  # faster than its processes say
    unmeasured = good.model_copy(update={"arm": good.arm.model_copy(update={"status": "build_failed"}),
                                         "batch_sizes": []})
    with _service(tmp_path, db_url) as service:
        refused = _post(service, json.dumps(forged))
        assert refused.status_code == 422 and refused.json()["error"] == "unfounded-record"
        assert refused.json()["message"].startswith(
            "the upload states figures or parts its own values do not give: batch size 1: "
            "arms[head].gpu_ms_per_step.median ")
        assert "pass the record.json that `guard record` wrote, unedited" in refused.json()["message"]
        assert _post(service, "{not json").status_code == 422
        none = _post(service, unmeasured.model_dump_json())
        assert none.status_code == 422 and "which was not measured (arm.status build_failed)" in none.json()["message"]
        assert _post(service, good.model_dump_json(), token="u" * 32).status_code == 401  # another repository's
        assert _post(service, good.model_dump_json(), token="").status_code == 401
        unknown = _post(service, good.model_dump_json(), main_branch="1")
        assert unknown.status_code == 400 and unknown.json()["message"].startswith("main_branch: is not a parameter")
        assert service.get("/api/v1/history", params={"repo": REPO}).json()["points"] == []
    assert _rows(db_url) == {"runs": 0, "samples": 0, "main_points": 0}


def test_a_record_is_placed_after_the_newest_point_of_the_history(tmp_path: Path, db_url: str) -> None:
    first = demo_record()
    second = first.model_copy(update={"arm": first.arm.model_copy(update={"sha": "e" * 40, "subject": "next"})})
    with _service(tmp_path, db_url) as service:
        assert _post(service, first.model_dump_json()).status_code == 201
        assert _post(service, second.model_dump_json()).status_code == 201
        assert _post(service, first.model_dump_json()).status_code == 200  # a late retry moves nothing
        points = service.get("/api/v1/history", params={"repo": REPO, "batch_size": 1}).json()["points"]
    assert [(p["sha"], p["order"]) for p in points] == [(first.arm.sha, 1), ("e" * 40, 2)]
    assert workload_name(first.workload) == points[0]["workload"]
