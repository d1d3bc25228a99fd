"""Decision rule 3: the slow processes of base and head are left out before deciding.

A process that a neighbour or a clock state slowed in every figure widens its arm's interval by
itself; at 5 processes per arm, one in ten of them slowed by 3-10% left 63-75% of unchanged
commits undecided, and caught 1.5 T a third of the time (benchmarks/slow_processes.py). The
slow ones (`measure.set_aside` on GPU ms per step) are left out of every figure's change shown
and bounds alike, base's and head's judged together; the report keeps every process and names
those left out, and a report read back sets the same aside again from its own figures.
"""

from __future__ import annotations

from guard.compare._models import ArmStats
from guard.measure import SlowProcess, set_aside, spread

# every figure of a process read from its arm's spreads, by field
_FIELDS = ("gpu_ms_per_step", "end_to_end_gpu_ms_per_step", "tok_per_s")


def slow_set_aside(base: ArmStats, head: ArmStats, batch_size: int) -> list[SlowProcess]:
    """The processes of `base` and `head` left out at this batch size: those slow in GPU ms per
    step (CPU ms on a CPU), the most precise figure of a process, where interference shows
    first. End-to-end ms and tok/s do not set a process aside by themselves: at their spread
    (1.4-22% between processes) 5 processes cannot tell a slow one from their own tail, and
    setting those aside made unchanged commits regress more often (0.5% at an end-to-end spread of
    10%, against 0.3% setting aside by GPU ms; docs/notebook/decision-rule.md, "Slow processes set aside")."""
    values = {base.arm: base.gpu_ms_per_step.values, head.arm: head.gpu_ms_per_step.values}
    return [SlowProcess(arm=arm, repeat=position, batch_size=batch_size, metric="gpu_ms",
                        value=values[arm][position - 1], off_pct=off_pct)
            for arm, slow in sorted(set_aside(values, slower_is_higher=True).items()) for position, off_pct in slow]


def kept_arm(arm: ArmStats, aside: list[SlowProcess]) -> ArmStats:
    """`arm` without its processes set aside, in every figure the decision reads."""
    positions = {s.repeat for s in aside if s.arm == arm.arm}
    if not positions:
        return arm
    update = {}
    for field in _FIELDS:
        kept = getattr(arm, field)
        if kept is not None:
            update[field] = spread([v for i, v in enumerate(kept.values, start=1) if i not in positions])
    return arm.model_copy(update=update)
