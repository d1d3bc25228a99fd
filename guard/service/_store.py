"""The data layer's engine: SQLite in WAL mode by default, PostgreSQL by URL, and the
migrations applied at start."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.orm import sessionmaker

from guard._errors import GuardError

# how long a writer waits for SQLite's one write lock before giving up
SQLITE_BUSY_TIMEOUT_S = 30.0


class StoreError(GuardError):
    """The database URL is wrong, or the database cannot be opened or migrated."""


def open_engine(url: str) -> Engine:
    """An engine for `url`: sqlite:///PATH or postgresql://USER@HOST/DB (psycopg 3)."""
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise StoreError(f"--db {url!r} is not a database URL; give sqlite:///PATH or "
                         "postgresql://USER@HOST:PORT/DB") from exc
    if parsed.drivername in ("postgresql", "postgres", "postgresql+psycopg"):
        return create_engine(parsed.set(drivername="postgresql+psycopg"), pool_size=10, max_overflow=20,
                             pool_pre_ping=True)
    if parsed.drivername != "sqlite" or not parsed.database or parsed.database == ":memory:":
        raise StoreError(f"--db {url!r}: the service keeps its data in a file (sqlite:///PATH) or in PostgreSQL "
                         "(postgresql://USER@HOST:PORT/DB)")
    folder = Path(parsed.database).parent
    if not folder.is_dir():
        raise StoreError(f"--db {url!r}: folder {folder} does not exist; make it first")
    engine = create_engine(parsed, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_S, "check_same_thread": False},
                           pool_size=20, max_overflow=20)
    event.listen(engine, "connect", _sqlite_connect)
    event.listen(engine, "begin", _sqlite_begin)
    return engine


def _sqlite_connect(dbapi_connection: Any, _record: Any) -> None:
    # the driver's own transaction handling off: "begin" below opens each one, taking the write lock at once
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")  # readers never wait for the writer
    cursor.execute("PRAGMA synchronous=NORMAL")  # durable at each checkpoint; WAL keeps it consistent
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute(f"PRAGMA busy_timeout={int(SQLITE_BUSY_TIMEOUT_S * 1000)}")
    cursor.close()


def _sqlite_begin(connection: Any) -> None:
    # IMMEDIATE: a transaction that reads then writes cannot fail halfway on another's write lock
    connection.exec_driver_sql("BEGIN IMMEDIATE")


def concurrent_writers(engine: Engine) -> int:
    """How many deliveries are written at once: SQLite has one writer at a time, and requests
    that queue for it in the event loop wait in turn (first come, first written), where threads
    in SQLite's busy handler sleep and retry, in no order (the long tail of answer times)."""
    return 1 if engine.dialect.name == "sqlite" else 16


def migrate(engine: Engine) -> None:
    """Brings the database to the newest migration shipped with the package."""
    run_migrations(engine, lambda config: command.upgrade(config, "head"))


def run_migrations(engine: Engine, step: Callable[[Config], None]) -> None:
    """`step` (an alembic command) on the package's migrations, in one transaction."""
    config = Config()
    config.set_main_option("script_location", "guard.service:migrations")
    sqlite = engine.dialect.name == "sqlite"
    with engine.connect() as connection:
        driver = connection.connection.driver_connection
        if sqlite:  # see below; a pragma that a transaction would ignore, so before it begins
            driver.execute("PRAGMA foreign_keys=OFF")  # type: ignore[union-attr]
        try:
            with connection.begin():
                config.attributes["connection"] = connection
                step(config)
                # SQLite changes a column by making its table again and dropping the old one, which
                # the rows that refer to it would refuse with the checks on: they are checked here
                broken = connection.exec_driver_sql("PRAGMA foreign_key_check").all() if sqlite else []
                if broken:
                    raise StoreError(f"the migration left {len(broken)} row(s) that refer to no row, the first in "
                                     f"table {broken[0][0]}; the database is left as it was")
        finally:
            if sqlite:
                driver.execute("PRAGMA foreign_keys=ON")  # type: ignore[union-attr]


def sessions(engine: Engine, info: dict[str, Any] | None = None) -> sessionmaker:
    """`info` is in every session's .info: guard.service._queue.SUBMIT, where this process's new jobs go."""
    return sessionmaker(engine, expire_on_commit=False, info=info or {})
