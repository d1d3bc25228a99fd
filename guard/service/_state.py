"""What the routes share: the settings, the database's sessions, the App, the workers."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

import anyio
from dataclasses import dataclass, field

from sqlalchemy import Engine
from sqlalchemy.orm import sessionmaker

from guard.service._github_app import GitHubApp
from guard.service._settings import ServiceSettings

if TYPE_CHECKING:  # procrastinate loads only where the queue is procrastinate's
    from guard.service._procrastinate import JobQueue


@dataclass
class ServiceState:
    settings: ServiceSettings
    engine: Engine
    sessions: sessionmaker
    app: GitHubApp | None
    writers: anyio.CapacityLimiter  # deliveries written at once (guard.service._store.concurrent_writers)
    stopping: threading.Event = field(default_factory=threading.Event)
    workers: list[threading.Thread] = field(default_factory=list)
    queue: JobQueue | None = None  # --queue procrastinate: where each job is deferred
