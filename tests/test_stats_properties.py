"""Properties of the statistics the verdict rests on, over samples hypothesis draws: any
finite positive figures of 2 or more processes per arm give a verdict and finite-ordered
bounds, never an exception; and the verdict is monotone in the effect: a slower head is never
called faster."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from guard.compare import compare
from guard.measure import relative_change, smallest_caught_pct
from tests.rules import rule_at
from tests.test_verdict import arm

# derandomized: the same examples on every machine, so a failure is the code's, not the draw's
PROPERTIES = settings(derandomize=True, max_examples=150, deadline=None)
FIGURE = st.floats(min_value=1e-6, max_value=1e6, allow_nan=False, allow_infinity=False)
SAMPLE = st.lists(FIGURE, min_size=2, max_size=12)
LEVEL = st.floats(min_value=0.5, max_value=1 - 1e-9)
# how slow each verdict is: a slower head never moves down this order
SLOWNESS = {"improvement": 0, "pass": 1, "inconclusive": 2, "at_threshold": 3, "regression": 4}


@PROPERTIES
@given(before=SAMPLE, after=SAMPLE, level=LEVEL)
def test_any_positive_sample_of_two_or_more_gives_ordered_bounds(before: list[float], after: list[float],
                                                                  level: float) -> None:
    change = relative_change(before, after, level)  # 2 per arm put t on about 1 degree of freedom
    assert -100 <= change.ci_low_pct <= change.pct <= change.ci_high_pct
    assert not math.isnan(change.ci_high_pct) and math.isfinite(change.ci_high_pct)
    assert 0 <= change.p_value <= 1
    caught = smallest_caught_pct([before, after], min(len(before), len(after)), 1.0, level)
    assert caught >= 1.0 and math.isfinite(caught)  # T itself where the processes did not vary


@PROPERTIES
@given(base=st.lists(st.floats(min_value=0.5, max_value=2.0), min_size=2, max_size=8),
       noise=st.lists(st.floats(min_value=0.9, max_value=1.1), min_size=2, max_size=8),
       first=st.floats(min_value=0.5, max_value=2.0), more=st.floats(min_value=0.0, max_value=1.0))
def test_a_slower_head_is_never_called_faster(base: list[float], noise: list[float], first: float,
                                              more: float) -> None:
    """The same processes' noise, head's step `first` then `first x (1 + more)` times base's:
    the second verdict is at least as slow as the first, whatever the spread, at every size."""
    n = min(len(base), len(noise))
    base_ms = [10 * b for b in base[:n]]
    verdicts = []
    for factor in (first, first * (1 + more)):
        head_ms = [10 * factor * j for j in noise[:n]]
        decided = compare({"base": arm("base", {1: base_ms}), "head": arm("head", {1: head_ms})}, "base", "head",
                          [1], rule_at(1.0, looks=2))
        verdicts.append(decided.verdict)
    assert SLOWNESS[verdicts[1]] >= SLOWNESS[verdicts[0]], verdicts
