"""The box the pull request's processes run in on this host: chosen once per run, from what the
host gives and what the base's config asks (build.isolation), and passed to whatever launches
them (the build's steps, the harness's processes). Nothing in the sandbox decides it again.

Threat model: the pull request's code is hostile. It runs as an unprivileged build user where
the guard is root (guard/sandbox/_user.py), with an allowlisted environment (_env), and must not
outlive its launch (a daemon in a session of its own, a chain of forks), reach another launch
(the other arm's process, a later one), or leave files where another launch finds them. The box
is what holds each launch to that, mechanism by mechanism, as the host allows."""

from __future__ import annotations

import os
from collections import Counter
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, NamedTuple

from pydantic import BaseModel, ConfigDict

from guard.sandbox import _cgroup, _namespace
from guard.sandbox._container import Containers
from guard.sandbox._groups import Groups
from guard.sandbox._temp import SharedTemp

Requested = Literal["kernel", "auto", "none"]


class Isolation(BaseModel):
    """What held the pull request's processes. A container (build.method "docker") is a box of
    its own; otherwise each process had a cgroup v2 of its own (`cgroup`) and PID, IPC and mount
    namespaces with private /tmp, /var/tmp and /dev/shm (`namespaces`) where the host gave them."""

    model_config = ConfigDict(frozen=True)

    requested: Requested = "kernel"  # build.isolation
    container: bool = False
    cgroup: bool = False
    namespaces: bool = False
    as_root: bool = False  # the guard ran as root (and the pull request's code as build.user)

    def boxed(self) -> bool:
        """The kernel held every process: a container, or a cgroup and namespaces each."""
        return self.container or (self.cgroup and self.namespaces)


class Leftovers(NamedTuple):
    """What a box's launches left and the sweeps ended and removed, by the arm (`Launch.owner`)
    whose process left it: the report's fact."""

    processes: Counter[str]  # left running (in a session of their own, or in its cgroup), killed
    temp_entries: Counter[str]  # files and folders left in the shared temp folders, removed


@dataclass(frozen=True)
class Box:
    """What holds each launch of one run (`launch`, guard/sandbox/_launch.py), one field a
    mechanism; `isolation` is what the report says of them.

    - always: a process group of its own per launch, killed when its first process ends, and
      every group at the guard's end (`groups`); the build user's fresh home per process and
      its leftovers in the shared temp folders removed (`temp`);
    - `cgroups`: this guard's folder of cgroups v2 (_cgroup): a leaf per launch, killed whole;
    - `spaces`: PID, IPC and mount namespaces with a private /tmp per launch (_namespace);
    - a container (build.method "docker") is a box of its own: `containers` are the run's
      (_container: run_container), removed however the guard ends.

    A new mechanism (files, network, resources, time) is a field here, set by `choose_box` from
    what the host gives, said in `Isolation`, and applied where `launch` starts a process."""

    isolation: Isolation = field(default_factory=Isolation)
    cgroups: Path | None = None
    spaces: bool = False
    missing: tuple[str, ...] = ()  # why each part the host did not give is missing, in its own words
    groups: Groups = field(default_factory=Groups, compare=False, repr=False)
    temp: SharedTemp = field(default_factory=SharedTemp, compare=False, repr=False)
    containers: Containers = field(default_factory=Containers, compare=False, repr=False)
    left: Leftovers = field(default_factory=lambda: Leftovers(Counter(), Counter()), compare=False, repr=False)

    def held(self) -> AbstractContextManager[None]:
        """For a run's length: what its launches started ends with it, and with the signals that
        stop the guard (SIGTERM, SIGINT, SIGHUP)."""
        return self.groups.held()


def choose_box(requested: Requested = "auto", *, container: bool = False) -> Box:
    """This run's box: what the host gives of what build.isolation `requested` asks ("kernel"
    and "auto" take what it gives, and the caller decides whether missing parts stop the run;
    "none" takes no cgroup or namespaces), or a container's (`container`: build.method "docker")."""
    as_root = os.geteuid() == 0
    if container or requested == "none":
        return Box(Isolation(requested=requested, container=container, as_root=as_root))
    cgroups, why_cgroup = _cgroup.folder()
    why_space = _namespace.available()
    return Box(
        Isolation(requested=requested, cgroup=cgroups is not None, namespaces=not why_space, as_root=as_root),
        cgroups=cgroups, spaces=not why_space, missing=tuple(why for why in (why_cgroup, why_space) if why),
    )
