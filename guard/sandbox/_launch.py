"""Starting the pull request's processes in the run's box (guard/sandbox/_box.py): one or more
at once (the ranks of one workload), each in a session (process group) of its own, as the
pull-request user where there is one, never outliving its launch.

Each process runs in a cgroup of its own where the box has cgroups, and in the launch's
namespaces where it has spaces; its group is killed when its first process ends, before that
process is reaped, and the first process of several to exit non-zero ends the others (ranks of
one workload wait for each other forever). What a process left behind is swept when the launch
ends (guard/sandbox/_sweep.py); the build user's files in the shared temp folders go the same
way (guard/sandbox/_temp.py)."""

from __future__ import annotations

import errno
import os
import select
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, ExitStack, nullcontext
from pathlib import Path
from typing import IO, Any, NamedTuple

from guard.sandbox import _cgroup as cgroup
from guard.sandbox import _namespace as namespace
from guard.sandbox._box import Box
from guard.sandbox._proc import kill_group, threads_children
from guard.sandbox._reach import LaunchError, check_reachable, identity
from guard.sandbox._sweep import adopt_orphans, sweep_after
from guard.sandbox._user import PrUser

POLL_S = 0.02  # how often exits are looked for where the kernel has no pidfd (before Linux 5.3)


class Launch(NamedTuple):
    """One process of a launch: its command (a string runs in the shell) and where it runs.
    With `user`, it runs as that user, with no other group, a fresh home and temp folder, and
    `cwd` and `reads` are checked to be in its reach first."""

    cmd: Sequence[str] | str
    stdout: IO[Any] | int  # stdout and stderr both
    cwd: Path | None = None
    env: Mapping[str, str] | None = None
    user: PrUser | None = None
    reads: Sequence[Path] = ()
    pass_fds: Sequence[int] = ()  # descriptors it inherits (a pipe the guard reads, say)
    owner: str = ""  # the arm it runs for: what it leaves is counted for it (`Box.left`)


class Together(NamedTuple):
    """How a launch's processes ended: an exit code each, None for one still running at the
    timeout or ended by the guard because `failed` (the first seen to exit non-zero) had."""

    codes: list[int | None]
    failed: int | None


def launch(box: Box, launches: Sequence[Launch], *, timeout_s: float) -> Together:
    """Start every process of `launches` at once in `box`, and wait for them all, or for the
    first to exit non-zero, or for `timeout_s`; whatever still runs then is killed."""
    if timeout_s <= 0:
        return Together([None] * len(launches), None)
    for one in launches:
        if one.user is not None:
            with box.groups.spawning:  # run to its end before a sweep looks: it is the guard's own check
                check_reachable(one.user, [p for p in (one.cwd, *one.reads, Path(tempfile.gettempdir()))
                                           if p is not None])
    users = list(dict.fromkeys(one.user for one in launches if one.user is not None))
    subreaper = bool(users) and adopt_orphans()
    procs: list[subprocess.Popen[bytes]] = []
    leaves: list[Path | None] = []
    codes: list[int | None] = [None] * len(launches)
    reaped: set[int] = set()
    boxed: list[int | None] = []  # what each process's cgroup held besides it when it ended

    def reap(index: int) -> None:
        boxed.append(_end(box, procs[index], leaves[index]))
        codes[index] = procs[index].returncode
        reaped.add(index)

    with ExitStack() as held:
        held.enter_context(box.temp.holding(users))
        for user in users:
            box.temp.clear(user)  # what a run before this one left (killed, it could not): nobody's to count
        try:
            homes = [held.enter_context(box.temp.fresh_home(one.user)) for one in launches]
            # one space for all: ranks of one workload share their /dev/shm and IPC (NCCL's shared memory)
            space = held.enter_context(_space(box, launches, homes))
            for one, home in zip(launches, homes, strict=True):
                leaves.append(held.enter_context(cgroup.leaf(box.cgroups)))
                with box.groups.spawning:
                    proc = _spawn(one, home, leaves[-1], space)
                    box.groups.live[proc.pid] = proc
                procs.append(proc)
            failed = _wait(procs, reaped, reap, time.monotonic() + timeout_s)
        finally:
            for index in range(len(procs)):  # what still runs is ended by the guard: no exit code
                if index not in reaped:
                    boxed.append(_end(box, procs[index], leaves[index]))
            counted = None if not boxed or None in boxed else sum(n for n in boxed if n is not None)
            for user in users or [None]:
                sweep_after(box, launches[0].stdout, launches[0].owner, user, subreaper, counted)
    return Together(codes, failed)


def _wait(procs: list[subprocess.Popen[bytes]], reaped: set[int], reap: Callable[[int], None],
          deadline: float) -> int | None:
    """Reap each process as it exits, until all have, one exits non-zero (its index), or the deadline."""
    failed = None
    while failed is None and len(reaped) < len(procs) and (left := deadline - time.monotonic()) > 0:
        exited = [index for index in range(len(procs)) if index not in reaped and _exited(procs[index])]
        for index in exited:
            reap(index)
        failed = next((index for index in exited if procs[index].returncode != 0), None)
        if not exited:
            _until_one_exits([procs[i].pid for i in range(len(procs)) if i not in reaped], left)
    for index in range(len(procs)):  # a peer may have exited too, of the same cause: its code counts
        if index not in reaped and _exited(procs[index]):
            reap(index)
    return failed


def _until_one_exits(pids: list[int], left_s: float) -> None:
    fds: list[int] = []
    try:
        fds = [os.pidfd_open(pid) for pid in pids]
        select.select(fds, [], [], left_s)
    except (AttributeError, OSError):  # no pidfd (before Linux 5.3): poll
        time.sleep(min(left_s, POLL_S))
    finally:
        for fd in fds:
            os.close(fd)


def _exited(proc: subprocess.Popen[bytes]) -> bool:
    """Whether `proc` has exited; left unreaped, so that its group's id is not reused."""
    try:
        return os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def _end(box: Box, proc: subprocess.Popen[bytes], leaf: Path | None) -> int | None:
    """Kill `proc`'s cgroup and group, then reap it; how many processes besides it its cgroup
    still held (None: no cgroup). The group is killed before the reap: its id is still `proc`'s."""
    left = None
    if leaf is not None:
        own = {proc.pid, *threads_children(proc.pid)}  # in a space, nsenter's one child is the command itself
        left = len([pid for pid in cgroup.members(leaf) if pid not in own])
        cgroup.kill(leaf)
    kill_group(proc.pid)
    proc.wait()
    box.groups.live.pop(proc.pid, None)
    return left


def _space(box: Box, launches: Sequence[Launch], homes: Sequence[Mapping[str, str]]
           ) -> AbstractContextManager[namespace.Space | None]:
    """Namespaces of their own for the launch's processes, whose private /tmp keeps what they
    name there (their program, folder, reads and home) and what the guard has handed over now;
    none where the box has no spaces."""
    if not box.spaces:
        return nullcontext()
    keep: list[Path | str | None] = [*box.temp.handed]
    for one, home in zip(launches, homes, strict=True):
        program = "/bin/sh" if isinstance(one.cmd, str) else str(one.cmd[0])
        keep += [program if os.path.isabs(program) else None, one.cwd or Path.cwd(), *one.reads, home.get("HOME")]
    return namespace.space(keep, box.cgroups)


def _spawn(one: Launch, home: Mapping[str, str], leaf: Path | None, space: namespace.Space | None
           ) -> subprocess.Popen[bytes]:
    """`one` in a session of its own, as its user, with `home`; with `leaf`, in that cgroup from
    its first instruction on: it waits at the gate (a line on its stdin) until the guard has
    moved it there; with `space`, in those namespaces, where setpriv drops it to the user."""
    argv = ["/bin/sh", "-c", one.cmd] if isinstance(one.cmd, str) else list(one.cmd)
    env = None if one.env is None and not home else dict(os.environ if one.env is None else one.env) | home
    kwargs: dict[str, Any] = {"cwd": one.cwd, "env": env}
    if space is None:
        kwargs |= identity(one.user)
    elif one.user is not None:  # setpriv makes it the user in the space
        kwargs["umask"] = identity(one.user)["umask"]
    common = {"stdout": one.stdout, "stderr": subprocess.STDOUT, "start_new_session": True,
              "pass_fds": tuple(one.pass_fds)} | kwargs
    if leaf is None and space is None:
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, **common)
    _check_found(argv[0], one.cwd, env)
    if space is not None:
        user = one.user
        argv = space.enter(argv, one.cwd, *((user.uid, user.gid) if user is not None else (None, None)))
    if leaf is None:
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, **common)
    gate, go = os.pipe()
    try:
        proc = subprocess.Popen(["/bin/sh", "-c", cgroup.GATE, "guard-gate", *argv], stdin=gate, **common)
        try:
            cgroup.enter(leaf, proc.pid)
        except OSError as exc:
            kill_group(proc.pid)
            proc.wait()
            raise LaunchError(f"could not put a process in its cgroup {leaf}: {exc.strerror}") from None
        os.write(go, b"go\n")
    finally:
        os.close(gate)
        os.close(go)
    return proc


def _check_found(program: str, cwd: Path | None, env: Mapping[str, str] | None) -> None:
    """What Popen would say of a program that is not there, said before the gate (which would exit 127)."""
    if "/" in program:  # a path, from the process's own folder where relative
        path = program if os.path.isabs(program) or cwd is None else os.path.join(cwd, program)
        found = os.access(path, os.X_OK) and not os.path.isdir(path)
    else:
        found = shutil.which(program, path=(os.environ if env is None else env).get("PATH", os.defpath)) is not None
    if not found:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), program)
