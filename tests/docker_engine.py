"""The Docker engine the Docker tests use, and the base image they need, or a one-line skip."""

from __future__ import annotations

import pytest


def engine_with(base_image: str, no_engine: str = "no Docker engine"):  # type: ignore[no-untyped-def]
    """A client of a Docker engine that answers and holds `base_image`; else the test is skipped."""
    docker = pytest.importorskip("docker")
    try:
        engine = docker.from_env(timeout=600)  # the vfs driver copies a whole image to create a container
        engine.ping()
    except docker.errors.DockerException:
        pytest.skip(no_engine)
    try:
        engine.images.get(base_image)
    except docker.errors.ImageNotFound:
        pytest.skip(f"no base image {base_image}: make it with tools/docker/make-test-base.sh")
    return engine
