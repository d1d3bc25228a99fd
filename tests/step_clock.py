"""A clock that only a workload's steps move, for the harness's passes run in-process: each step
lasts what the workload says (`sleep`), whatever else the machine runs, so a test of what the
harness makes of step times (its figures, its warmup's end) is exact and never waits.

`installed(monkeypatch)` puts it in place of `time.perf_counter` and `time.monotonic_ns`, the
clocks the harness reads, for one test."""

from __future__ import annotations

import time

import pytest


class Clock:
    def __init__(self) -> None:
        self.now_ns = 10**12

    def perf_counter(self) -> float:
        return self.now_ns / 1e9

    def monotonic_ns(self) -> int:
        return self.now_ns

    def sleep(self, seconds: float) -> None:
        self.now_ns += round(seconds * 1e9)


def installed(monkeypatch: pytest.MonkeyPatch) -> Clock:
    clock = Clock()
    monkeypatch.setattr(time, "perf_counter", clock.perf_counter)
    monkeypatch.setattr(time, "monotonic_ns", clock.monotonic_ns)
    return clock
