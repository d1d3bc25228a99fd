"""The mix's attribution from known per-size figures: the head's change over the mix split into
graph replay, padding, expert capacity waste under imbalance and kernel time at equal shapes;
mixed evidence where the traces point the other way; a win is not blamed. Expected figures are
made here from the figures given, with numpy's own fit, not by the code under test."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from guard.explain import DOMINANT_SHARE, MixAttribution, explain, mix_attribution
from guard.measure import ArmMix, Imbalance, MixReport, MixSize
from guard.trace import BeforeAfter, TraceDiff
from tests.report_fixtures import committed, current_file, mix_decision, with_mix
from tests.rules import rule_at

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARES = {1: 0.4, 2: 0.25, 3: 0.15, 6: 0.2}


def _arm(name: str, sizes: dict[int, tuple[str, int, float]], imbalance: dict[int, float] | None = None,
         scatter: float = 0.001) -> ArmMix:
    """`sizes`: batch size -> (path, padded_to, GPU ms per step); the mix's whole from the shares,
    its three processes `scatter` (a share) either side of it."""
    made = [MixSize(batch_size=s, share=SHARES[s], path=path, padded_to=rows,  # type: ignore[arg-type]
                    padding_waste=1 - s / rows, gpu_ms_per_step=ms, gpu_ms_per_real_token=ms / s,
                    imbalance_median=(imbalance or {}).get(s))
            for s, (path, rows, ms) in sorted(sizes.items())]
    whole = sum(SHARES[s] * ms for s, (_, _, ms) in sizes.items())
    useful = sum(SHARES[s] * s for s in sizes) / sum(SHARES[s] * rows for s, (_, rows, _) in sizes.items())
    levels = sorted((imbalance or {}).values())
    return ArmMix(arm=name, processes=3, timer="cuda_event", gpu_ms_per_step=whole,
                  process_ms_per_step=[whole * (1 - scatter), whole, whole * (1 + scatter)],
                  gpu_ms_per_real_token=whole / sum(SHARES[s] * s for s in sizes), tok_per_s=100.0, sizes=made,
                  capture_coverage=sum(SHARES[s] for s, (path, _, _) in sizes.items() if path == "graph"),
                  useful_work_coverage=useful, padding_waste=1 - useful,
                  imbalance=Imbalance(steps=len(levels), median=levels[len(levels) // 2], p90=levels[-1],
                                      max=levels[-1], buckets=[]) if levels else None)


def _mix(base: ArmMix, head: ArmMix) -> MixReport:
    return MixReport(source="batch_mix", seed=0, steps=200, max_batch_size=6, arms=[base, head])


def _split(mix: MixReport | None, **evidence: object) -> MixAttribution | None:
    """The split, with the mix decided by the compare stage's rule (1% threshold)."""
    decision = mix_decision(mix, "base", "head") if mix is not None else None
    return mix_attribution(mix, "base", "head", decision=decision, dominant_share=DOMINANT_SHARE,
                           **evidence)  # type: ignore[arg-type]


def _slope(points: list[tuple[int, float]]) -> float:
    xs, ys = zip(*points)
    return float(np.polyfit(xs, ys, 1)[0])


# base: 1 and 2 replayed from graphs, 3 and 6 eagerly at their own shape (the fallback);
# head: the fallback removed, 3 padded to 4 and 6 to 8, and size 1's kernels a little slower
FALLBACK = {1: ("graph", 1, 1.0), 2: ("graph", 2, 1.5), 3: ("eager", 3, 2.2), 6: ("eager", 6, 3.7)}
NO_FALLBACK = {1: ("graph", 1, 1.05), 2: ("graph", 2, 1.5), 3: ("graph", 4, 2.5), 6: ("graph", 8, 4.5)}


def test_a_removed_fallback_is_padding_with_its_share() -> None:
    found = _split(_mix(_arm("base", FALLBACK), _arm("head", NO_FALLBACK)))
    assert found is not None
    per_row = _slope([(rows, ms) for _, rows, ms in NO_FALLBACK.values()])
    padding = SHARES[3] * per_row * (4 - 3) + SHARES[6] * per_row * (8 - 6)
    kernel = SHARES[1] * (1.05 - 1.0)
    replay = (SHARES[3] * (2.5 - 2.2) + SHARES[6] * (4.5 - 3.7)) - padding
    assert found.part("padding").ms_per_step == pytest.approx(padding)
    assert found.part("kernel_time").ms_per_step == pytest.approx(kernel)
    assert found.part("graph_replay").ms_per_step == pytest.approx(replay) and replay < 0  # the launches saved
    assert found.part("imbalance").ms_per_step == 0
    assert found.part("padding").share == pytest.approx(padding / (padding + kernel))
    assert found.cause == "padding" and found.slower and found.candidates == []
    assert found.part("padding").batch_sizes == [3, 6] and found.part("kernel_time").batch_sizes == [1]
    assert found.pct == pytest.approx((sum(SHARES[s] * NO_FALLBACK[s][2] for s in SHARES)
                                       / sum(SHARES[s] * FALLBACK[s][2] for s in SHARES) - 1) * 100)
    assert abs(found.unsplit_ms) < 1e-9  # the whole is the shares' sum here
    [cost] = found.row_costs  # only the head's graph path priced anything
    assert (cost.arm, cost.path, cost.method, cost.padded_to) == ("head", "graph", "slope", [1, 2, 4, 8])
    assert cost.ms_per_row == pytest.approx(per_row)


def test_moe_capacity_under_imbalance_is_imbalance() -> None:
    # head captures every size exactly (no padding), its experts padded to capacity under I = 2.5
    # sizes 1 and 2 replayed from graphs in both, at the same I: their capacity waste is unchanged
    base = _arm("base", {1: ("graph", 1, 0.7), 2: ("graph", 2, 1.2), 3: ("eager", 3, 1.0), 6: ("eager", 6, 1.9)},
                {1: 1.5, 2: 1.5, 3: 2.5, 6: 2.5})
    head = _arm("head", {1: ("graph", 1, 0.7), 2: ("graph", 2, 1.2), 3: ("graph", 3, 1.7), 6: ("graph", 6, 3.4)},
                {1: 1.5, 2: 1.5, 3: 2.5, 6: 2.5})
    found = _split(_mix(base, head))
    assert found is not None
    per_row = _slope([(1, 0.7), (2, 1.2), (3, 1.7), (6, 3.4)])
    waste = 1 - 1 / 2.5
    imbalance = SHARES[3] * 3 * per_row * waste + SHARES[6] * 6 * per_row * waste
    assert found.part("imbalance").ms_per_step == pytest.approx(imbalance)
    assert found.part("padding").ms_per_step == 0 and found.part("kernel_time").ms_per_step == 0
    assert found.part("imbalance").batch_sizes == [3, 6]
    assert found.cause == "imbalance" and found.part("imbalance").share == pytest.approx(1.0)
    assert found.sizes[2].imbalance == (2.5, 2.5) and found.sizes[2].path == ("eager", "graph")


def _trace(idle_ms: float, busy_ms: float) -> TraceDiff:
    """A real H200 trace diff, its idle and busy time per step set to what the test needs."""
    report = committed(current_file(REPO_ROOT / "docs" / "examples" / "h200-demo-b31932f" / "report.json"))
    found = next(t.diff for t in report.traces if t.diff is not None)
    return found.model_copy(update={"idle_ms_per_step": BeforeAfter(before=0.5, after=0.5 + idle_ms, delta=idle_ms),
                                    "busy_ms_per_step": BeforeAfter(before=2.0, after=2.0 + busy_ms, delta=busy_ms)})


def test_traces_that_point_the_other_way_keep_both_hypotheses() -> None:
    mix = _mix(_arm("base", FALLBACK), _arm("head", NO_FALLBACK))
    plain = _split(mix)
    assert plain is not None
    grown = sum(max(p.ms_per_step, 0.0) for p in plain.parts)  # what grew
    idle = _split(mix, mix_trace=_trace(idle_ms=0.3, busy_ms=0.02))
    assert idle is not None and idle.cause == "mixed_evidence"
    assert idle.candidates == ["padding", "graph_replay"]
    assert idle.trace is not None and idle.trace.source == "mix"
    assert idle.trace.idle_share == pytest.approx(0.3 / 0.32)
    busy = _split(mix, mix_trace=_trace(idle_ms=-0.05, busy_ms=0.3))
    assert busy is not None and busy.cause == "padding" and busy.candidates == []  # they agree
    # a trace that barely moved (sizes the change left alone) does not outweigh the figures
    assert grown > 0
    faint = _split(mix, mix_trace=_trace(idle_ms=0.19 * grown, busy_ms=0.0))
    assert faint is not None and faint.trace is not None and not faint.trace.material and faint.cause == "padding"
    clear = _split(mix, mix_trace=_trace(idle_ms=0.21 * grown, busy_ms=0.0))
    assert clear is not None and clear.trace is not None and clear.trace.material and clear.cause == "mixed_evidence"


def test_the_traced_sizes_speak_for_the_mix_by_share() -> None:
    mix = _mix(_arm("base", FALLBACK), _arm("head", NO_FALLBACK))
    diffs = {3: _trace(idle_ms=0.4, busy_ms=0.0), 6: _trace(idle_ms=0.1, busy_ms=0.05), 5: _trace(9.0, 0.0)}
    found = _split(mix, diffs=diffs)
    assert found is not None and found.trace is not None and found.trace.batch_sizes == [3, 6]  # 5 is no mix size
    assert found.trace.idle_ms == pytest.approx(SHARES[3] * 0.4 + SHARES[6] * 0.1)
    assert found.trace.busy_ms == pytest.approx(SHARES[6] * 0.05)
    assert found.cause == "mixed_evidence"


def test_a_win_is_not_blamed() -> None:
    # a mix dominated by captured sizes: padding costs a little, the launches saved are worth more
    base = _arm("base", {1: ("graph", 1, 1.0), 2: ("graph", 2, 1.5), 3: ("eager", 3, 3.0), 6: ("eager", 6, 4.6)})
    head = _arm("head", {1: ("graph", 1, 1.0), 2: ("graph", 2, 1.5), 3: ("graph", 4, 2.5), 6: ("graph", 8, 4.5)})
    found = _split(_mix(base, head))
    assert found is not None and found.pct < 0 and not found.slower
    assert found.cause is None and found.candidates == []
    assert found.part("padding").ms_per_step > 0 and found.part("graph_replay").ms_per_step < 0  # facts kept
    assert all(p.share == 0 for p in found.parts)  # no share of a growth the mix did not have


def test_a_slowdown_within_its_processes_scatter_is_not_blamed() -> None:
    tight = _split(_mix(_arm("base", FALLBACK), _arm("head", NO_FALLBACK)))
    assert tight is not None and tight.change is not None and tight.change.ci_low_pct > 1.0 and tight.slower
    noisy = _split(_mix(_arm("base", FALLBACK, scatter=0.2), _arm("head", NO_FALLBACK, scatter=0.2)))
    assert noisy is not None and noisy.change is not None
    assert noisy.pct == pytest.approx(tight.pct) and noisy.pct > 1.0  # the medians alone are past the threshold
    assert noisy.change.ci_low_pct < 1.0 and not noisy.slower and noisy.cause is None
    assert noisy.part("padding").ms_per_step == pytest.approx(tight.part("padding").ms_per_step)  # facts kept
    assert tight.part("padding").share > 0 and noisy.part("padding").share == 0
    one = _arm("base", FALLBACK).model_copy(update={"process_ms_per_step": [1.0]})
    single = _split(_mix(one, _arm("head", NO_FALLBACK)))
    # one process: no change can be estimated, the mix is not decided and nothing is blamed
    assert single is not None and single.change is None and not single.slower and single.cause is None


def test_no_dominant_part_keeps_the_candidates_and_unknown_rows_give_no_split() -> None:
    base = _arm("base", {1: ("graph", 1, 1.0), 2: ("graph", 2, 1.5), 3: ("eager", 3, 2.2), 6: ("eager", 6, 3.7)})
    head = _arm("head", {1: ("graph", 1, 1.5), 2: ("graph", 2, 2.0), 3: ("graph", 4, 3.0), 6: ("graph", 8, 5.0)})
    found = _split(_mix(base, head))
    assert found is not None and found.cause == "mixed"
    shares = {p.kind: p.share for p in found.parts}
    assert max(shares.values()) < DOMINANT_SHARE
    assert found.candidates == sorted((k for k, v in shares.items() if v >= 0.2), key=lambda k: -shares[k])
    unknown = base.model_copy(update={"sizes": [s.model_copy(update={"padded_to": None}) for s in base.sizes]})
    assert _split(_mix(unknown, head)) is None
    assert _split(None) is None


def test_a_report_is_explained_with_its_mix() -> None:
    report = committed(current_file(REPO_ROOT / "docs" / "examples" / "h200-demo-b31932f" / "report.json"))
    mix = _mix(_arm(report.base, FALLBACK), _arm(report.head, NO_FALLBACK))
    found = with_mix(report, mix)
    assert found.mix_comparison is not None and found.mix_comparison.verdict == "regression"
    assert found.verdict == "regression"  # the mix decides the verdict like a batch size
    assert found.explanation.mix is not None and found.explanation.mix.cause == "padding"
    assert found.explanation.headline.verdict == "regression"
    # without the compare stage's decision, the explain stage names no cause of its own
    undecided = explain(report.verdict, report.batch_sizes, {}, report.base, report.head,
                        rule=report.rule, mix=mix)
    assert undecided.mix is not None and not undecided.mix.slower and undecided.mix.cause is None


def _busy(counts_ms: float, durations_ms: float, idle_ms: float) -> TraceDiff:
    """A fixed size's trace diff whose growth is split as given."""
    return _trace(idle_ms=idle_ms, busy_ms=counts_ms + durations_ms).model_copy(update={
        "busy_ms_per_step_from_counts": counts_ms, "busy_ms_per_step_from_durations": durations_ms})


def test_a_fixed_size_the_mix_shows_padded_is_blamed_on_padded_rows_when_its_busy_time_grew() -> None:
    from guard.explain import padded_rows

    mix = _mix(_arm("base", FALLBACK), _arm("head", NO_FALLBACK))
    assert padded_rows(mix, "base", "head") == {3: (3, 4), 6: (6, 8)}  # 1 and 2 compute what they did
    report = committed(current_file(REPO_ROOT / "docs" / "examples" / "h200-demo-b31932f" / "report.json"))
    (one, two) = report.batch_sizes
    six = two.model_copy(update={"batch_size": 6})
    longer = explain("regression", [one, six], {6: _busy(0.0, 0.2, 0.01)}, report.base, report.head,
                     rule=rule_at(1.0, 0.99), mix=mix)
    cause = next(c for c in longer.causes if c.batch_size == 6)
    assert (cause.kind, cause.rows, cause.dominant) == ("padded_rows", (6, 8), True)
    # idle time between kernels grew instead: not the padded rows' work, whatever the rows
    idle = explain("regression", [one, six], {6: _busy(0.0, 0.02, 0.3)}, report.base, report.head,
                   rule=rule_at(1.0, 0.99), mix=mix)
    assert next(c for c in idle.causes if c.batch_size == 6).kind == "idle_between_kernels"
    # a size the mix does not show padded keeps the trace's own cause
    plain = explain("regression", [one, six], {6: _busy(0.0, 0.2, 0.01)}, report.base, report.head,
                    rule=rule_at(1.0, 0.99), mix=None)
    assert next(c for c in plain.causes if c.batch_size == 6).kind == "slower_kernels"
