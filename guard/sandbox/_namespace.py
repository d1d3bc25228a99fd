"""PID, IPC and mount namespaces of their own for the pull request's processes, made by
util-linux's `unshare` and entered by its `nsenter`, with a private /tmp, /var/tmp and
/dev/shm: what a process of the pull request leaves there (files, SysV shared memory, POSIX
message queues) is gone with the namespace, and what another job keeps there is out of sight.

A space is made before any code of the pull request runs: a holder process, pid 1 of the new
PID namespace, mounts fresh tmpfs over /tmp, /var/tmp and /dev/shm and binds back into the new
/tmp only the entries of the old one that the launches name (their folder, the files they
read, their home), then waits. Every launch enters all three namespaces (`nsenter`), drops to
the pull-request user (`setpriv`, no new privileges) and runs. The holder sits in a cgroup of
its own (guard/sandbox/_cgroup.py): killing it ends the PID namespace, and the kernel kills
what is left in it.

Only the guard run as root makes spaces (the namespaces need CAP_SYS_ADMIN); `available()`
says why there are none, and the run's box (guard/sandbox/_box.py) then makes none."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

from guard.sandbox import _cgroup as cgroup

_PRIVATE = ("/tmp", "/var/tmp", "/dev/shm")
# Run by the holder, as root, in its new namespaces: `$@` are the names in /tmp to keep. The old
# /tmp is seen at /dev/shm while the new one is made, then /dev/shm gets its own tmpfs.
_SETUP = r"""set -eu
mount --rbind /tmp /dev/shm
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs /tmp
for name do
    if [ -d "/dev/shm/$name" ]; then mkdir "/tmp/$name"; else : > "/tmp/$name"; fi
    mount --rbind "/dev/shm/$name" "/tmp/$name"
done
umount -l /dev/shm
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs /dev/shm
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs /var/tmp
echo ready
exec sleep infinity
"""


class Space(NamedTuple):
    """Namespaces made for one launch, or for the ranks started together: `pid` is their pid 1
    as the guard sees it, `holder` the process that made them, `box` the holder's cgroup."""

    pid: int
    holder: subprocess.Popen[bytes]
    box: Path | None

    def enter(self, argv: list[str], cwd: Path | None, uid: int | None, gid: int | None) -> list[str]:
        """`argv` run in this space, in `cwd`, as `uid`/`gid` (None: as the guard)."""
        # cd in the space (nsenter's --wd resolves in the guard's own, where /tmp is another folder)
        where = ["/bin/sh", "-c", 'cd -- "$0" && exec "$@"', str(cwd)] if cwd is not None else []
        as_user = [] if uid is None else [_tool("setpriv"), f"--reuid={uid}", f"--regid={gid}", "--clear-groups",
                                          "--no-new-privs", "--"]
        return [_tool("nsenter"), f"--target={self.pid}", "--pid", "--ipc", "--mount", "--", *where, *as_user, *argv]


def _tool(name: str) -> str:
    """Where util-linux's `name` is, found on the guard's own PATH (a launch's may be the pull request's)."""
    return shutil.which(name) or name


def available() -> str:
    """"" where this guard can make spaces, else why not (checked by making one, when the run's
    box is chosen: guard/sandbox/_box.py)."""
    if os.geteuid() != 0:
        return "the guard does not run as root, and only root makes PID and mount namespaces here"
    missing = [tool for tool in ("unshare", "nsenter", "setpriv", "mount") if shutil.which(tool) is None]
    if missing:
        return f"{', '.join(missing)} not found (Debian: util-linux and mount)"
    try:
        probe = ["unshare", "--pid", "--ipc", "--mount", "--fork", "--mount-proc", "/bin/sh", "-c",
                 "mount -t tmpfs tmpfs /dev/shm"]
        proc = subprocess.run(probe, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unshare could not run ({exc})"
    if proc.returncode != 0:
        said = next((line for line in proc.stderr.splitlines() if line.strip()), f"exit code {proc.returncode}")
        return f"the kernel refused new PID, IPC and mount namespaces ({said.strip()})"
    return ""


def kept_names(paths: Iterable[Path | str | None]) -> list[str]:
    """The entries of /tmp that hold `paths` (absolute): what a space's private /tmp binds back."""
    names = []
    for path in paths:
        if path is None:
            continue
        parts = Path(os.path.abspath(path)).parts
        if len(parts) > 2 and parts[1] == "tmp" and parts[2] not in names:
            names.append(parts[2])
    return names


@contextmanager
def space(keep: Iterable[Path | str | None], cgroups: Path | None) -> Iterator[Space]:
    """A new space whose /tmp holds the entries that hold `keep`, ended with everything in it
    when the block ends; its holder in a cgroup of `cgroups` (the box's folder) where given."""
    with cgroup.leaf(cgroups) as box:
        argv = [_tool("unshare"), "--pid", "--ipc", "--mount", "--fork", "--kill-child", "--mount-proc",
                "/bin/sh", "-c", _SETUP, "guard-space", *kept_names(keep)]
        holder = subprocess.Popen(["/bin/sh", "-c", cgroup.GATE, "guard-gate", *argv] if box else argv,
                                  stdin=subprocess.PIPE if box else subprocess.DEVNULL, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, start_new_session=True)
        try:
            if box is not None:
                assert holder.stdin is not None
                cgroup.enter(box, holder.pid)
                holder.stdin.write(b"go\n")
                holder.stdin.close()
            assert holder.stdout is not None
            if holder.stdout.readline() != b"ready\n":
                holder.kill()
                _, err = holder.communicate(timeout=30)
                said = next((line for line in err.decode(errors="replace").splitlines() if line.strip()), "")
                raise OSError(f"the namespaces for the pull request's processes could not be set up: {said}")
            yield Space(_first_child(holder.pid), holder, box)
        finally:
            if box is not None:
                cgroup.kill(box)
            if holder.poll() is None:
                holder.kill()
            holder.wait()
            for stream in (holder.stdout, holder.stderr):
                if stream is not None:
                    stream.close()


def _first_child(pid: int) -> int:
    """The pid of `unshare`'s child (pid 1 of its namespace), as this guard sees it."""
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    if not children:
        raise OSError("the namespaces' first process is gone")
    return int(children[0])
