"""One lock per cache folder: shared while a run uses the build in it, exclusive while one
(re)builds it, so no run rebuilds a folder that another builds or measures.

flock(2) from the standard library: it has both kinds of lock, the kernel drops a lock when
its holder dies (a killed run never leaves the folder locked), and locks of two open files
exclude each other even within one process. The wait is a poll, so it can be bounded.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Callable
from pathlib import Path

_POLL_S = 0.1


class LockTimeout(Exception):
    """The lock stayed held by another run for the whole wait."""


class FolderLock:
    """A lock file opened once; `shared()` and `exclusive()` switch what it holds."""

    def __init__(self, path: Path) -> None:
        # 0600: a process of another user cannot even open it, so it cannot hold the lock
        self._fd: int | None = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)

    def shared(self, wait_s: float, on_wait: Callable[[], None]) -> None:
        self._take(fcntl.LOCK_SH, wait_s, on_wait)

    def exclusive(self, wait_s: float, on_wait: Callable[[], None]) -> None:
        self._take(fcntl.LOCK_EX, wait_s, on_wait)

    def touch(self) -> None:
        """Set the lock file's modification time to now: when the build was last used, which
        `guard clean --unused-for` reads. Only the guard's user can write the file."""
        assert self._fd is not None, "lock used after close"
        os.utime(self._fd)

    def close(self) -> None:
        """Release whatever is held (closing the file does it)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _take(self, kind: int, wait_s: float, on_wait: Callable[[], None]) -> None:
        assert self._fd is not None, "lock used after close"
        # a conversion is not atomic in the kernel either: say so by letting go first
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        deadline_s = time.monotonic() + wait_s
        waited = False
        while True:
            try:
                fcntl.flock(self._fd, kind | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                pass
            if time.monotonic() >= deadline_s:
                raise LockTimeout
            if not waited:
                on_wait()
                waited = True
            time.sleep(_POLL_S)
