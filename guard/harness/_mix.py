"""A batch-size mix: the seeded schedule of per-step active batch sizes, and what a step says it did.

Serving batches are irregular, so a mix is a distribution, not a representative batch. The
schedule is a pure function of the mix (or the committed sequence), the seed and the pass
lengths, so every arm and every process draws the same one; the guard draws it again to read
the processes' step times against it. Standard library only: run.py loads this file by path
inside the arm's environment, and the guard imports it.
"""

from __future__ import annotations

import math
import random
from typing import Any

PATHS = ("graph", "eager")
MAX_EXPERTS = 4096
MAX_PADDED_ROWS = 1 << 16
MAX_EXPERT_TOKENS = 1 << 31


def apportion(mix: dict[int, float], count: int) -> dict[int, int]:
    """`count` steps split over the sizes of `mix` by largest remainder: each size gets its
    share rounded down, and the steps left go to the largest remainders (ties: smaller size)."""
    exact = {size: share * count for size, share in mix.items()}
    counts = {size: math.floor(value) for size, value in exact.items()}
    left = count - sum(counts.values())
    by_remainder = sorted(mix, key=lambda size: (-(exact[size] - counts[size]), size))
    for size in by_remainder[:left]:
        counts[size] += 1
    return counts


def draw_schedule(
    lengths: list[int], seed: int, mix: dict[int, float] | None = None, sequence: list[int] | None = None,
) -> list[int]:
    """The active batch size of every step after a setup, pass segment by pass segment
    (`lengths`: warmup, end-to-end pass, GPU-timed pass). From `mix`: each segment holds every
    size in its share (largest remainder) in a seeded shuffle, so the shares of each timed pass
    are exact to one step. From `sequence` (a committed file, production order): the sizes as
    they come, repeated from its start when the steps outnumber it."""
    if (mix is None) == (sequence is None):
        raise ValueError("draw_schedule: give a mix or a sequence, one of them")
    total = sum(lengths)
    if sequence is not None:
        if not sequence:
            raise ValueError("draw_schedule: the sequence is empty")
        return [sequence[k % len(sequence)] for k in range(total)]
    assert mix is not None
    rng = random.Random(seed)
    schedule: list[int] = []
    for length in lengths:
        segment = [size for size, n in sorted(apportion(mix, length).items()) for _ in range(n)]
        rng.shuffle(segment)
        schedule.extend(segment)
    return schedule


def pass_lengths(warmup_steps: int, steps: int, profile_steps: int = 0) -> list[int]:
    """The schedule's segments after a setup: warmup, end-to-end pass, GPU-timed pass, and the
    steps a profiled pass longer than the two timed ones needs past them. The profiled pass
    decodes from the end-to-end pass's start, so a shorter one needs no segment of its own;
    segments are drawn in order, so this last one changes none before it."""
    lengths = [warmup_steps, steps, steps]
    if profile_steps > 2 * steps:
        lengths.append(profile_steps - 2 * steps)
    return lengths


def max_batch_size(mix: dict[int, float] | None, sequence: list[int] | None) -> int:
    return max(mix) if mix else max(sequence or [1])


def checked_step_info(info: Any, batch_size: int) -> dict[str, Any]:
    """A step_info() answer as plain data, or a ValueError saying what is wrong with it. The
    guard checks it again: this process runs the arm's code."""
    if not isinstance(info, dict):
        raise ValueError(f"step_info() must return a dict, got {type(info).__name__}")
    unknown = set(info) - {"path", "padded_to", "expert_tokens"}
    if unknown:
        raise ValueError(f"step_info() returned unknown keys {sorted(unknown)}: path, padded_to, expert_tokens")
    record: dict[str, Any] = {}
    path = info.get("path")
    if path is not None:
        if path not in PATHS:
            raise ValueError(f"step_info() path must be 'graph' or 'eager', not {path!r:.40}")
        record["path"] = path
    padded = info.get("padded_to")
    if padded is not None:
        if not isinstance(padded, int) or isinstance(padded, bool) or not batch_size <= padded <= MAX_PADDED_ROWS:
            raise ValueError(f"step_info() padded_to must be a whole number from the step's {batch_size} rows "
                             f"to {MAX_PADDED_ROWS}, not {padded!r:.40}")
        record["padded_to"] = padded
    experts = info.get("expert_tokens")
    if experts is not None:
        values = experts.tolist() if hasattr(experts, "tolist") else experts
        if (not isinstance(values, (list, tuple)) or not 1 <= len(values) <= MAX_EXPERTS
                or not all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v < MAX_EXPERT_TOKENS
                           for v in values)):
            raise ValueError(f"step_info() expert_tokens must be 1 to {MAX_EXPERTS} whole numbers of 0 or more, "
                             "one per expert")
        record["expert_tokens"] = list(values)
    return record
