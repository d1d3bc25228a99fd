"""What a launch left behind when it ended: the processes it left running, killed and reaped,
and its files in the shared temp folders, removed; counted in its box for the arm whose process
left them (`Box.left`: the report's fact) and said in the process's log.

A process that makes a session of its own (setsid) escapes its group's kill, and, without a
cgroup, the kill of the launch's cgroup. For the pull-request user's processes the guard closes
that too: it is the child subreaper of its descendants (prctl PR_SET_CHILD_SUBREAPER), so such
a process, once its parent is gone, becomes the guard's child rather than init's; and when a
launch ends, every child of the guard that runs as that user and that no running launch
started is killed and reaped. Run as the guard's own user (no build.user), nothing is swept:
the guard cannot tell its own helpers from what the pull request left; a PID namespace covers
that case."""

from __future__ import annotations

import ctypes
import os
import signal
from typing import IO, Any

from guard.sandbox._box import Box
from guard.sandbox._proc import children_of, uid_of
from guard.sandbox._temp import SHARED_TEMP
from guard.sandbox._user import PrUser

_PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h
_SWEEP_ROUNDS = 64  # a killed orphan's children come to the guard in turn: one round each generation


def adopt_orphans() -> bool:
    """Make the guard the child subreaper of its descendants; whether the kernel let it (where
    it refuses, sweeps find nothing and the gap stays as it was)."""
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def sweep_after(box: Box, log: IO[Any] | int, owner: str, user: PrUser | None, subreaper: bool,
                boxed: int | None) -> None:
    """The sweep when a launch ends: what it ended and removed counted for `owner` (an arm's
    name) and said in the log. `boxed`: the processes its cgroup still held when it ended, all
    killed by then; the sweep then only reaps them (the guard is their subreaper)."""
    swept = _sweep(box, user) if subreaper and user is not None else 0
    removed = box.temp.clear(user)
    count = swept if boxed is None else boxed
    box.left.processes.update({owner: count} if count else {})
    box.left.temp_entries.update({owner: removed} if removed else {})
    _say_swept(log, count, removed, user, boxed is not None)


def _sweep(box: Box, user: PrUser) -> int:
    """Kill and reap every child of the guard that runs as `user` and that no running launch
    started: what a finished process left running in a session of its own. Returns how many."""
    swept = 0
    for _ in range(_SWEEP_ROUNDS):
        with box.groups.spawning:
            orphans = [pid for pid in children_of(os.getpid())
                       if pid not in box.groups.live and uid_of(pid) == user.uid]
            for pid in orphans:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        for pid in orphans:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
        if not orphans:
            break
        swept += len(orphans)
    return swept


def _say_swept(log: IO[Any] | int, count: int, removed: int | None, user: PrUser | None, boxed: bool) -> None:
    """A line each in the process's log (a text file), so that what the code left behind is
    seen, not only ended."""
    if isinstance(log, int) or not (count or removed or (user is not None and removed is None)):
        return
    if count:
        how = "(its cgroup held them)" if boxed else "in a session of its own (they had become the guard's)"
        log.write(f"\nguard: killed {count} process(es) this process left running {how}\n")
    if removed:
        log.write(f"\nguard: removed {removed} file(s) or folder(s) this process left in the shared temp folders "
                  f"({', '.join(SHARED_TEMP)})\n")
    if removed is None and user is not None:
        log.write(f"\nguard: what this process left in the shared temp folders ({', '.join(SHARED_TEMP)}) is "
                  f"left there: another guard on this host runs as '{user.name}' now, or no lock in /run says "
                  "otherwise (Docker build mode gives each arm its own)\n")
    log.flush()
