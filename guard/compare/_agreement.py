"""Like for like under teacher forcing: did the head's output change, or only its rounding?

Every measured process is forced with the reference's ids, so every process does the same
work whatever it outputs; what it outputs is then evidence of whether the code computes the
same function. Per process, D counts the (step, sequence) outputs that differ from the
reference. Per batch size, and over the batch-size mix alike, each arm is judged against base:

- `output_changed`: every one of its processes disagrees with the reference more often than
  every base process does (min D above base's max D), and by at least OUTPUT_CHANGE_SHARE of
  the outputs compared on average (and MIN_EXCESS outputs). Then it computes something else,
  and its timings are not compared.
- `numerics_changed`: every one of its processes disagrees more often than every base
  process, by less than that. A change of kernels or of fusion rounds bf16 differently, and a
  near-tie in the argmax then goes the other way, in every process alike. Measured on the
  H200, a graph break in a compiled decode step made 5 of 144 outputs (3.5%) differ in each
  of its processes (4 layers, d_model 1024), and 2 of 16 (12.5%) in the smallest test model
  (2 layers, d_model 256, 2,048 tokens), against 0 to 1 in base's; a sign flipped in the
  rotary embedding, another function, made 73 of 144 (51%) differ. The floor sits between.
  The work is still the same, step by step, so the timings are compared and the comment
  says what changed.

Where the reference recorded its top two logits (the workload's step_logits()), the margin rule
decides `output_changed` instead: an output whose reference margin is above the floor
(measure/_margins.py: 16 ulps of the logits' dtype) goes the other way only if the function
changed, since rounding moves outputs within a few ulps of a tie. The head's output changed when
every one of its processes disagrees at more such confident outputs than every base process
(min C above base's max C: with base clean, at least one in every head process). Disagreements at
small margins alone are then noise, however many: `numerics_changed` as above at most. Its false
alarm bound is the count rule's, by the same argument on C.

Under the null (both arms' D drawn alike, in any distribution), "every one above every one"
happens with probability 1 / C(n_a + n_b, n_a) at most: 1/252 = 0.40% for 5 and 5 processes,
1/184,756 for 10 and 10; the share condition only lowers it. The issue's stricter "an exact
base (every D = 0) makes any disagreement a change" fails twice: it calls an unchanged head
changed whenever base's processes all happen to be clean while one of the head's hits a rare
near-tie (at a 5% chance per process of any disagreement, 0.95^5 x (1 - 0.95^5) = 17.5% of A/A
comparisons of 5 and 5), and it calls every bf16 kernel or capture change invalid, the changes the guard exists to
judge. Disagreements in some but not all of an arm's processes against an exact base are kept
as `some_disagree`, for the comment to mention.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from math import comb

from guard.compare._models import Agreement, ArmAgreement
from guard.measure import BatchRun, MarginFloor, MarginMismatch, MixRun, TokenMismatch

# one arm's forced passes of one batch size, or of the mix: the same counts, judged alike
ForcedRuns = Sequence[BatchRun] | Sequence[MixRun]

MIN_EXCESS = 2.0  # disagreements per process, on average
OUTPUT_CHANGE_SHARE = 0.25  # of the outputs compared per process: more than rounding moved, measured


def agreement(runs: Mapping[str, ForcedRuns], base: str, reference: str) -> Agreement:
    """`runs`: each arm's runs of one batch size (or mix passes), base among them, in the order they ran.
    Arms whose runs were not all forced are listed in `unforced`, and not judged."""
    return judge(
        {name: _counts(arm_runs) for name, arm_runs in runs.items()},
        {name: arm_runs[0].compared for name, arm_runs in runs.items() if arm_runs},
        base, reference,
        {name: next((r.first_disagreement for r in arm_runs if r.disagreements), None)
         for name, arm_runs in runs.items()},
        _margins(runs),
    )


@dataclass(frozen=True)
class ConfidentCounts:
    """One arm's disagreements at confident outputs, per process, for the margin rule."""

    counts: list[int]
    compared: int  # confident outputs compared per process
    first: MarginMismatch | None


def _margins(runs: Mapping[str, ForcedRuns]) -> tuple[MarginFloor, dict[str, ConfidentCounts]] | None:
    """Every forced arm's confident counts at one floor, or None (the count rule decides)."""
    floors = {r.margin_floor for arm_runs in runs.values() for r in arm_runs if r.forced}
    if len(floors) != 1 or None in floors:
        return None
    by_arm = {}
    for name, arm_runs in runs.items():
        if arm_runs and all(r.forced and r.confident_disagreements is not None for r in arm_runs):
            by_arm[name] = ConfidentCounts([int(r.confident_disagreements or 0) for r in arm_runs],
                                           arm_runs[0].confident_compared,
                                           next((r.first_confident for r in arm_runs if r.confident_disagreements),
                                                None))
    return floors.pop(), by_arm  # type: ignore[return-value]


def judge(
    counts_by_arm: dict[str, list[int] | None], compared_by_arm: dict[str, int], base: str, reference: str,
    first_by_arm: dict[str, TokenMismatch | None] | None = None,
    margins: tuple[MarginFloor, dict[str, ConfidentCounts]] | None = None,
) -> Agreement:
    """The rule on each arm's disagreement counts, one per process (None: the arm ran free);
    `compared_by_arm`: the outputs compared per process; `margins`: the floor and each arm's
    confident counts, where the reference had its top logits. A stored `Agreement` is judged
    again from its own counts by the same rule."""
    base_d = counts_by_arm.get(base)
    exact = bool(base_d) and max(base_d or [0]) == 0
    floor, confident = margins if margins is not None else (None, {})
    judged = [name for name, counts in counts_by_arm.items() if counts]
    if floor is not None and not all(name in confident for name in judged):
        floor, confident = None, {}  # an arm without them: the count rule for every arm
    arms, unforced = [], []
    for name, counts in counts_by_arm.items():
        if not counts:
            unforced.append(name)
            continue
        compared = compared_by_arm[name]
        needed = _min_excess(compared)
        changed = numerics = some = False
        excess = 0.0
        if name != base and base_d:
            excess = statistics.fmean(counts) - statistics.fmean(base_d)
            above = min(counts) > max(base_d)
            if floor is not None:
                changed = min(confident[name].counts) > max(confident[base].counts)
            else:
                changed = above and excess >= needed
            numerics = above and not changed
            some = exact and not above and max(counts) > 0
        mine = confident.get(name)
        arms.append(ArmAgreement(
            arm=name, disagreements=counts, compared=compared, output_changed=changed, numerics_changed=numerics,
            some_disagree=some, excess=excess, min_excess=needed,
            first_disagreement=(first_by_arm or {}).get(name),
            confident=mine.counts if mine else None, confident_compared=mine.compared if mine else 0,
            first_confident=mine.first if mine else None,
        ))
    return Agreement(reference=reference, exact=exact, arms=arms, unforced=unforced, margin_floor=floor)


def false_alarm_bound(n_base: int, n_other: int) -> float:
    """The most often the non-exact rule can call two alike arms changed: every one of
    n_other values above every one of n_base exchangeable values."""
    return 1.0 / comb(n_base + n_other, n_other)


def _counts(runs: ForcedRuns) -> list[int] | None:
    if not runs or not all(r.forced and r.disagreements is not None for r in runs):
        return None
    return [int(r.disagreements or 0) for r in runs]


def _min_excess(compared: int) -> float:
    return max(MIN_EXCESS, OUTPUT_CHANGE_SHARE * compared)
