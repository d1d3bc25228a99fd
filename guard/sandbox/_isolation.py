"""How the pull request's processes were boxed on this host: the report's fact, decided once
per run from what the kernel gave the guard (guard/sandbox/_cgroup.py, _namespace.py)."""

from __future__ import annotations

import os

from typing import Literal

from pydantic import BaseModel, ConfigDict


class Isolation(BaseModel):
    """What held the pull request's processes. A container (build.method "docker") is a box of
    its own; otherwise each process had a cgroup v2 of its own (`cgroup`) and PID, IPC and mount
    namespaces with private /tmp, /var/tmp and /dev/shm (`namespaces`) where the host gave them."""

    model_config = ConfigDict(frozen=True)

    requested: Literal["kernel", "auto", "none"] = "kernel"  # build.isolation
    container: bool = False
    cgroup: bool = False
    namespaces: bool = False
    as_root: bool = False  # the guard ran as root (and the pull request's code as build.user)

    def boxed(self) -> bool:
        """The kernel held every process: a container, or a cgroup and namespaces each."""
        return self.container or (self.cgroup and self.namespaces)


def host_isolation(requested: Literal["kernel", "auto", "none"], container: bool) -> tuple[Isolation, list[str]]:
    """What this run's launches get (build.isolation `requested`, on this host), and why each
    part the host did not give is missing (its own words, for the progress line and the error).
    It also decides it for this process: after "none", launches get no cgroup or namespaces."""
    from guard.sandbox import _cgroup, _namespace

    as_root = os.geteuid() == 0
    if container:
        return Isolation(requested=requested, container=True, as_root=as_root), []
    if requested == "none":
        _cgroup.enabled = _namespace.enabled = False
        return Isolation(requested=requested, as_root=as_root), []
    _cgroup.enabled = _namespace.enabled = True
    folder, why_cgroup = _cgroup.available()
    why_space = _namespace.available()
    why = [w for w in (why_cgroup if folder is None else "", why_space) if w]
    return Isolation(requested=requested, cgroup=folder is not None, namespaces=not why_space, as_root=as_root), why
