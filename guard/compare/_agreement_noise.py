"""How often an unchanged commit disagrees with its reference under teacher forcing, against
the floor at which the agreement rule (compare/_agreement.py) calls an output changed.

An A/A's two sides run the same code, so their disagreements are the runner's argmax noise:
near-ties that each process breaks its own way. Per side, the rate is the disagreements over
every output compared, with a Clopper-Pearson interval (a forced step decodes from the
reference, so each output is a trial of its own). The rule calls a head's output changed when
its processes disagree more than base's by at least `min_excess` outputs on average. That
floor sits above what a change of rounding moves (near-ties, going the other way) and below
what another function moves; so the A/A's rate, the share of near-ties on this runner, leaves
the rule room when its upper limit stays under the floor's share of the outputs. Above it, a
change that only rounds differently may pass the floor and be called a changed output.
"""

from __future__ import annotations

from pydantic import BaseModel

from guard.compare._models import Agreement
from guard.measure import RATE_CONFIDENCE, rate_interval


class SideDisagreement(BaseModel):
    side: str
    disagreements: list[int]  # D per process, in the order they ran
    compared: int  # (step, sequence) outputs compared per process
    rate: float  # sum of D over every output compared, 0 to 1
    rate_low: float  # at RATE_CONFIDENCE
    rate_high: float


class DisagreementNoise(BaseModel):
    """One batch size's A/A disagreements, per side, and the rule's floor beside them."""

    sides: list[SideDisagreement]
    floor_outputs: float  # the excess over base, in outputs per process, that makes a change of output
    floor_share: float  # the same over the outputs compared per process, 0 to 1
    rate_high: float  # the highest upper limit over the sides
    room_share: float  # floor_share - rate_high: how far under the floor the noise stays (negative: over it)
    leaves_room: bool  # every side's upper limit is under the floor share


def disagreement_noise(agreed: Agreement | None) -> DisagreementNoise | None:
    """The A/A's figures from its agreement; None where the workload ran free."""
    if agreed is None or agreed.unforced or not agreed.arms:
        return None
    sides = []
    for arm in agreed.arms:
        outputs = arm.compared * len(arm.disagreements)
        low, high = rate_interval(sum(arm.disagreements), outputs, RATE_CONFIDENCE)
        sides.append(SideDisagreement(
            side=arm.arm, disagreements=arm.disagreements, compared=arm.compared,
            rate=sum(arm.disagreements) / outputs if outputs else 0.0, rate_low=low, rate_high=high,
        ))
    floor = agreed.arms[0]
    floor_share = floor.min_excess / floor.compared if floor.compared else 1.0
    rate_high = max(s.rate_high for s in sides)
    return DisagreementNoise(sides=sides, floor_outputs=floor.min_excess, floor_share=floor_share,
                             rate_high=rate_high, room_share=floor_share - rate_high,
                             leaves_room=rate_high < floor_share)
