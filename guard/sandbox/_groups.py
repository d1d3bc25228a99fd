"""The process groups a guard's launches started that still run, ended however the guard ends.

Each group is recorded while its first process runs and killed before that process is reaped,
so its id cannot have passed to another process by then. While a box is held (`Groups.held`,
for a whole run), SIGTERM, SIGINT and SIGHUP kill every recorded group first, then do what they
did before (SIGINT's KeyboardInterrupt), or stop the guard with 128 + the signal's number."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

from guard.sandbox._proc import kill_group

SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class Groups:
    """The live groups of one box: process group id -> its first process. `spawning` is held
    while a launch starts and is recorded, and while the guard runs a check as the pull-request
    user: a sweep, which holds it too, never takes either for something a process left."""

    def __init__(self) -> None:
        self.live: dict[int, subprocess.Popen[bytes]] = {}
        self.spawning = threading.Lock()

    def end_all(self) -> None:
        """Kill every group still recorded."""
        for group in list(self.live):
            kill_group(group)

    @contextmanager
    def held(self) -> Iterator[None]:
        """The block's groups end with it, and with the signals that stop the guard (from the main
        thread only: another cannot set handlers); the handlers before it are back after it."""
        previous: dict[int, Any] = {}
        if threading.current_thread() is threading.main_thread():
            for signum in SIGNALS:
                before = signal.getsignal(signum)
                if before == signal.SIG_IGN:  # under nohup, say: the guard goes on, and so do they
                    continue
                previous[signum] = before
                signal.signal(signum, self._on_signal(before))
        try:
            yield
        finally:
            self.end_all()
            for signum, before in previous.items():
                signal.signal(signum, signal.SIG_DFL if before is None else before)

    def _on_signal(self, before: Any) -> Callable[[int, FrameType | None], None]:
        def ended(signum: int, frame: FrameType | None) -> None:
            self.end_all()
            if callable(before):  # SIGINT's KeyboardInterrupt
                before(signum, frame)
                return
            print(f"guard: stopped by {signal.Signals(signum).name}; its build and workload processes were ended",
                  file=sys.stderr, flush=True)
            raise SystemExit(128 + signum)

        return ended
