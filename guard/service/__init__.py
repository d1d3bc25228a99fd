"""The service: `guard serve` takes the App's webhooks, queues durable jobs, runs them on this
host's GPUs (or dispatches them to self-hosted runners), stores the runs and posts as the App.

`create_app` loads on first use: the command line builds its parser from guard.service._serve
without loading the web stack for every other command."""

from __future__ import annotations

from typing import Any

__all__ = ["ServiceSettings", "SettingsError", "create_app"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from guard.service._app import create_app

        return create_app
    if name in ("ServiceSettings", "SettingsError"):
        from guard.service import _settings

        return getattr(_settings, name)
    raise AttributeError(name)
