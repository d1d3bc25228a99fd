"""The service's own packages, pyproject's `service` extra: the Action's install leaves them out,
so `guard serve` and `guard worker` first check that they are there and otherwise say what to install."""

from __future__ import annotations

import importlib.util

from guard._errors import GuardError

# the import names of the `service` extra's packages (tests/test_packaging.py holds them to pyproject.toml)
SERVICE_MODULES = ("starlette", "uvicorn", "sqlalchemy", "alembic", "githubkit", "hishel", "psycopg", "procrastinate")
SERVICE_INSTALL = "pip install 'regression-guard[service]'"


def require_service_packages(command: str) -> None:
    missing = [name for name in SERVICE_MODULES if importlib.util.find_spec(name) is None]
    if missing:
        raise GuardError(f"`guard {command}` needs the service's packages, and {', '.join(missing)} "
                         f"{'is' if len(missing) == 1 else 'are'} not installed: {SERVICE_INSTALL}")
