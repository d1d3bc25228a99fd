"""The batch-size mix's attribution: the head's change in GPU ms per step over the mix, split
into graph replay against eager, padding, expert capacity waste under imbalance and kernel time
at equal shapes, each with its share; then held against the paired traces, and left as
candidates where the two point different ways.

Per size s of share w, for base b and head h (path, rows computed R = padded_to, GPU ms per
step t, median imbalance I), with c an arm's ms per computed row on a path (`RowCost`):
- padding: w * c * (R_h - R_b), priced by the arm that computed the more rows;
- imbalance: w * s * c * (waste_h - waste_b), where waste = 1 - 1/I on a graph (a static expert
  capacity holds at least the largest load, I times the mean) and 0 eagerly (exact shapes), c
  the capacity-padded arm's (the head's where both are);
- the rest of w * (t_h - t_b): graph_replay where the paths differ, kernel_time where they do not.
"""

from __future__ import annotations

from guard.explain._models import (
    MixAttribution, MixCauseKind, MixPart, MixPartKind, MixPath, MixSizeChange, RowCost, TraceSide,
)
from guard.compare import BatchComparison, Verdict
from guard.measure import ArmMix, MixReport, MixSize
from guard.trace import TraceDiff

PARTS: tuple[MixPartKind, ...] = ("graph_replay", "padding", "imbalance", "kernel_time")
SLOWER: tuple[Verdict, ...] = ("regression", "at_threshold")  # a slowdown shown, as for a batch size's cause
CANDIDATE_SHARE = 0.2  # without a dominant part, the parts carrying this share of what grew stay candidates
_HOST_PARTS = {"graph_replay"}  # time the trace shows as idle between kernels; the other parts are busy time


def mix_attribution(mix: MixReport | None, base: str, head: str, *, decision: BatchComparison | None,
                    dominant_share: float, diffs: dict[int, TraceDiff] | None = None,
                    mix_trace: TraceDiff | None = None) -> MixAttribution | None:
    """None without both arms' mix figures, or where a size's path or rows computed are unknown.
    `decision`: the compare stage's verdict on the mix, which alone says whether it is slower;
    `diffs`: the profiled pass's diff per fixed batch size; `mix_trace`: the mix's own, first."""
    arms = {a.arm: a for a in mix.arms} if mix is not None else {}
    before, after = arms.get(base), arms.get(head)
    if before is None or after is None:
        return None
    pairs = _pairs(before, after)
    if pairs is None:
        return None
    costs: dict[tuple[str, str], RowCost] = {}
    sizes = [_size_change(b, h, before, after, costs) for b, h in pairs]
    parts = []
    for kind in PARTS:
        ms = sum(s.parts_ms[kind] for s in sizes)
        parts.append(MixPart(kind=kind, ms_per_step=ms, share=0.0,
                             batch_sizes=[s.batch_size for s in sizes if s.parts_ms[kind] != 0]))
    grew = sum(max(p.ms_per_step, 0.0) for p in parts)
    pct = (after.gpu_ms_per_step / before.gpu_ms_per_step - 1) * 100
    trace = _trace_side(mix_trace, diffs or {}, {s.batch_size: s.share for s in sizes})
    # the compare stage decided the mix like a batch size: a slowdown it shows is one to split
    slower = decision is not None and decision.verdict in SLOWER
    change = decision.gpu_ms_bounds if decision is not None else None
    # shares of a growth only where the mix grew: a faster or unchanged mix's leftovers are noise
    if slower and grew > 0:
        parts = [p.model_copy(update={"share": max(p.ms_per_step, 0.0) / grew}) for p in parts]
    # a trace whose growth is small beside the mix's (unchanged sizes' noise) points nowhere
    if trace is not None and max(trace.idle_ms, 0.0) + max(trace.busy_ms, 0.0) < CANDIDATE_SHARE * grew:
        trace = trace.model_copy(update={"material": False})
    cause, candidates = _cause(parts, trace, dominant_share) if slower and grew > 0 else (None, [])
    return MixAttribution(
        base_ms_per_step=before.gpu_ms_per_step, head_ms_per_step=after.gpu_ms_per_step, pct=pct, change=change,
        slower=slower,
        parts=parts, unsplit_ms=after.gpu_ms_per_step - before.gpu_ms_per_step - sum(p.ms_per_step for p in parts),
        row_costs=sorted(costs.values(), key=lambda c: (c.arm != base, c.path)), sizes=sizes, trace=trace,
        cause=cause, candidates=candidates,
    )


def _pairs(before: ArmMix, after: ArmMix) -> list[tuple[MixSize, MixSize]] | None:
    heads = {s.batch_size: s for s in after.sizes}
    pairs = [(b, heads[b.batch_size]) for b in before.sizes if b.batch_size in heads]
    if not pairs or any(s.path is None or s.padded_to is None for pair in pairs for s in pair):
        return None  # unknown, not guessed
    return pairs


def row_cost(arm: ArmMix, path: MixPath) -> RowCost | None:
    """ms per computed row on `path`, from the arm's sizes on it: the least-squares slope of GPU
    ms per step over padded_to (0 where it falls), or its ms per row with one padded_to."""
    by_rows: dict[int, list[float]] = {}
    for s in arm.sizes:
        if s.path == path and s.padded_to is not None:
            by_rows.setdefault(s.padded_to, []).append(s.gpu_ms_per_step)
    if not by_rows:
        return None
    points = [(rows, sum(ms) / len(ms)) for rows, ms in sorted(by_rows.items())]
    if len(points) == 1:
        rows, ms = points[0]
        return RowCost(arm=arm.arm, path=path, ms_per_row=ms / rows, method="per_row", padded_to=[rows])
    mean_x = sum(x for x, _ in points) / len(points)
    mean_y = sum(y for _, y in points) / len(points)
    slope = (sum((x - mean_x) * (y - mean_y) for x, y in points)
             / sum((x - mean_x) ** 2 for x, _ in points))
    return RowCost(arm=arm.arm, path=path, ms_per_row=max(slope, 0.0), method="slope",
                   padded_to=[x for x, _ in points])


def _size_change(b: MixSize, h: MixSize, before: ArmMix, after: ArmMix,
                 costs: dict[tuple[str, str], RowCost]) -> MixSizeChange:
    assert b.path is not None and h.path is not None and b.padded_to is not None and h.padded_to is not None

    def cost(arm: ArmMix, path: MixPath) -> float:
        key = (arm.arm, path)
        if key not in costs:
            found = row_cost(arm, path)
            assert found is not None  # the size itself is on that path, with its rows
            costs[key] = found
        return costs[key].ms_per_row

    w, size = b.share, b.batch_size
    padding = 0.0
    if h.padded_to > b.padded_to:
        padding = cost(after, h.path) * (h.padded_to - b.padded_to)
    elif h.padded_to < b.padded_to:
        padding = -cost(before, b.path) * (b.padded_to - h.padded_to)
    # one price for both arms' waste, the capacity-padded arm's (the head's where both are), so
    # that an unchanged I at an unchanged size gives none
    waste = _capacity_waste(h) - _capacity_waste(b)
    priced = (after, h.path) if _capacity_waste(h) > 0 or _capacity_waste(b) == 0 else (before, b.path)
    imbalance = size * cost(*priced) * waste if waste else 0.0
    rest = h.gpu_ms_per_step - b.gpu_ms_per_step - padding - imbalance
    moved = b.path != h.path
    parts: dict[MixPartKind, float] = {
        "graph_replay": w * rest if moved else 0.0,
        "padding": w * padding,
        "imbalance": w * imbalance,
        "kernel_time": 0.0 if moved else w * rest,
    }
    return MixSizeChange(batch_size=size, share=w, path=(b.path, h.path), padded_to=(b.padded_to, h.padded_to),
                         gpu_ms_per_step=(b.gpu_ms_per_step, h.gpu_ms_per_step),
                         imbalance=(b.imbalance_median, h.imbalance_median), parts_ms=parts)


def _capacity_waste(size: MixSize) -> float:
    """Of a step's expert rows, the share past the loads: 1 - 1/I on a graph, 0 eagerly."""
    if size.path != "graph" or size.imbalance_median is None or size.imbalance_median <= 0:
        return 0.0
    return 1.0 - 1.0 / size.imbalance_median


def _trace_side(mix_trace: TraceDiff | None, diffs: dict[int, TraceDiff],
                shares: dict[int, float]) -> TraceSide | None:
    if mix_trace is not None:
        idle, busy = mix_trace.idle_ms_per_step.delta, mix_trace.busy_ms_per_step.delta
        if idle is None or busy is None:
            return None
        source, traced = "mix", []
    else:
        traced = sorted(size for size in diffs if size in shares and diffs[size].idle_ms_per_step.delta is not None
                        and diffs[size].busy_ms_per_step.delta is not None)
        if not traced:
            return None
        idle = sum(shares[s] * (diffs[s].idle_ms_per_step.delta or 0.0) for s in traced)
        busy = sum(shares[s] * (diffs[s].busy_ms_per_step.delta or 0.0) for s in traced)
        source = "batch_sizes"
    grew = max(idle, 0.0) + max(busy, 0.0)
    return TraceSide(source=source, batch_sizes=traced, idle_ms=idle, busy_ms=busy,  # type: ignore[arg-type]
                     idle_share=max(idle, 0.0) / grew if grew else 0.0,
                     busy_share=max(busy, 0.0) / grew if grew else 0.0)


def _cause(parts: list[MixPart], trace: TraceSide | None,
           dominant_share: float) -> tuple[MixCauseKind, list[MixPartKind]]:
    ranked = sorted((p for p in parts if p.share > 0), key=lambda p: -p.share)
    top = ranked[0]
    if top.share < dominant_share:
        return "mixed", [p.kind for p in ranked if p.share >= CANDIDATE_SHARE]
    if trace is None or not trace.material:
        return top.kind, []
    host_mix = top.kind in _HOST_PARTS
    if trace.idle_share >= dominant_share and not host_mix:
        return "mixed_evidence", [top.kind, "graph_replay"]
    if trace.busy_share >= dominant_share and host_mix:
        busy = next((p.kind for p in ranked if p.kind not in _HOST_PARTS), "kernel_time")
        return "mixed_evidence", [top.kind, busy]
    return top.kind, []
