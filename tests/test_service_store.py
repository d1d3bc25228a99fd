"""The data layer: the shipped migrations are one line of revisions (one head) and make
exactly the tables the models describe, a second start migrates nothing, and SQLite runs in
WAL mode."""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import text

from guard.service._store import StoreError, migrate, open_engine
from guard.service._tables import Base


def test_the_migrations_make_what_the_models_describe(tmp_path: Path) -> None:
    engine = open_engine(f"sqlite:///{tmp_path / 'guard.db'}")
    migrate(engine)
    migrate(engine)  # a restart: already at head, nothing done twice
    with engine.connect() as connection:
        assert compare_metadata(MigrationContext.configure(connection), Base.metadata) == []
        assert connection.execute(text("PRAGMA journal_mode")).scalar() == "wal"
        assert connection.execute(text("SELECT COUNT(*) FROM alembic_version")).scalar() == 1
    engine.dispose()


def test_the_migrations_have_one_head() -> None:
    # two branches that each add a migration on the same parent give two heads: `upgrade head` refuses them
    config = Config()
    config.set_main_option("script_location", "guard.service:migrations")
    script = ScriptDirectory.from_config(config)
    heads = script.get_heads()
    assert len(heads) == 1, f"migration heads {heads}: give one of them the other as down_revision"
    assert [r.revision for r in script.walk_revisions()][-1] == "0001"  # one line down to the first


@pytest.mark.parametrize("url", ["sqlite://", "sqlite:///:memory:", "oracle://x/y"])
def test_a_database_the_service_cannot_share_is_refused(url: str) -> None:
    with pytest.raises(StoreError, match="sqlite:///PATH"):
        open_engine(url)


def test_change_points_are_found_again_after_each_push_and_keep_their_state(tmp_path: Path) -> None:
    import random

    from sqlalchemy import select

    from guard.service._series import redetect
    from guard.service._store import sessions as make_sessions
    from guard.service._tables import ChangePoint, Job, MainPoint, Run

    engine = open_engine(f"sqlite:///{tmp_path / 'guard.db'}")
    migrate(engine)
    sessions = make_sessions(engine)
    noise = random.Random(7)
    with sessions() as session:
        session.add(Job(id=1, kind="push", repo="octo/engine", state="done", attempts=1, created_s=0.0, detail={}))
        session.add(Run(id=1, job_id=1, source="job", repo="octo/engine", base_sha="b" * 40, head_sha="a" * 40,
                        verdict="pass", workload="bench.py:make", gpu_class="cpu-x", report_json="{}", created_s=0.0))
        session.flush()

        def point(order: int, ms: float) -> MainPoint:
            return MainPoint(repo="octo/engine", workload="bench.py:make", batch_size=1, gpu_class="cpu-x",
                             sha=f"{order:040x}", commit_order=order, subject=f"commit {order}", run_id=1,
                             gpu_ms_per_step=ms, gpu_ms_values=[ms], tok_per_s=None, gpu_timed=False,
                             created_s=float(order))

        # 20 commits at 10 ms, then 20 at 11 ms (+10%), each with 0.5% noise
        session.add_all(point(n, (10.0 if n <= 20 else 11.0) * (1 + noise.gauss(0, 0.005))) for n in range(1, 41))
        session.commit()
    assert redetect(sessions, "octo/engine") == 1
    assert redetect(sessions, "octo/engine") == 1  # found again, not stored twice
    with sessions() as session:
        (step,) = session.scalars(select(ChangePoint))
        assert (step.before_sha, step.after_sha, step.direction, step.state) == (
            f"{20:040x}", f"{21:040x}", "slower", "candidate")
        assert 9 < step.change_pct < 11
        step.state = "confirmed"  # as a paired run of both sides would decide
        session.add_all(point(n, 11.0 * (1 + noise.gauss(0, 0.005))) for n in range(41, 46))
        session.commit()
    redetect(sessions, "octo/engine")
    with sessions() as session:
        assert [(c.after_sha, c.state) for c in session.scalars(select(ChangePoint))] == [(f"{21:040x}", "confirmed")]
    engine.dispose()


def test_the_records_migration_keeps_the_runs_before_it_and_its_downgrade_drops_only_the_records(
        tmp_path: Path) -> None:
    from alembic import command

    from guard.service._records import store_record, store_run
    from guard.service._store import run_migrations
    from guard.service._store import sessions as make_sessions
    from tests.service_history import REPO, demo_record, demo_report

    engine = open_engine(f"sqlite:///{tmp_path / 'guard.db'}")
    sessions = make_sessions(engine)

    def rows() -> tuple[list[tuple[int, str]], set[int], set[int]]:
        with engine.connect() as connection:
            return (connection.execute(text("SELECT id, source FROM runs ORDER BY id")).all(),
                    {r for (r,) in connection.execute(text("SELECT DISTINCT run_id FROM main_points"))},
                    {r for (r,) in connection.execute(text("SELECT DISTINCT run_id FROM samples"))})

    # a database of the schema before it, holding a run of main with its samples and points
    run_migrations(engine, lambda config: command.upgrade(config, "0003"))
    with engine.begin() as connection:
        connection.execute(text(
            "INSERT INTO runs (id, source, repo, base_sha, head_sha, verdict, workload, gpu_class, report_json, "
            "created_s) VALUES (1, 'ingest', :repo, :sha, :sha, 'pass', 'w', 'g', '{}', 0)"), {"repo": REPO,
                                                                                               "sha": "a" * 40})
        connection.execute(text("INSERT INTO samples (run_id, arm, batch_size, repeat, gpu_ms_per_step) "
                                "VALUES (1, 'head', 1, 0, 2.5)"))
    migrate(engine)
    assert rows() == ([(1, "ingest")], set(), {1})
    kept = store_run(sessions, demo_report(), repo=REPO, source="ingest", main_branch=True)
    record = store_record(sessions, demo_record(), repo=REPO).run_id
    assert rows() == ([(1, "ingest"), (kept, "ingest"), (record, "record")], {kept, record}, {1, kept, record})

    run_migrations(engine, lambda config: command.downgrade(config, "0003"))
    assert rows() == ([(1, "ingest"), (kept, "ingest")], {kept}, {1, kept})
    migrate(engine)  # and up again
    assert rows() == ([(1, "ingest"), (kept, "ingest")], {kept}, {1, kept})
    engine.dispose()
