"""The order processes run in: arms alternate, so drift in the machine hits every arm alike."""

from __future__ import annotations


def interleave(arms: list[str], repeats: int) -> list[tuple[str, int]]:
    """base, head, base, head, ...: one entry per process, as (arm, repeat index)."""
    return [(arm, repeat) for repeat in range(repeats) for arm in arms]
