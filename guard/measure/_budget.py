"""The time confirmation rounds may take: each round is run only where the process times of the
round before say it fits in what is left of the budget.

A confirmation round measures only what is still undecided, never more than the round before
it did, so that round's mean process time (start-up included, as the runner timed it) bounds
the next round's: the estimate errs long, and a run overshoots its budget by less than a round.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from guard.measure._models import RepeatResult


@dataclass
class RoundsBudget:
    budget_s: float  # seconds of measuring the confirmation rounds may take together
    confirm_s: float = 0.0  # what they took so far: the sum of their processes' times
    rounds: int = 0  # rounds measured so far, the first included
    process_s: float = 0.0  # the mean process time of the last round measured

    def measured(self, processes: list[RepeatResult], confirmation: bool) -> None:
        """Count a round of `processes`; `confirmation`: a round the budget pays for."""
        times = [p.process_s for p in processes if p.process_s is not None]
        self.rounds += 1
        if times:
            self.process_s = statistics.fmean(times)
        if confirmation:
            self.confirm_s += sum(times)

    def paid(self, processes: list[RepeatResult]) -> None:
        """Pay for `processes` measured within a round (slow ones' replacements), counting no round."""
        self.confirm_s += sum(p.process_s for p in processes if p.process_s is not None)

    def estimate_s(self, processes: int) -> float:
        """About how long a round of `processes` takes, at the last round's process time."""
        return processes * self.process_s

    def left_s(self) -> float:
        return max(0.0, self.budget_s - self.confirm_s)

    def looks_that_fit(self, processes: int, most: int) -> int:
        """The looks a run can plan on: the first, and as many rounds of `processes` as the budget
        holds at the last round's process time, `most` at most. Alpha is spent over these alone
        (guard/config/_rule.py), none on a look the budget cannot hold."""
        each = self.estimate_s(processes)
        if self.left_s() <= 0:
            return 1
        rounds = most - 1 if each <= 0 else int(self.left_s() // each)  # no process timed: as many as may be
        return max(1, min(most, 1 + rounds))

    def fits(self, processes: int) -> bool:
        """Whether a round of `processes` fits in what is left of the budget."""
        return self.estimate_s(processes) <= self.left_s()
