"""Method "docker": an arm's image, built from its Dockerfile with its worktree as the context.

The image is tagged by the build folder's name (the commit and the config key, which holds
the Dockerfile, the build arguments and the build network) and labelled with the same; the
marker records its id. A build is reused only when the tag still names that id, the
labels are the commit's and key's, and the image is built on what BASE_IMAGE names now
(check_image); the worktree is verified as for every method (guard.checkout._cache). Base
and head share every layer their Dockerfile's steps have in common, through the engine's
build cache. A rebuild removes the image it replaces, which the tag no longer names and no
later run would reuse: left, every rebuild would keep a whole image on the runner's disk.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, TextIO

from guard.checkout._cache import Stale
from guard.config._models import BuildConfig, DockerConfig
from guard.sandbox import Container, ContainerError, engine

TAG_REPOSITORY = "regression-guard-arm"
LABEL_SHA = "regression-guard.sha"
LABEL_KEY = "regression-guard.key"


def image_tag(key: str) -> str:
    return f"{TAG_REPOSITORY}:{key}"


def build_image(
    worktree: Path, sha: str, key: str, docker: DockerConfig, log: TextIO, deadline_s: float,
    replacing: str | None = None,
) -> tuple[str, str]:
    """Build the image of `worktree`; (its id, its working directory). BuildFailed says why not.
    The image the tag named before, and `replacing` (the id the stale build's marker recorded),
    are removed once the new one is built, where they are the guard's images of `key`."""
    from docker.errors import DockerException

    dockerfile = worktree / docker.dockerfile
    if not dockerfile.is_file() or dockerfile.is_symlink():
        raise BuildFailed(f"the commit has no file {docker.dockerfile} (build.docker.dockerfile); add the arm's "
                          "Dockerfile or point build.docker.dockerfile at it")
    try:
        client = engine()
    except ContainerError as exc:
        raise BuildFailed(exc.message) from None
    tag = image_tag(key)
    replaced = {_guard_image(client, ref, key) for ref in (tag, replacing) if ref} - {None}
    log.write(f"\n$ docker build -f {docker.dockerfile} --network {docker.build_network} -t {tag} "
              + "".join(f"--build-arg {name}={value} " for name, value in docker.build_args.items()) + ".\n")
    log.flush()
    image_id = None
    try:
        for chunk in client.api.build(
            path=str(worktree), dockerfile=docker.dockerfile, tag=tag, buildargs=docker.build_args,
            labels={LABEL_SHA: sha, LABEL_KEY: key}, network_mode=docker.build_network, pull=False, rm=True,
            forcerm=True, decode=True, timeout=max(deadline_s - time.monotonic(), 1.0),
        ):
            if "stream" in chunk:
                log.write(chunk["stream"])
            if "error" in chunk:
                log.write(f"\n{chunk['error']}\n")
                raise BuildFailed(f"docker build failed: {chunk['error'].strip()}; {_remedy(chunk['error'])}")
            if isinstance(chunk.get("aux"), dict) and "ID" in chunk["aux"]:
                image_id = chunk["aux"]["ID"]
            if time.monotonic() > deadline_s:
                raise BuildFailed("docker build timed out (build.timeout_s); raise build.timeout_s or speed it up")
        log.flush()
    except DockerException as exc:
        said = str(exc).strip().splitlines()[0]
        raise BuildFailed(f"docker build failed: {said}; {_remedy(said)}") from None
    except OSError as exc:  # the engine's socket timed out or closed mid-build
        raise BuildFailed(f"docker build did not finish: {exc}") from None
    if image_id is None:
        raise BuildFailed("docker build ended without an image")
    for old in sorted(replaced - {image_id}):
        _remove_unused(client, old)
    return image_id, _workdir(client.images.get(image_id))


def _remedy(error: str) -> str:
    if "no space left on device" in error.lower():
        return ("the Docker engine's disk is full: remove what no run needs (`guard clean`, "
                "`docker image prune`), or give the engine more room")
    return "fix the Dockerfile or build.docker.build_args"


def _guard_image(client: Any, ref: str, key: str) -> str | None:
    """The id of the image `ref` (a tag or an id) names, when it is one the guard built for
    `key`: a marker that lies can point at no other image."""
    from docker.errors import DockerException

    try:
        found = client.images.get(ref)
    except DockerException:
        return None
    return found.id if (found.labels or {}).get(LABEL_KEY) == key else None


def _remove_unused(client: Any, image_id: str) -> None:
    """Remove an image no tag of the guard's names any more; best effort: one another tag
    names, or a container uses, is left (the engine refuses without force)."""
    from docker.errors import DockerException

    try:
        client.images.remove(image_id)
    except DockerException:
        pass


def check_image(image_id: str, sha: str, key: str, docker: DockerConfig) -> Stale | None:
    """None when the tag of `key` names the image `image_id`, labelled for `sha` and `key`, and
    built on what BASE_IMAGE names now: a base retagged since (a new torch, say) would leave
    one arm on the old base and the other, rebuilt, on the new one."""
    from docker.errors import DockerException, ImageNotFound

    try:
        client = engine()
        found = client.images.get(image_tag(key))
    except (ContainerError, DockerException):
        return Stale("modified", "image")
    labels = found.labels or {}
    if found.id != image_id or labels.get(LABEL_SHA) != sha or labels.get(LABEL_KEY) != key:
        return Stale("modified", "image")
    base_name = docker.build_args.get("BASE_IMAGE")
    if base_name:
        try:
            base_layers = client.images.get(base_name).attrs["RootFS"]["Layers"]
        except ImageNotFound:
            return None  # not on this host: a build would pull it, the layers already here stand
        except DockerException:
            return Stale("modified", "image")
        if found.attrs["RootFS"]["Layers"][: len(base_layers)] != base_layers:
            return Stale("modified", "BASE_IMAGE")
    return None


def remove_image(image_id: str, key: str) -> None:
    """Untag and remove the image of build `key` when the tag still names `image_id`; best effort:
    an engine that is gone, or a tag moved since, leaves it."""
    from docker.errors import DockerException

    try:
        client = engine()
        if client.images.get(image_tag(key)).id == image_id:
            client.images.remove(image_tag(key))
    except (ContainerError, DockerException):
        pass


def image_workdir(image_id: str) -> str:
    return _workdir(engine().images.get(image_id))


def arm_container(image_id: str, workdir: str, build: BuildConfig) -> Container:
    docker = build.docker
    return Container(
        image=image_id, python=docker.python, workdir=workdir, user=docker.user, gpus=docker.gpus,
        cpus=docker.cpus, memory_mb=docker.memory_mb, pids_limit=docker.pids_limit, shm_mb=docker.shm_mb,
        tmpfs_mb=docker.tmpfs_mb,
    )


def _workdir(image: Any) -> str:
    return (image.attrs.get("Config") or {}).get("WorkingDir") or "/"


class BuildFailed(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
