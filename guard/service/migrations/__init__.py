"""Alembic migrations of the service's tables, applied when `guard serve` starts."""
