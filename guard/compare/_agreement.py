"""Like for like under teacher forcing: did the head's output change, or only its rounding?

Every measured process is forced with the reference's ids, so every process does the same
work whatever it outputs; what it outputs is then evidence of whether the code computes the
same function. Per process, D counts the (step, sequence) outputs that differ from the
reference. Per batch size, each arm is judged against base:

- its output changed when every one of its processes disagrees with the reference more
  often than every base process does (min D above base's max D);
- and, when base's own processes disagree at all (near-ties in a bf16 argmax broken
  differently from process to process), by enough on average: mean D above base's by at
  least MIN_EXCESS and MIN_EXCESS_SHARE of the outputs compared. When every base process
  reproduced the reference exactly (`exact`), one disagreement in every process is enough.

Under the null (both arms' D drawn alike, in any distribution), "every one above every one"
happens with probability 1 / C(n_a + n_b, n_a) at most: 1/252 = 0.40% for 5 and 5 processes,
1/184,756 for 10 and 10; the excess condition only lowers it. A deterministic change of output
(other weights, a bug, one token at one step) shows in every process of the arm, so it is
caught however small. The stricter "an exact base makes any disagreement a change" calls an
unchanged head changed whenever base's processes all happen to be clean while one of the
head's hits a rare near-tie: at a 5% chance per process of any disagreement, 18% of A/A
comparisons of 5 and 5. Disagreements in some but not all of an arm's processes against an
exact base are kept as `some_disagree`, for the comment to mention.
"""

from __future__ import annotations

import statistics
from math import comb

from guard.compare._models import Agreement, ArmAgreement
from guard.measure import BatchRun

MIN_EXCESS = 2.0  # disagreements per process, on average
MIN_EXCESS_SHARE = 0.005  # of the outputs compared per process


def agreement(runs: dict[str, list[BatchRun]], base: str, reference: str) -> Agreement:
    """`runs`: each arm's runs of one batch size, base among them, in the order they ran.
    Arms whose runs were not all forced are listed in `unforced`, and not judged."""
    base_d = _counts(runs[base])
    exact = base_d is not None and max(base_d) == 0
    arms, unforced = [], []
    for name, arm_runs in runs.items():
        counts = _counts(arm_runs)
        if counts is None:
            unforced.append(name)
            continue
        compared = arm_runs[0].compared
        needed = 0.0 if exact else _min_excess(compared)
        changed, excess, some = False, 0.0, False
        if name != base and base_d is not None:
            excess = statistics.fmean(counts) - statistics.fmean(base_d)
            changed = min(counts) > max(base_d) and excess >= needed
            some = exact and not changed and max(counts) > 0
        first = next((r.first_disagreement for r in arm_runs if r.disagreements), None)
        arms.append(ArmAgreement(
            arm=name, disagreements=counts, compared=compared, output_changed=changed, some_disagree=some,
            excess=excess, min_excess=needed, first_disagreement=first,
        ))
    return Agreement(reference=reference, exact=exact, arms=arms, unforced=unforced)


def false_alarm_bound(n_base: int, n_other: int) -> float:
    """The most often the non-exact rule can call two alike arms changed: every one of
    n_other values above every one of n_base exchangeable values."""
    return 1.0 / comb(n_base + n_other, n_other)


def _counts(runs: list[BatchRun]) -> list[int] | None:
    if not runs or not all(r.forced and r.disagreements is not None for r in runs):
        return None
    return [int(r.disagreements or 0) for r in runs]


def _min_excess(compared: int) -> float:
    return max(MIN_EXCESS, MIN_EXCESS_SHARE * compared)
