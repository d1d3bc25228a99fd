"""User-mode instructions retired by the calling thread, through Linux's perf_event_open: a
host cost that the machine's state (clock frequency, other processes, steal) does not move,
unlike the time it takes.

Runs inside the arm's environment, loaded by path beside harness/run.py, so it imports only
the standard library. Where the counter cannot be opened (another OS, perf_event_paranoid, a
container's seccomp filter, a VM without hardware counters) `InstructionCounter.unavailable` says
why, and nothing else changes.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct
import sys
from pathlib import Path

PERF_TYPE_HARDWARE = 0
PERF_COUNT_HW_INSTRUCTIONS = 1
PERF_FORMAT_TOTAL_TIME_ENABLED = 1
PERF_FORMAT_TOTAL_TIME_RUNNING = 2
PERF_FLAG_FD_CLOEXEC = 8
# perf_event_attr's flag bits (linux/perf_event.h)
DISABLED, EXCLUDE_KERNEL, EXCLUDE_HV = 1 << 0, 1 << 5, 1 << 6
# _IO('$', n): enable, disable, reset
IOC_ENABLE, IOC_DISABLE, IOC_RESET = 0x2400, 0x2401, 0x2403
SYSCALL_NUMBERS = {"x86_64": 298, "aarch64": 241, "ppc64le": 319, "s390x": 331}
ATTR_SIZE = 64  # PERF_ATTR_SIZE_VER0: every kernel since 2.6.31 takes it
PARANOID = Path("/proc/sys/kernel/perf_event_paranoid")


class PerfEventAttr(ctypes.Structure):
    """perf_event_attr as of PERF_ATTR_SIZE_VER0."""

    _fields_ = [
        ("type", ctypes.c_uint32), ("size", ctypes.c_uint32), ("config", ctypes.c_uint64),
        ("sample_period", ctypes.c_uint64), ("sample_type", ctypes.c_uint64), ("read_format", ctypes.c_uint64),
        ("flags", ctypes.c_uint64), ("wakeup_events", ctypes.c_uint32), ("bp_type", ctypes.c_uint32),
        ("config1", ctypes.c_uint64),
    ]


def paranoid() -> int | None:
    """kernel.perf_event_paranoid, None where the file is absent (not Linux, or no perf events)."""
    try:
        return int(PARANOID.read_text().strip())
    except (OSError, ValueError):
        return None


def open_instructions() -> tuple[int | None, str | None]:
    """A disabled counter of this thread's user-mode instructions, as (fd, None), or (None, why not)."""
    if not sys.platform.startswith("linux"):
        return None, f"perf_event_open is Linux's; this is {sys.platform}"
    number = SYSCALL_NUMBERS.get(platform.machine())
    if number is None:
        return None, f"perf_event_open's syscall number is not known here for {platform.machine()}"
    attr = PerfEventAttr(type=PERF_TYPE_HARDWARE, size=ATTR_SIZE, config=PERF_COUNT_HW_INSTRUCTIONS,
                         read_format=PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING,
                         flags=DISABLED | EXCLUDE_KERNEL | EXCLUDE_HV)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    fd = libc.syscall(ctypes.c_long(number), ctypes.byref(attr), ctypes.c_int(0), ctypes.c_int(-1),
                      ctypes.c_int(-1), ctypes.c_ulong(PERF_FLAG_FD_CLOEXEC))
    if fd < 0:
        err = ctypes.get_errno()
        return None, f"{_why(err)} (perf_event_open: {os.strerror(err)}, errno {err}; perf_event_paranoid {paranoid()})"
    return int(fd), None


def _why(err: int) -> str:
    if err in (errno.EACCES, errno.EPERM):
        return "not permitted here (perf_event_paranoid, or a container's seccomp filter)"
    if err in (errno.ENOENT, errno.EOPNOTSUPP, errno.ENODEV):
        return "no hardware instruction counter here (virtual machines often have none)"
    if err == errno.ENOSYS:
        return "perf_event_open is not available in this kernel or sandbox"
    return "the instruction counter could not be opened"


class InstructionCounter:
    """Counts this thread's user-mode instructions between start() and stop(), summed over every
    start/stop pair. `unavailable` says why it counts nothing; `multiplexed` whether the kernel
    shared the counter with other events, so that the count is scaled from part of the time."""

    def __init__(self) -> None:
        self._fd, self.unavailable = open_instructions()
        self._libc = ctypes.CDLL(None, use_errno=True) if self._fd is not None else None
        self.instructions = 0
        self.multiplexed = False
        if self._fd is not None:
            self._ioctl(IOC_RESET)

    def _ioctl(self, request: int) -> None:
        assert self._libc is not None
        if self._libc.ioctl(ctypes.c_int(self._fd), ctypes.c_ulong(request), ctypes.c_int(0)) < 0:
            err = ctypes.get_errno()
            raise OSError(err, f"perf event ioctl {request:#x}: {os.strerror(err)}")

    def _read(self) -> tuple[int, int, int]:
        assert self._fd is not None
        return struct.unpack("QQQ", os.read(self._fd, 24))  # value, time enabled, time running

    def start(self) -> None:
        if self._fd is not None:
            self._ioctl(IOC_ENABLE)

    def stop(self) -> None:
        if self._fd is None:
            return
        self._ioctl(IOC_DISABLE)
        value, enabled, running = self._read()
        self._ioctl(IOC_RESET)
        if running == 0 and enabled > 0:
            self.close()
            self.unavailable = "the instruction counter never ran: the hardware's counters are all in use"
            return
        if running < enabled:
            self.multiplexed = True
            value = round(value * enabled / running)
        self.instructions += value

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    @property
    def available(self) -> bool:
        return self._fd is not None
