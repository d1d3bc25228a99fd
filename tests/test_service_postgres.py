"""The service on a real PostgreSQL server: the migrations applied, 100 concurrent deliveries
with replays giving one job each, and a job leased, killed with the service, retried, posted."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, inspect, text

from tests.postgres_cluster import cluster, postgres_bin
from tests.service_app import JOB_COMMAND, REPO, app_host, origin
from tests.service_server import Service, delivery, pull_request

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(postgres_bin() is None, reason="no PostgreSQL here (apt-get install postgresql)"),
]


def _newest_migration() -> str:
    config = Config()
    config.set_main_option("script_location", "guard.service:migrations")
    return ScriptDirectory.from_config(config).get_current_head()


@pytest.fixture(scope="module")
def postgres_url():
    with cluster() as url:
        yield url


def test_the_service_on_postgresql(tmp_path, postgres_url: str) -> None:
    repo, base, head = origin(tmp_path / "origin")
    host = app_host(tmp_path / "app")
    markers = tmp_path / "markers"
    markers.mkdir()
    env = {"GUARD_TEST_MARKERS": str(markers), "GUARD_TEST_FIRST_SLEEP_S": "60"}
    args = [*host.args(), "--workers", "1", "--lease-s", "2", "--job-command", JOB_COMMAND, "--comment-mode",
            "always"]
    with host.api:
        # queue only first: 100 deliveries at once, 20 of them twice
        with Service(tmp_path / "service", "--workers", "0", db=postgres_url) as service:
            deliveries = [delivery("push", {"ref": "refs/heads/dev", "before": base, "after": head,
                                            "repository": {"full_name": REPO, "default_branch": "main"}})
                          for _ in range(100)]

            async def send_all() -> list[httpx.Response]:
                async with httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=120)) as client:
                    return await asyncio.gather(*(client.post(service.url + "/github/webhook", content=b, headers=h)
                                                  for b, h in deliveries + deliveries[:20]))

            answers = asyncio.run(send_all())
            assert {a.status_code for a in answers} == {202}
            assert sum(a.json()["duplicate"] for a in answers) == 20
            assert all(a.json()["ignored"] == "not-default-branch" for a in answers)

        engine = create_engine(postgres_url.replace("postgresql://", "postgresql+psycopg://"))
        with engine.connect() as db:
            assert db.execute(text("SELECT COUNT(*) FROM deliveries")).scalar() == 100
            assert db.execute(text("SELECT version_num FROM alembic_version")).scalar() == _newest_migration()
        assert {"jobs", "runs", "samples", "verdicts", "main_points", "change_points", "confirmations", "alerts",
                "posted_comments"} <= set(inspect(engine).get_table_names())

        first = Service(tmp_path / "service", *args, db=postgres_url, env=env).start()
        try:
            body, headers = delivery("pull_request", pull_request(REPO, 3, base, head, str(repo)))
            assert httpx.post(first.url + "/github/webhook", content=body, headers=headers).status_code == 202
            deadline = time.monotonic() + 60
            while not list(markers.iterdir()) and time.monotonic() < deadline:
                time.sleep(0.1)
            assert list(markers.iterdir())
            first.kill9()
        finally:
            first.stop()
        with Service(tmp_path / "service", *args, db=postgres_url, env=env) as again:
            (job,) = again.wait_jobs(1)
        assert (job["state"], job["attempts"]) == ("done", 2), job
        assert len(host.api.comments(REPO, 3)) == 1
        with engine.connect() as db:
            assert db.execute(text("SELECT COUNT(*) FROM posted_comments WHERE job_id = :j"),
                              {"j": job["id"]}).scalar() == 1
            assert db.execute(text("SELECT verdict FROM runs WHERE id = :r"), {"r": job["run"]}).scalar() == \
                "regression"
        engine.dispose()
