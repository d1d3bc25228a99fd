"""The Docker engine the guard's containers run on, and the labels by which a guard knows its
own containers (guard/sandbox/_container.py starts them, _reaper removes those left behind)."""

from __future__ import annotations

from typing import Any

from guard._errors import GuardError

LABEL = "regression-guard.container"  # on every container the guard starts: its run id
LABEL_PID = "regression-guard.guard-pid"
LABEL_START = "regression-guard.guard-start"  # the guard's start time in clock ticks since boot
LABEL_BOOT = "regression-guard.boot-id"
_API_TIMEOUT_S = 60


class ContainerError(GuardError):
    """No engine, no SDK, or an engine that refused the container."""


def engine() -> Any:
    """A client of the Docker engine that DOCKER_HOST (or the default socket) names."""
    try:
        import docker
    except ImportError:
        raise ContainerError(
            "build.method 'docker' needs the Docker SDK for Python: pip install 'regression-guard[docker]'"
        ) from None
    try:
        client = docker.from_env(timeout=_API_TIMEOUT_S)
        client.ping()
    except docker.errors.DockerException as exc:
        raise ContainerError(
            f"build.method is 'docker' but no Docker engine answers ({first_line(exc)}); start dockerd, "
            "point DOCKER_HOST at it, or set build.method to 'venv'"
        ) from None
    return client


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
