"""A change point's life: found as a candidate, confirmed or dismissed by a paired run of the
commits on its two sides, and kept stable while main grows and detection runs again."""

from __future__ import annotations

from collections.abc import Iterable

from guard.history._models import ChangePoint, Confirmation, PairedRun

# the verdict that confirms a step in each direction; any other decided verdict dismisses it
_CONFIRMING = {"slower": "regression", "faster": "improvement"}
# a run that decided nothing neither confirms nor dismisses: the candidate waits for another
_UNDECIDED = frozenset({"invalid"})


def confirmation_run(change_point: ChangePoint) -> PairedRun:
    """The paired run a candidate needs: the last commit before it against the first after."""
    return PairedRun(
        change_point_id=change_point.id, repo=change_point.series.repo, base_sha=change_point.before_sha,
        head_sha=change_point.after_sha, batch_sizes=[change_point.series.batch_size],
        gpu_class=change_point.series.gpu_class,
    )


def apply_confirmation(change_point: ChangePoint, confirmation: Confirmation) -> ChangePoint:
    """The change point once its paired run is in. A run of other commits is refused."""
    if (confirmation.good_sha, confirmation.bad_sha) != (change_point.before_sha, change_point.after_sha):
        raise ValueError(
            f"confirmation of {confirmation.good_sha[:12]}..{confirmation.bad_sha[:12]} does not measure change "
            f"point {change_point.before_sha[:12]}..{change_point.after_sha[:12]}"
        )
    if confirmation.verdict in _UNDECIDED:
        return change_point
    state = "confirmed" if confirmation.verdict == _CONFIRMING[change_point.direction] else "dismissed"
    return change_point.model_copy(update={"state": state, "confirmation": confirmation})


def reconcile(known: Iterable[ChangePoint], detected: Iterable[ChangePoint]) -> list[ChangePoint]:
    """The change points to keep after detection ran again over a longer series.

    A step found again keeps its state and confirmation, with the new segment figures. A decided
    one (confirmed or dismissed) is kept when detection no longer finds it: a confirmation is a
    measurement, not an opinion of the detector. A candidate no longer found is dropped."""
    known_by_id = {c.id: c for c in known}
    kept: dict[str, ChangePoint] = {}
    for found in detected:
        old = known_by_id.get(found.id)
        kept[found.id] = found if old is None else found.model_copy(
            update={"state": old.state, "confirmation": old.confirmation})
    for old_id, old in known_by_id.items():
        if old_id not in kept and old.state != "candidate":
            kept[old_id] = old
    return sorted(kept.values(), key=lambda c: (c.series.id, c.after_order))
