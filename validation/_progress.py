"""Progress lines, the time budget of one invocation, and estimates of what is left."""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

from ._models import PairRecord, RunSettings

ASSUMED_PROCESS_S = 8.0  # one harness process, until the sizing measures it
PROFILED_FACTOR = 1.5  # a pair's processes also profile: assumed this much slower until a pair has run
PAIR_OVERHEAD_S = 15.0  # head build (once per head), worktrees, trace analysis, report
SIZING_OVERHEAD_S = 30.0  # the base build


class Log:
    """Stage and pair lines on stderr and in DIR/progress.log; the pipeline's own lines in the
    log only (on stderr too when verbose)."""

    def __init__(self, path: Path, verbose: bool) -> None:
        self.path, self.verbose = path, verbose

    def say(self, message: str) -> None:
        self._write(message, True)

    def detail(self, message: str) -> None:
        self._write(message, self.verbose)

    def _write(self, message: str, show: bool) -> None:
        line = f"[validate {time.strftime('%H:%M:%S')}] {message}"
        if show:
            print(line, file=sys.stderr, flush=True)
        with self.path.open("a", encoding="utf-8") as log:
            log.write(line + "\n")


class Budget:
    """Seconds this invocation may still use; stages and pairs start only when they fit."""

    def __init__(self, seconds: float | None) -> None:
        self.deadline = None if seconds is None else time.monotonic() + seconds

    def left_s(self) -> float:
        return float("inf") if self.deadline is None else self.deadline - time.monotonic()

    def allows(self, needed_s: float) -> bool:
        return needed_s <= self.left_s()


def pair_s(settings: RunSettings, process_s: float, rounds: int = 1) -> float:
    """A pair from the time of one unprofiled process: 2 arms x repeats, profiled, per round."""
    return rounds * 2 * settings.repeats * process_s * PROFILED_FACTOR + PAIR_OVERHEAD_S


KIND_HISTORY = 3  # pairs of a kind done before its own longest stands for it


def next_pair_worst_s(records: list[PairRecord], settings: RunSettings, process_s: float, kind: str) -> float:
    """The longest a pair of this kind has taken, once KIND_HISTORY of them are done; before
    that the longest of any kind; before any, one with a confirmation round."""
    same = [r.duration_s for r in records if r.kind == kind]
    if len(same) >= KIND_HISTORY:
        return max(same)
    if records:
        return max(r.duration_s for r in records)
    return pair_s(settings, process_s, 2 if settings.confirm else 1)


def eta_s(records: list[PairRecord], left: int) -> float:
    return statistics.fmean(r.duration_s for r in records) * left if records else 0.0


def minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 90 else f"{seconds:.0f} s"


def first_that_fits(
    kinds: list[str], records: list[PairRecord], settings: RunSettings, process_s: float, budget: Budget
) -> tuple[int | None, float]:
    """The index of the first pending pair (by kind) that fits the budget, or None; and the
    shortest worst case among them, for the message when none fits."""
    worst = [next_pair_worst_s(records, settings, process_s, kind) for kind in kinds]
    fits = next((i for i, seconds in enumerate(worst) if budget.allows(seconds)), None)
    return fits, min(worst) if worst else 0.0
