"""The host side of a process's timed passes: tok/s by windows, when a warmup has settled,
and what the host did meanwhile (context switches, CPU time, the CPUs it ran on).

Runs inside the arm's environment, loaded by path beside harness/run.py, so it imports only
the standard library.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

# tok/s is the median over windows of at least WINDOW_S of decode: one pass of a fast engine
# lasts ~77 ms, under what one value needs, and a single pause then moves it by 10%.
WINDOW_S = 0.1  # the guard sends its own (measure/_runner.py, TOK_PER_S_WINDOW_S)
SETTLE_WIDTH = 3  # windows in the warmup's rolling median
SETTLE_PCT = 1.0  # the warmup ends once that rolling median moves by less than this


def windows(step_s: list[float], window_s: float = WINDOW_S) -> list[tuple[int, float]]:
    """Consecutive steps grouped into windows of at least `window_s`, as (steps, seconds).
    A remainder shorter than a window joins the last one; steps adding up to less than one
    window make one window."""
    grouped: list[tuple[int, float]] = []
    count, total = 0, 0.0
    for seconds in step_s:
        count, total = count + 1, total + seconds
        if total >= window_s:
            grouped.append((count, total))
            count, total = 0, 0.0
    if count:
        if grouped:
            last_count, last_total = grouped.pop()
            count, total = count + last_count, total + last_total
        grouped.append((count, total))
    return grouped


def window_rates(step_s: list[float], batch_size: int, window_s: float = WINDOW_S) -> list[float]:
    """tok/s of each window of `step_s`."""
    return [batch_size * count / total for count, total in windows(step_s, window_s) if total > 0]


def settled(rates: list[float], width: int = SETTLE_WIDTH, pct: float = SETTLE_PCT) -> bool:
    """Whether the median of the last `width` rates is within `pct` of the median one window earlier."""
    if len(rates) <= width:
        return False
    now, before = statistics.median(rates[-width:]), statistics.median(rates[-width - 1:-1])
    return abs(now - before) <= abs(before) * pct / 100


def current_cpu() -> int | None:
    """The CPU this thread last ran on (Linux); None elsewhere."""
    try:
        text = Path("/proc/thread-self/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()  # the command name may hold spaces and parentheses
    return int(fields[36])  # field 39 of proc(5), "processor"


def rusage() -> tuple[int, int, float, float] | None:
    """Voluntary and involuntary context switches, user and system CPU seconds of this process so far."""
    try:
        import resource
    except ImportError:  # not a Unix
        return None
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_nvcsw, usage.ru_nivcsw, usage.ru_utime, usage.ru_stime


class HostMeter:
    """What the host did during the timed passes alone: the process's context switches and CPU
    seconds (all its threads), summed over the passes, and the CPUs its main thread was on at
    their starts and ends."""

    def __init__(self) -> None:
        self.totals = [0, 0, 0.0, 0.0]
        self.cpus: set[int] = set()
        self.available = True
        self._start: tuple[int, int, float, float] | None = None

    def _cpu(self) -> None:
        cpu = current_cpu()
        if cpu is not None:
            self.cpus.add(cpu)

    def start(self) -> None:
        self._cpu()
        self._start = rusage()

    def stop(self) -> None:
        now = rusage()
        if now is None or self._start is None:
            self.available = False
        else:
            self.totals = [total + b - a for total, a, b in zip(self.totals, self._start, now)]
        self._cpu()

    def result(self) -> dict[str, Any] | None:
        if not self.available:
            return None
        voluntary, involuntary, user_s, sys_s = self.totals
        return {"voluntary_switches": voluntary, "involuntary_switches": involuntary,
                "user_s": user_s, "sys_s": sys_s, "cpus": sorted(self.cpus)}
