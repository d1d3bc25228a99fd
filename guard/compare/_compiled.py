"""What dynamo compiled, base against head: each arm's graphs, breaks and recompilations over
its processes, and the breaks the head added or removed: matched by file, function and reason,
since a break's line moves when lines above it change; of a function's breaks for one reason,
those past the other arm's number, in line order."""

from __future__ import annotations

from collections import Counter

from pydantic import BaseModel

from guard.measure import ArmMeasurement, DynamoRecord, GraphBreak

BREAKS_KEPT = 20  # distinct breaks an arm's summary keeps
REASONS_KEPT = 5


class ArmCompiled(BaseModel):
    """One arm's processes that compiled: each one's figures by the end of its warmup, as
    ranges over the processes where they differ, and its distinct breaks (each with the most
    records one process had)."""

    arm: str
    processes: int  # processes that recorded what dynamo compiled
    graphs: tuple[int, int]  # fewest, most over the processes
    break_count: int  # dynamo's own count, the most of one process
    breaks: list[GraphBreak] = []
    recompiles: int = 0  # the most of one process
    recompile_reasons: list[str] = []
    cudagraph_skips: int | None = None  # the most of one process; None: inductor was not loaded
    cudagraph_skip_reasons: list[str] = []
    cudagraphs_recorded: tuple[int, int] | None = None  # fewest, most; None where no process knew

    @property
    def graphs_most(self) -> int:
        return self.graphs[1]


class CompiledChange(BaseModel):
    """Base's and head's compiled decode side by side; an arm is None where none of its
    processes used torch.compile."""

    base: ArmCompiled | None = None
    head: ArmCompiled | None = None
    breaks_added: list[GraphBreak] = []  # in head, at a place and for a reason base has none
    breaks_removed: list[GraphBreak] = []
    more_graphs: bool = False  # head's fewest graphs are more than base's most (none in base: any)

    @property
    def rose(self) -> bool:
        """Head's decode breaks into more graphs than base's, or at new places."""
        return self.more_graphs or bool(self.breaks_added)

    @property
    def differs(self) -> bool:
        """Anything a reader would want said: the graphs, breaks or recompilations differ."""
        if self.rose or self.breaks_removed:
            return True
        b, h = self.base, self.head
        if b is None or h is None:
            return b is not h
        return b.graphs != h.graphs or b.recompiles != h.recompiles or b.cudagraph_skips != h.cudagraph_skips


def arm_compiled(arm: str, records: list[DynamoRecord]) -> ArmCompiled | None:
    if not records:
        return None
    breaks: dict[tuple[str | None, int | None, str, str], GraphBreak] = {}
    for record in records:
        for found in record.breaks:
            kept = breaks.get(found.place)
            if kept is None or found.count > kept.count:
                breaks[found.place] = found
    skips = [r.cudagraph_skips for r in records if r.cudagraph_skips is not None]
    recorded = [r.cudagraphs_recorded for r in records if r.cudagraphs_recorded is not None]
    graphs = [r.graphs for r in records]
    return ArmCompiled(
        arm=arm, processes=len(records), graphs=(min(graphs), max(graphs)),
        break_count=max(r.break_count for r in records), breaks=list(breaks.values())[:BREAKS_KEPT],
        recompiles=max(r.recompiles for r in records),
        recompile_reasons=list(dict.fromkeys(x for r in records for x in r.recompile_reasons))[:REASONS_KEPT],
        cudagraph_skips=max(skips) if skips else None,
        cudagraph_skip_reasons=list(dict.fromkeys(x for r in records for x in r.cudagraph_skip_reasons))[:REASONS_KEPT],
        cudagraphs_recorded=(min(recorded), max(recorded)) if recorded else None,
    )


def compiled_change(measurements: dict[str, ArmMeasurement], base: str, head: str) -> CompiledChange | None:
    """None where neither arm's processes used torch.compile."""
    arms = [arm_compiled(name, [r.dynamo for r in m.repeats if r.dynamo is not None])
            if (m := measurements.get(name)) is not None else None for name in (base, head)]
    before, after = arms
    if before is None and after is None:
        return None
    base_breaks, head_breaks = (before.breaks if before else []), (after.breaks if after else [])
    return CompiledChange(
        base=before, head=after,
        breaks_added=_beyond(head_breaks, base_breaks), breaks_removed=_beyond(base_breaks, head_breaks),
        more_graphs=after is not None and after.graphs[0] > (before.graphs[1] if before is not None else 0),
    )


def _beyond(breaks: list[GraphBreak], other: list[GraphBreak]) -> list[GraphBreak]:
    """Of `breaks`, per file, function and reason, those in line order past the number `other` has."""
    left = Counter(b.key for b in other)
    found = []
    for b in sorted(breaks, key=lambda b: (b.path or "", b.function, b.reason, b.line or 0)):
        if left[b.key]:
            left[b.key] -= 1
        else:
            found.append(b)
    return sorted(found, key=lambda b: (b.path or "", b.line or 0))
