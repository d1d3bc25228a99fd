"""The host side of a process's timed passes: tok/s by windows (a diagnostic; the decided tok/s
is tokens over the whole decode), when a warmup has settled, and what the host did meanwhile
(context switches, CPU time, the CPUs it ran on, each window's CPU, clock frequency and steal
time, and the user-mode instructions per step).

Runs inside the arm's environment, loaded by path beside harness/run.py, so it imports only
the standard library.
"""

from __future__ import annotations

import os
import statistics
from pathlib import Path
from typing import Any

# Windows of at least WINDOW_S of decode: what the warmup's settling reads, and each one's host
# state; their rates are kept as a diagnostic, the decided tok/s is tokens over the whole time.
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


def cpu_freq_khz(cpu: int) -> int | None:
    """The CPU's current clock (cpufreq's scaling_cur_freq, kHz); None where cpufreq is absent (many VMs)."""
    try:
        return int(Path(f"/sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_cur_freq").read_text())
    except (OSError, ValueError):
        return None


def steal_ticks() -> dict[int, int]:
    """Each CPU's steal time so far (/proc/stat, in clock ticks): time a hypervisor ran something
    else while this guest's CPU wanted to run. Empty where /proc/stat is absent."""
    try:
        lines = Path("/proc/stat").read_text().splitlines()
    except OSError:
        return {}
    steal = {}
    for line in lines:
        fields = line.split()
        if fields and fields[0].startswith("cpu") and fields[0][3:].isdigit() and len(fields) > 8:
            steal[int(fields[0][3:])] = int(fields[8])  # user nice system idle iowait irq softirq steal
    return steal


def _tick_ms() -> float:
    try:
        return 1000 / os.sysconf("SC_CLK_TCK")
    except (AttributeError, ValueError, OSError):
        return 10.0  # USER_HZ is 100 wherever Linux runs


class WindowSampler:
    """What the host was like in each tok/s window: as the steps fed to `step` add up to a
    window (as `windows` groups them, across passes), the CPU the main thread is on, that CPU's
    clock and its steal time since the window before. A remainder shorter than a window joins
    the last one, as in `windows`, so there is one sample per window of `window_rates`."""

    def __init__(self, window_s: float = WINDOW_S) -> None:
        self.window_s = window_s
        self.samples: list[dict[str, Any]] = []
        self._total = 0.0
        self._steal = steal_ticks()
        self._tick_ms = _tick_ms()

    def closes(self, seconds: float) -> bool:
        """A step of `seconds` next would close a window."""
        return self._total + seconds >= self.window_s

    def step(self, seconds: float) -> bool:
        """One timed step's seconds; True when it closed a window (and a sample was taken)."""
        self._total += seconds
        if self._total < self.window_s:
            return False
        self._total = 0.0
        self._sample()
        return True

    def finish(self) -> None:
        """After the last pass: steps shorter than one window in all make one window."""
        if self._total > 0 and not self.samples:
            self._sample()

    def _sample(self) -> None:
        cpu = current_cpu()
        steal = steal_ticks()
        sample: dict[str, Any] = {"cpu": cpu, "freq_khz": cpu_freq_khz(cpu) if cpu is not None else None}
        if cpu is not None and cpu in steal and cpu in self._steal:
            sample["steal_ms"] = (steal[cpu] - self._steal[cpu]) * self._tick_ms
        self._steal = steal
        self.samples.append(sample)


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
    their starts and ends; over the end-to-end passes, the main thread's user-mode instructions
    per step (`count_start`/`count_stop`, through `counter`, an InstructionCounter of _perf.py)
    and each tok/s window's host state (`window`)."""

    def __init__(self, counter: Any, window_s: float = WINDOW_S) -> None:
        self.totals = [0, 0, 0.0, 0.0]
        self.cpus: set[int] = set()
        self.available = True
        self._start: tuple[int, int, float, float] | None = None
        self.counter = counter
        self.sampler = WindowSampler(window_s)
        self.pass_instructions: list[float] = []  # per end-to-end pass, its instructions per step
        self._counted = 0

    def count_start(self) -> None:
        self._counted = self.counter.instructions
        self.counter.start()

    def count_stop(self, steps: int) -> None:
        self.counter.stop()
        if self.counter.available and steps:
            self.pass_instructions.append((self.counter.instructions - self._counted) / steps)

    def window(self, seconds: float) -> bool:
        """A timed step's seconds, for the windows; True when a window closed and its host state
        was read (the counter paused meanwhile: reading it is the harness's work, not the step's)."""
        if not self.sampler.closes(seconds):
            return self.sampler.step(seconds)
        self.counter.stop()
        closed = self.sampler.step(seconds)
        self.counter.start()
        return closed

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
        self.sampler.finish()
        result: dict[str, Any] = {"voluntary_switches": voluntary, "involuntary_switches": involuntary,
                                  "user_s": user_s, "sys_s": sys_s, "cpus": sorted(self.cpus),
                                  "windows": self.sampler.samples}
        if self.counter.available and self.pass_instructions:
            result["instructions_per_step"] = statistics.median(self.pass_instructions)
            result["instructions_per_step_passes"] = self.pass_instructions
            result["instructions_multiplexed"] = self.counter.multiplexed
        else:
            result["instructions_unavailable"] = self.counter.unavailable or "no end-to-end pass was counted"
        self.counter.close()
        return result
