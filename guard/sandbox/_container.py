"""Running pull-request code in a locked-down container (build.method "docker").

A container gets no network but loopback, only the environment it is given, a read-only
root file system with a tmpfs for scratch, the bind mounts it is given (read-only unless
said), a non-root user, no capabilities and no way to gain any, and limits on CPU, memory
and processes. Its PID namespace holds whatever it starts, so removing the container ends
all of it.

Every container the guard starts is removed, however the guard ends:
- normally, or by SIGTERM/SIGINT/SIGHUP: when run_container returns or unwinds, and at exit;
- by SIGKILL: by a watchdog, a process of its own session started with the first
  container, which waits for the guard's end on a pipe only the guard holds open and then
  removes every container labelled with the guard's run id (guard.sandbox._reaper);
- when both were killed: by the next guard that starts a container on this host, which
  removes those whose guard (pid and start time, labelled) no longer runs.
"""

from __future__ import annotations

import atexit
import glob
import os
import subprocess
import sys
import threading
import uuid
from collections.abc import Sequence
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from pydantic import BaseModel, ConfigDict

from guard.sandbox._engine import LABEL, LABEL_BOOT, LABEL_PID, LABEL_START, ContainerError, engine, first_line
from guard.sandbox._proc import boot_id, process_start
from guard.sandbox._reaper import remove_orphans

SCRATCH = "/tmp"
_LOG_LIMIT_BYTES = 16 << 20  # the harness logs a few lines per pass; more is a runaway print loop



class Container(BaseModel):
    """An arm's image and the limits its processes run under."""

    model_config = ConfigDict(frozen=True)

    image: str  # the image id, never a tag that could be moved
    python: str
    workdir: str  # where the arm's code is in the image: the harness's root
    user: str
    gpus: str  # as build.docker.gpus: auto, all, none, or ids
    cpus: float | None
    memory_mb: int
    pids_limit: int
    shm_mb: int
    tmpfs_mb: int


@dataclass(frozen=True)
class Mount:
    host: Path
    inside: str
    writable: bool = False


def device_requests(gpus: str, host_has_gpu: bool | None = None) -> list[Any]:
    """The GPUs to ask the engine for: none for 'none', and for 'auto' on a host without one."""
    from docker.types import DeviceRequest

    if host_has_gpu is None:
        host_has_gpu = bool(glob.glob("/dev/nvidia[0-9]*"))
    if gpus == "none" or (gpus == "auto" and not host_has_gpu):
        return []
    if gpus in ("auto", "all"):
        return [DeviceRequest(count=-1, capabilities=[["gpu"]])]
    return [DeviceRequest(device_ids=gpus.split(","), capabilities=[["gpu"]])]


class Containers:
    """The containers one box (one guard run) started and has not removed, labelled with its
    run id, and the watchdog that removes them if the guard is killed."""

    def __init__(self) -> None:
        self.run_id = uuid.uuid4().hex
        self.live: set[str] = set()
        self.lock = threading.Lock()
        self.watchdog: subprocess.Popen[bytes] | None = None
        self.pipe: int | None = None  # the watchdog's stdin: its end is the guard's

    def remove_all(self) -> None:
        """Remove every container this box started and has not removed yet."""
        if not self.live:
            return
        try:
            client = engine()
        except ContainerError:
            return
        for container_id in list(self.live):
            self.remove(client, container_id)

    def remove(self, client: Any, container_id: str) -> None:
        from docker.errors import DockerException, NotFound

        try:
            client.api.remove_container(container_id, force=True, v=True)
        except NotFound:
            pass
        except DockerException:
            return  # left in `live`: removed at exit, or by the watchdog
        with self.lock:
            self.live.discard(container_id)

    def start_watchdog(self, client: Any) -> None:
        """Once per box: sweep the containers of guards of this host that no longer run, and
        start the process that removes this box's containers when the guard is killed."""
        if self.watchdog is not None:
            return
        remove_orphans(client)
        read_end, write_end = os.pipe()  # both close-on-exec: only the watchdog gets the read end, as stdin
        package_parent = Path(__file__).resolve().parents[2]
        try:
            self.watchdog = subprocess.Popen(
                [sys.executable, "-m", "guard.sandbox._reaper", self.run_id], stdin=read_end,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=package_parent, start_new_session=True,
            )
        finally:
            os.close(read_end)
        self.pipe = write_end  # held open until the guard ends, however it ends
        atexit.register(self.remove_all)


def run_container(
    containers: Containers,
    container: Container,
    argv: list[str],
    *,
    mounts: list[Mount],
    env: dict[str, str],
    log: IO[bytes],
    timeout_s: float,
    cpuset: Sequence[int] = (),
) -> int | None:
    """Exit code of `argv` run in `container`'s image, its output written to `log`; None when
    it ran past `timeout_s`. The container is removed before this returns, however it ends;
    `containers` (the run's box's) removes it if that cannot."""
    from docker.errors import APIError, DockerException
    from docker.types import LogConfig
    from docker.types import Mount as DockerMount
    from requests.exceptions import ConnectionError, ReadTimeout
    client = engine()
    containers.start_watchdog(client)
    try:
        created = client.containers.create(
            container.image, argv,
            user=container.user, working_dir=container.workdir, environment=env,
            network_mode="none", read_only=True, cap_drop=["ALL"], security_opt=["no-new-privileges"],
            tmpfs={SCRATCH: f"rw,nosuid,nodev,size={container.tmpfs_mb}m"},
            mounts=[DockerMount(m.inside, str(m.host), type="bind", read_only=not m.writable) for m in mounts],
            mem_limit=f"{container.memory_mb}m", memswap_limit=f"{container.memory_mb}m",
            pids_limit=container.pids_limit, shm_size=f"{container.shm_mb}m",
            nano_cpus=int(container.cpus * 1e9) if container.cpus else None,
            cpuset_cpus=",".join(map(str, cpuset)) or None,
            device_requests=device_requests(container.gpus), ipc_mode="private",
            log_config=LogConfig(type="json-file", config={"max-size": f"{_LOG_LIMIT_BYTES}"}),
            labels=_labels(containers.run_id), detach=True,
        )
    except DockerException as exc:
        raise ContainerError(f"the Docker engine refused the container: {first_line(exc)}") from None
    with containers.lock:
        containers.live.add(created.id)
    try:
        try:
            created.start()
        except APIError as exc:
            raise ContainerError(f"the container did not start: {first_line(exc)}") from None
        try:
            status = created.wait(timeout=max(timeout_s, 1.0))
            exited = True
        except (ReadTimeout, ConnectionError):
            exited = False
            with suppress(DockerException):
                created.kill()
        _copy_log(created, log)
        return int(status["StatusCode"]) if exited else None
    finally:
        containers.remove(client, created.id)


def _copy_log(created: Any, log: IO[bytes]) -> None:
    written = 0
    for chunk in created.logs(stdout=True, stderr=True, stream=True, follow=False):
        log.write(chunk[: max(0, _LOG_LIMIT_BYTES - written)])
        written += len(chunk)
    if written > _LOG_LIMIT_BYTES:
        log.write(f"\n[guard] the output went on past {_LOG_LIMIT_BYTES >> 20} MiB; the rest is not kept\n".encode())
    log.flush()


def _labels(run_id: str) -> dict[str, str]:
    return {LABEL: run_id, LABEL_PID: str(os.getpid()), LABEL_START: str(process_start(os.getpid())),
            LABEL_BOOT: boot_id()}
