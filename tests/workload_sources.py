"""The workloads tests commit into throwaway repositories, as Python source: each in one
place, so every test that runs the busy loop or the sleepy workload runs the same code."""

from __future__ import annotations

# What the busy workload generates at step `self.t` for each `row`, SHIFT added.
BUSY_TOKENS = "(self.t * 7 + row + SHIFT) % 101"

_BUSY_WORKLOAD = '''
import os

WORK = {work}
SHIFT = {shift}


class Workload:
    def setup(self, batch_size):
        self.batch_size = batch_size
        self.t = 0

    def step(self):
        acc = 0
        for i in range(WORK):
            acc += i * i
        self.t += 1
        return [{token_expr} for row in range(self.batch_size)]


def make(**options):
    return Workload()
'''


def busy_workload(work: int, shift: int = 0, token_expr: str = BUSY_TOKENS) -> str:
    """A pure-Python workload: `work` turns of a loop set how slow a step is, `token_expr`
    (of self.t, row and SHIFT) what it generates."""
    return _BUSY_WORKLOAD.format(work=work, shift=shift, token_expr=token_expr)


# A workload's process counts itself in the file an environment variable names: its number, from
# 0 (the reference process first), or None where the variable is unset.
PROCESS_COUNTER = '''
import os, time
from pathlib import Path


def _process_number(variable):
    counter = os.environ.get(variable)
    if not counter:
        return None
    path = Path(counter)
    n = int(path.read_text()) if path.exists() else 0
    path.write_text(str(n + 1))
    return n
'''

SLEEPY_WORKLOAD = PROCESS_COUNTER + '''
# Steps of sleep: steady to about 0.1% between processes, even on a busy host (run it for
# SLEEPY_STEPS steps: one late wake-up then moves tok/s little). With
# SLOW_COUNTER naming a file, each process counts itself there, and the one numbered SLOW_AT
# (from 0, the reference process first) sleeps SLOW_FACTOR times as long: one slow process.
STEP_S = 0.002


def _factor():
    n = _process_number("SLOW_COUNTER")
    return float(os.environ.get("SLOW_FACTOR", "3")) if n == int(os.environ.get("SLOW_AT", "-1")) else 1.0


_DELAY_S = STEP_S * _factor()


class Workload:
    def setup(self, batch_size):
        self.batch_size = batch_size
        self.t = 0

    def step(self):
        time.sleep(_DELAY_S)
        self.t += 1
        return [self.t % 7 + row for row in range(self.batch_size)]


def make(**options):
    return Workload()
'''
