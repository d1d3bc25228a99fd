"""The guard's own clock over a harness process's timed passes: the process writes a byte on a
pipe as each end-to-end pass starts and ends (guard/harness/run.py, `mark_pass`), and the guard,
which runs none of the arm's code, timestamps each with its own monotonic clock as it reads it.
A process whose step times do not fit the passes the guard saw is refused: its figures are not
measured (a workload that patched `time.perf_counter` to report another arm's step time)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

# A pass's step times add up to less than the pass the guard saw: the host state read between
# windows and the two marks' own latency are left out of them. Honest processes stay far above
# FLOOR of it (docs/measurements/clock-check.md: 0.99 and up, on a GPU host and on CI's CPU),
# and within SLACK_S of it where a pass is short, its marks' latency then its greater part.
FLOOR = 0.5
SLACK_S = 0.25
CLOCK_ENV = "GUARD_CLOCK_FD"


class Watch:
    """The passes one process marked, as the guard saw them (seconds each), once it has ended."""

    def __init__(self) -> None:
        self.marks: list[tuple[bytes, float]] = []
        self.fd: int | None = None  # the end the process writes, while it is being started

    def passes_s(self) -> list[float] | None:
        """Each start-end pair's seconds, in order; None where the marks do not pair up."""
        kinds = [kind for kind, _ in self.marks]
        if kinds != [b"s", b"e"] * (len(kinds) // 2):
            return None
        return [self.marks[i + 1][1] - self.marks[i][1] for i in range(0, len(self.marks), 2)]


@contextmanager
def watching() -> Iterator[Watch]:
    """A pipe whose write end (`watch.fd`) the process inherits, read until every writer has
    closed it; the guard's own copy is closed by `started` or when the block ends."""
    read, write = os.pipe()
    watch = Watch()
    watch.fd = write

    def reader() -> None:
        with os.fdopen(read, "rb", buffering=0) as pipe:
            while chunk := pipe.read(64):
                now = time.monotonic()
                watch.marks.extend((bytes([byte]), now) for byte in chunk)

    thread = threading.Thread(target=reader, name="guard-clock", daemon=True)
    thread.start()
    try:
        yield watch
    finally:
        started(watch)
        thread.join(timeout=30)


def started(watch: Watch) -> None:
    """The process has its copy of the write end: the guard's goes, so the pipe ends with it."""
    if watch.fd is not None:
        os.close(watch.fd)
        watch.fd = None


def misfit(claimed: list[tuple[float, int]], seen_s: list[float] | None) -> str | None:
    """Why a process's claims, per batch size in the order it ran them (its end-to-end passes'
    step times summed, and how many passes), do not fit the passes the guard saw; None where
    they do."""
    if seen_s is None:
        return "its marks of the timed passes on the guard's pipe do not pair up"
    if sum(passes for _, passes in claimed) != len(seen_s):
        return (f"its result claims {sum(passes for _, passes in claimed)} end-to-end pass(es), and the guard saw "
                f"{len(seen_s)}")
    at = 0
    for claimed_s, passes in claimed:
        seen = sum(seen_s[at:at + passes])
        at += passes
        if claimed_s > seen + SLACK_S:
            return f"its step times add up to {claimed_s:.3f} s, more than the {seen:.3f} s the guard saw them take"
        if claimed_s < FLOOR * seen - SLACK_S:
            return (f"its step times add up to {claimed_s:.3f} s, where the guard saw them take {seen:.3f} s: "
                    "its clock is not the guard's (the workload may have changed time.perf_counter)")
    return None
