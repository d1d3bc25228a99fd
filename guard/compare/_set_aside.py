"""Decision rule 3: each metric's slow processes of base and head are left out before deciding.

A process that a neighbour or a clock state slowed in every figure widens its arm's interval by
itself; at 5 processes per arm, one in ten of them slowed by 3-10% left 63-75% of unchanged
commits undecided, and caught 1.5 T a third of the time (benchmarks/slow_processes.py). The
slow ones (`measure.set_aside`) are left out of that metric's change shown and its bounds alike,
base's and head's judged together; the report keeps every process and names those left out,
and a report read back sets the same aside again from its own figures.
"""

from __future__ import annotations

from guard.compare._models import ArmStats, MetricKey
from guard.measure import SlowProcess, Spread, set_aside, spread

# each metric's figure per process, and which way is slower
_METRICS: tuple[tuple[MetricKey, str, bool], ...] = (
    ("gpu_ms", "gpu_ms_per_step", True),
    ("end_to_end_ms", "end_to_end_gpu_ms_per_step", True),
    ("tok_per_s", "tok_per_s", False),
)


def slow_set_aside(base: ArmStats, head: ArmStats, batch_size: int) -> list[SlowProcess]:
    """The processes of `base` and `head` that each metric leaves out at this batch size."""
    aside = []
    for metric, field, slower_is_higher in _METRICS:
        spreads: dict[str, Spread | None] = {base.arm: getattr(base, field), head.arm: getattr(head, field)}
        if any(s is None for s in spreads.values()):
            continue
        values = {arm: s.values for arm, s in spreads.items() if s is not None}
        for arm, slow in sorted(set_aside(values, slower_is_higher).items()):
            aside += [SlowProcess(arm=arm, repeat=p, batch_size=batch_size, metric=metric, value=values[arm][p - 1],
                                  off_pct=off_pct) for p, off_pct in slow]
    return aside


def kept_arm(arm: ArmStats, aside: list[SlowProcess]) -> ArmStats:
    """`arm` with each metric's figures of its processes set aside left out."""
    update = {}
    for metric, field, _ in _METRICS:
        positions = {s.repeat for s in aside if s.arm == arm.arm and s.metric == metric}
        kept = getattr(arm, field)
        if positions and kept is not None:
            update[field] = spread([v for i, v in enumerate(kept.values, start=1) if i not in positions])
    return arm.model_copy(update=update) if update else arm

