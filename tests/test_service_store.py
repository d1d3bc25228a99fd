"""The data layer: the shipped migrations make exactly the tables the models describe, a
second start migrates nothing, and SQLite runs in WAL mode."""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
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


@pytest.mark.parametrize("url", ["sqlite://", "sqlite:///:memory:", "oracle://x/y"])
def test_a_database_the_service_cannot_share_is_refused(url: str) -> None:
    with pytest.raises(StoreError, match="sqlite:///PATH"):
        open_engine(url)
