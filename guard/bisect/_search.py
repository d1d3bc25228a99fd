"""The search itself, apart from measuring: which commit to run next, and what is known when
it stops. Bad is run first, so a range in which nothing got slower ends at once."""

from __future__ import annotations

from collections.abc import Callable, Sequence


def first_bad(commits: Sequence[str], is_bad: Callable[[str], bool]) -> int | None:
    """Index in `commits` (after good, oldest first, bad last) of the first commit `is_bad`
    holds for, asking about ceil(log2(len)) + 1 commits; None when the last is not bad.
    Assumes one step: every commit after the first bad one is bad too."""
    if not commits or not is_bad(commits[-1]):
        return None
    good, bad = -1, len(commits) - 1  # good: -1 is the good commit itself, before the list
    while bad - good > 1:
        middle = (good + bad) // 2
        if is_bad(commits[middle]):
            bad = middle
        else:
            good = middle
    return bad
