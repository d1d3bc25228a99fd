"""The order processes run in: arms alternate in mirrored rounds (base, head, head, base, ...),
so drift in the machine hits every arm alike and a position effect (the first of a pair
running warmer or colder) lands on each arm as often."""

from __future__ import annotations


def interleave(arms: list[str], repeats: int, first_repeat: int = 0) -> list[tuple[str, int]]:
    """One entry per process, as (arm, repeat index), repeat indices from `first_repeat`.
    Even repeats run the arms in order, odd ones reversed: ABBA ABBA for two arms, ABC CBA for
    three. A confirmation round continues the pattern where the first round left it."""
    order = []
    for repeat in range(first_repeat, first_repeat + repeats):
        names = arms if repeat % 2 == 0 else arms[::-1]
        order.extend((arm, repeat) for arm in names)
    return order
