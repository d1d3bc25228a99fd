"""A cgroup v2 of its own for every process the guard starts for a pull request, killed whole
when that process ends (cgroup.kill): whatever it forked, in a session of its own or in a chain
however deep, goes with it in one step, by the kernel, not by a sweep that follows parents.

The guard's cgroups sit in one folder per guard process, `regression-guard-PID-START`, in the
guard's own cgroup, found or made by `folder()` when the run's box is chosen
(guard/sandbox/_box.py). Each launch gets a leaf there. The launch's first process waits at a gate until the guard has
moved it into its leaf, so nothing it forks starts outside. A folder whose guard is gone (one
killed with SIGKILL) is killed and removed by the next guard.

Where cgroup v2 is not mounted (a host on the legacy or hybrid hierarchy), the guard, as
root, mounts it at /run/regression-guard/cgroup2: the kernel has one v2 hierarchy, and mounting
it changes nothing for the v1 controllers. Where the guard cannot make cgroups at all (not
root and not delegated one, or in a container without a cgroup namespace of its own),
`folder()` says why and launches run without one."""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from guard.sandbox._proc import process_start

_MOUNT_AT = Path("/run/regression-guard/cgroup2")
_KILL_WAIT_S = 10.0  # a process in uninterruptible sleep (a GPU driver call) ends within this
# The gate: the first process of a launch reads a line on its stdin before it runs the command,
# with /dev/null for stdin; the guard writes the line once the process is in its cgroup. EOF
# (the guard died first) runs nothing.
GATE = 'read -r _ || exit 125; exec "$@" </dev/null'


def folder() -> tuple[Path | None, str]:
    """This guard's folder of cgroups, made on first use (and removed at exit), or None and why
    there is none."""
    mount = _v2_mount()
    if mount is None:
        if os.geteuid() != 0:
            return None, "cgroup v2 is not mounted here, and only root may mount it"
        mount = _mount_v2()
        if mount is None:
            return None, f"cgroup v2 is not mounted here and could not be mounted at {_MOUNT_AT}"
    # in the guard's own cgroup: whatever stops the guard's service (systemd, a runner) kills
    # its launches' cgroups with it
    parent = _own_cgroup(mount)
    _remove_abandoned(parent)
    found = parent / f"regression-guard-{os.getpid()}-{process_start(os.getpid()) or 0}"
    try:
        found.mkdir()
        atexit.register(_remove_folder, found)
    except FileExistsError:
        pass  # this guard's, made when an earlier box was chosen
    except OSError as exc:
        return None, _refused(parent, exc)
    try:
        (found / "probe").mkdir()
        (found / "probe").rmdir()
    except OSError as exc:
        return None, _refused(parent, exc)
    return found, ""


def _refused(parent: Path, exc: OSError) -> str:
    return (f"cannot make a cgroup in {parent} ({exc.strerror}): run the guard as root, or give it a "
            "delegated cgroup v2 subtree (systemd: Delegate=yes)")


@contextmanager
def leaf(folder: Path | None) -> Iterator[Path | None]:
    """A new, empty cgroup in `folder` (the box's) for one launch, killed and removed when the
    block ends; None where the box has no folder of cgroups."""
    if folder is None:
        yield None
        return
    path = Path(tempfile.mkdtemp(prefix="launch-", dir=folder))
    try:
        yield path
    finally:
        kill(path)
        with suppress(OSError):
            path.rmdir()


def enter(path: Path, pid: int) -> None:
    """Move process `pid` into the cgroup at `path` (OSError where the kernel refuses)."""
    (path / "cgroup.procs").write_text(f"{pid}\n")


def members(path: Path) -> list[int]:
    """The processes in the cgroup at `path` now."""
    try:
        return [int(line) for line in (path / "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        return []


def kill(path: Path) -> None:
    """Kill every process in the cgroup at `path` and wait until none is left in it."""
    try:
        (path / "cgroup.kill").write_text("1\n")
    except FileNotFoundError:
        return
    except OSError:  # a kernel before 5.14 has no cgroup.kill: each member, until none is left
        _kill_each(path)
    deadline = time.monotonic() + _KILL_WAIT_S
    while _populated(path) and time.monotonic() < deadline:
        time.sleep(0.005)


def _kill_each(path: Path) -> None:
    deadline = time.monotonic() + _KILL_WAIT_S
    while (pids := members(path)) and time.monotonic() < deadline:
        for pid in pids:
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.005)


def _populated(path: Path) -> bool:
    try:
        return "populated 1" in (path / "cgroup.events").read_text()
    except OSError:
        return False


def _v2_mount() -> Path | None:
    """Where the cgroup v2 hierarchy is mounted, from /proc/self/mountinfo; None where it is not."""
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        fields = line.split(" - ")
        if len(fields) == 2 and fields[1].split()[0] == "cgroup2":
            return Path(fields[0].split()[4].replace("\\040", " "))
    return None


def _mount_v2() -> Path | None:
    mount = shutil.which("mount") or "/bin/mount"
    try:
        _MOUNT_AT.mkdir(parents=True, exist_ok=True, mode=0o700)
        proc = subprocess.run([mount, "-t", "cgroup2", "-o", "nosuid,nodev,noexec", "cgroup2", str(_MOUNT_AT)],
                              capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return _MOUNT_AT if proc.returncode == 0 else None


def _own_cgroup(mount: Path) -> Path:
    """The guard's own cgroup in the v2 hierarchy (its "0::" line); the mount's root where none."""
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            if line.startswith("0::"):
                relative = line[3:].strip().lstrip("/")
                own = mount / relative
                return own if relative and own.is_dir() else mount
    except OSError:
        pass
    return mount


def _remove_abandoned(parent: Path) -> None:
    """The folders of guards that are gone (SIGKILL left them): their processes killed, removed."""
    with suppress(OSError):
        for folder in parent.glob("regression-guard-*-*"):
            _, _, pid, start = folder.name.split("-", 3) if folder.name.count("-") >= 3 else ("", "", "", "")
            if not pid.isdigit() or str(process_start(int(pid)) or 0) == start:
                continue  # its guard runs
            _remove_folder(folder)


def _remove_folder(folder: Path) -> None:
    with suppress(OSError):
        for launch in folder.iterdir():
            if launch.is_dir():
                kill(launch)
                with suppress(OSError):
                    launch.rmdir()
        folder.rmdir()
