"""Alembic's entry: the connection comes from the service (guard.service._store.migrate)."""

from __future__ import annotations

from alembic import context

from guard.service._tables import Base

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=Base.metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
