"""What a timed pass needs besides the workload: the spin on the GPU that each held step waits
behind, and the marks on the guard's clock as each pass starts and ends.

Standard library only; torch is handed in.
"""

from __future__ import annotations

import os
from typing import Any

# The GPU-timed pass holds each step behind a short spin on the GPU (torch.cuda._sleep), so
# the host has queued the whole step before the step's start event runs. The figure is then
# the GPU's own time for the step, not how fast this process's host launched it, which
# varies from process to process. The host's share shows in tok/s, from the end-to-end pass.
HOLD_MIN_US = 50.0
HOLD_MAX_US = 5000.0
_cycles_per_us: list[float | None] = []  # measured once per process


def hold_cycles_per_us(torch: Any) -> float | None:
    """Clock cycles of torch.cuda._sleep per microsecond on this GPU; None without it."""
    if not _cycles_per_us:
        sleep = getattr(torch.cuda, "_sleep", None)
        rate = None
        if sleep is not None:
            cycles = 1_000_000
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            sleep(cycles)  # loads the kernel
            start.record()
            sleep(cycles)
            end.record()
            end.synchronize()
            us = start.elapsed_time(end) * 1e3
            rate = cycles / us if us > 0 else None
        _cycles_per_us.append(rate)
    return _cycles_per_us[0]


def hold_us_for(enqueue_us: list[float]) -> float:
    """Twice the 90th percentile of the host's launch times, within [HOLD_MIN_US, HOLD_MAX_US]."""
    if not enqueue_us:
        return HOLD_MAX_US
    p90 = sorted(enqueue_us)[min(len(enqueue_us) - 1, int(len(enqueue_us) * 0.9))]
    return min(HOLD_MAX_US, max(HOLD_MIN_US, 2 * p90))


# The guard's clock (GUARD_CLOCK_FD, a pipe): a byte as each timed pass starts and ends, written
# as it happens (end-to-end s/e, GPU-timed g/h, the mix's m/n and p/q); the guard, which runs
# none of the arm's code, timestamps them with its own clock and holds the pass's step times to
# them (guard/measure/_clock.py, MARKS).
_clock_fd: list[int | None] = []


def mark_pass(what: bytes) -> None:
    if not _clock_fd:
        given = os.environ.get("GUARD_CLOCK_FD", "")
        _clock_fd.append(int(given) if given.isdigit() else None)
    fd = _clock_fd[0]
    if fd is None:
        return
    try:
        os.write(fd, what)
    except OSError:
        _clock_fd[0] = None  # the guard stopped reading: it sees the passes it saw
