"""The input ids of each step of a batch-size mix pass, and its lead step: every step after a
setup has an active batch, the first rows of the largest size.

Standard library only; torch is the workload's, handed in.
"""

from __future__ import annotations

from typing import Any

from ._workload import WorkloadError, token_ids, workload_device


class MixFeed:
    """The input ids of each step of a mix pass. Every step after a setup has an active batch:
    the first `b` rows of the largest size. Step 0 runs every row from the workload's own
    prefill; a later step gives each active row the last output that row had, the reference's
    when forced (the same rule the reference process fed itself with), its own when free."""

    def __init__(self, torch: Any, width: int, schedule: list[int], rows: list[list[int]] | None,
                 device: Any) -> None:
        self.torch, self.width, self.schedule, self.device = torch, width, schedule, device
        self.last: list[int] = []
        self.views: list[Any] = []
        self.forced = rows is not None
        if rows is not None:
            widths = [width, *schedule]
            if not rows or any(len(row) != w for row, w in zip(rows, widths)):
                raise WorkloadError("the reference tokens of the mix have rows of other widths than its schedule")
            # step k decodes from rows 0..k-1: a reference of n rows forces n - 1 steps (a CPU's
            # reference stops before the GPU-timed pass; a GPU's holds it)
            covered = schedule[: len(rows) - 1]
            inputs: list[int] = []
            last = list(rows[0])
            for k, size in enumerate(covered, start=1):
                inputs.extend(last[:size])
                last[:size] = rows[k]
            if torch is None:  # as a fixed size's: lists of ints without torch
                ends = [sum(covered[: k + 1]) for k in range(len(covered))]
                self.views = [inputs[end - size: end] for end, size in zip(ends, covered)]
            else:
                flat = torch.tensor(inputs, dtype=torch.int64, device=device if device is not None else "cpu")
                self.views = list(flat.split(covered)) if covered else []

    def input(self, k: int) -> Any:
        """The ids of schedule step k (0-based, after the lead step)."""
        if self.forced:
            if k >= len(self.views):
                raise WorkloadError(f"the reference tokens hold {len(self.views)} mix steps, fewer than this pass "
                                    "needs (on a GPU, warmup_steps + 2 x steps)")
            return self.views[k]
        if self.torch is None:
            return self.last[: self.schedule[k]]
        return self.torch.tensor(self.last[: self.schedule[k]], dtype=self.torch.int64,
                                 device=self.device if self.device is not None else "cpu")

    def saw(self, ids: list[int]) -> None:
        """A step's output: the last ids of its rows."""
        if not self.last:
            self.last = list(ids)
        else:
            self.last[: len(ids)] = ids



def mix_start(
    workload: Any, torch: Any, schedule: list[int], reference: list[list[int]] | None, tokens: list[list[int]],
) -> tuple[MixFeed, Any]:
    """After a setup(): the feed of the schedule, and the lead step of every row (its ids
    appended to `tokens`); returns the feed and the lead step's output."""
    width = max(schedule)
    feed = MixFeed(torch, width, schedule, reference, workload_device(workload))
    lead = workload.step(None)
    tokens.append(token_ids(lead, width))
    feed.saw(tokens[-1])
    return feed, lead
