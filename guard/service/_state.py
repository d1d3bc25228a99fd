"""What the routes share: the settings, the database's sessions, the App, the workers."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from sqlalchemy import Engine
from sqlalchemy.orm import sessionmaker

from guard.service._github_app import GitHubApp
from guard.service._settings import ServiceSettings


@dataclass
class ServiceState:
    settings: ServiceSettings
    engine: Engine
    sessions: sessionmaker
    app: GitHubApp | None
    stopping: threading.Event = field(default_factory=threading.Event)
    workers: list[threading.Thread] = field(default_factory=list)
