"""The guard's own clock over a harness process's timed passes: the process writes a byte on a
pipe as each timed pass starts and ends (guard/harness/_timed.py, `mark_pass`: the end-to-end
passes, the GPU-timed pass, and the mix's two), and the guard, which runs none of the arm's
code, timestamps each with its own monotonic clock as it reads it. A process whose step times
do not fit the passes the guard saw is refused: its figures are not measured (a workload that
patched `time.perf_counter`, or `torch.cuda.Event.elapsed_time`, to report another arm's).

What each pass claims (`claims`): an end-to-end pass, its decode time (`end_to_end_pass_ms`, the
mix's `end_to_end_step_ms`: the guard's tok/s comes from them, measure/_figures.py); a GPU-timed
pass, its CUDA-event step times (GPU ms per step is their mean), which may add up to no more
than the pass, and which with the GPU spin each step waited behind (the hold it states) must
fill at least FLOOR of it. A process that states both a made-up step time and a hold to match
passes the GPU pass's check, never the end-to-end pass's, whose claim counts nothing the
process picks."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import NamedTuple, get_args

from guard.measure._models import ClockMisfit, PassKind, RepeatResult, SeenPass

# A pass's step times add up to less than the pass the guard saw: the host state read between
# windows and the two marks' own latency are left out of them. Honest processes stay far above
# FLOOR of it (docs/measurements/clock-check.md: 0.99 and up, on a GPU host and on CI's CPU),
# and within SLACK_S of it where a pass is short, its marks' latency then its greater part.
FLOOR = 0.5
SLACK_S = 0.25
CLOCK_ENV = "GUARD_CLOCK_FD"
# the byte a pass starts with and the one it ends with (guard/harness/_timed.py writes the same)
MARKS: dict[PassKind, bytes] = {"end_to_end": b"se", "gpu_timed": b"gh", "mix": b"mn", "mix_gpu_timed": b"pq"}
_KIND_OF_START = {marks[:1]: kind for kind, marks in MARKS.items()}


class Watch:
    """The passes one process marked, as the guard saw them, once it has ended."""

    def __init__(self) -> None:
        self.marks: list[tuple[bytes, float]] = []
        self.fd: int | None = None  # the end the process writes, while it is being started

    def passes(self) -> list[SeenPass] | None:
        """Each pass's kind and seconds, in order; None where the marks do not pair up."""
        seen = []
        for i in range(0, len(self.marks), 2):
            kind = _KIND_OF_START.get(self.marks[i][0])
            if kind is None or i + 1 >= len(self.marks) or self.marks[i + 1][0] != MARKS[kind][1:]:
                return None
            seen.append(SeenPass(kind=kind, s=self.marks[i + 1][1] - self.marks[i][1]))
        return seen


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


class Claim(NamedTuple):
    """What a process's result says of `passes` passes of `kind` in a row (one batch size's, or
    the mix's): their step times' sum (`claimed_s`), and with the holds it states (`filled_s`)."""

    kind: PassKind
    batch_size: int | None
    claimed_s: float
    filled_s: float
    passes: int


def claims(result: RepeatResult) -> list[Claim]:
    """What `result` claims of each kind of timed pass, in the order the process ran them."""
    found = []
    for run in result.runs:
        timed = sum(run.end_to_end_pass_ms) / 1e3
        found.append(Claim("end_to_end", run.batch_size, timed, timed, len(run.end_to_end_pass_ms)))
        if run.timer == "cuda_event":
            gpu_s = sum(run.step_ms) / 1e3
            found.append(Claim("gpu_timed", run.batch_size, gpu_s, gpu_s + len(run.step_ms) * run.hold_us / 1e6, 1))
    mix = result.mix
    if mix is not None:
        timed = sum(mix.end_to_end_step_ms) / 1e3
        found.append(Claim("mix", None, timed, timed, 1))
        if mix.timer == "cuda_event":
            gpu_s = sum(mix.step_ms) / 1e3
            found.append(Claim("mix_gpu_timed", None, gpu_s, gpu_s + len(mix.step_ms) * mix.hold_us / 1e6, 1))
    return found


def misfit(claimed: list[Claim], seen: list[SeenPass] | None) -> ClockMisfit | None:
    """Why a process's claims do not fit the passes the guard saw; None where they do. Each
    group of passes on its own: one that over-claims does not cover one that under-claims."""
    if seen is None:
        return ClockMisfit(why="unpaired")
    for kind in get_args(PassKind):
        mine = [c for c in claimed if c.kind == kind]
        theirs = [p.s for p in seen if p.kind == kind]
        if sum(c.passes for c in mine) != len(theirs):
            return ClockMisfit(why="pass_count", kind=kind, claimed_passes=sum(c.passes for c in mine),
                               seen_passes=len(theirs))
        at = 0
        for c in mine:
            took = sum(theirs[at:at + c.passes])
            at += c.passes
            figures = {"kind": kind, "batch_size": c.batch_size, "claimed_s": round(c.claimed_s, 4),
                       "seen_s": round(took, 4)}
            if c.claimed_s > took + SLACK_S:
                return ClockMisfit(why="over", **figures)
            if c.filled_s < FLOOR * took - SLACK_S:
                return ClockMisfit(why="under", **figures)
    return None
