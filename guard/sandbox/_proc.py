"""What /proc says of a process, and the kill of a process group: read-only facts the launcher,
the container reaper and the compile caches share (a pid with its start time names one process)."""

from __future__ import annotations

import os
import signal
import socket
from pathlib import Path


def stat_fields(pid: int | str) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name, from the state on; None when the
    process is gone. The name may hold spaces and parentheses, so it is split after the last ')'."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None


def process_start(pid: int) -> int | None:
    """The start time of process `pid` in clock ticks since boot; None when it is gone.
    With the pid, it names one process: a pid reused later has a later start."""
    fields = stat_fields(pid)
    return None if fields is None else int(fields[19])  # field 22 of the whole line


def boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return socket.gethostname()


def children_of(parent: int) -> list[int]:
    """Every process whose parent is `parent` now."""
    return [int(entry.name) for entry in os.scandir("/proc")
            if entry.name.isdigit() and (stat_fields(entry.name) or [None, None])[1] == str(parent)]


def threads_children(pid: int) -> list[int]:
    """The children of `pid`'s main thread (cheap: one file, no scan)."""
    try:
        return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except (OSError, ValueError):
        return []


def uid_of(pid: int) -> int | None:
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None


def kill_group(group: int) -> None:
    try:
        os.killpg(group, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
