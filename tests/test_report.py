"""The report's trace part and the comment's trace paragraph, from real H200 traces."""

from __future__ import annotations

import gzip
import json
import math
import re
import statistics
import shutil
from pathlib import Path

import pytest

from guard.compare import decide_again
from guard.config import RULE_VERSION
from guard.measure import spread
from guard.report import SCHEMA_VERSION, Report, render_comment
from guard.trace import trace_sections
from tests.report_fixtures import committed, current_file, explained, ruled

REPO_ROOT = Path(__file__).resolve().parents[1]
FIXTURES = REPO_ROOT / "tests" / "fixtures" / "traces"
EXAMPLE = current_file(REPO_ROOT / "docs" / "examples" / "h200-demo" / "report.json")
AA_PAIR = current_file(REPO_ROOT / "docs" / "validation" / "h200-30l" / "pairs" / "aa-01" / "report.json.gz")


def _kernels_per_step(path: Path, steps: int) -> float:
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    return sum(1 for e in events if e.get("cat") == "kernel") / steps


def test_regression_comment_gains_the_trace_paragraph(tmp_path: Path) -> None:
    out = tmp_path / "out"
    (out / "runs" / "traces").mkdir(parents=True)
    base_trace = out / "runs" / "traces" / "base-0-bs1.trace.json.gz"
    head_trace = out / "runs" / "traces" / "head-0-bs1.trace.json.gz"
    shutil.copy(FIXTURES / "h200-refengine-step-graph-bs1.json.gz", base_trace)
    shutil.copy(FIXTURES / "h200-refengine-layer-graphs-bs1.json.gz", head_trace)
    report = committed(EXAMPLE)
    # The fixtures have no step ranges; the step-graph one splits by its 16 graph launches.
    # The layer-graphs one has 22 launches per step, so give it as base too for a fair pair.
    sections = trace_sections(
        {"base": {1: [(0, base_trace)]}, "head": {1: [(0, base_trace)]}},
        "base", "head", [1, 2], 16, out,
    )
    assert [s.batch_size for s in sections] == [1]
    section = sections[0]
    assert section.arms[0].shown_trace == "runs/traces/base-0-bs1.trace.json.gz"
    assert section.arms[0].figures is not None
    assert section.arms[0].figures.kernels_per_step == _kernels_per_step(base_trace, 16)
    assert section.diff is not None and section.diff.kernel_counts_identical

    report = report.model_copy(update={"traces": sections})
    comment = render_comment(report)
    assert "<summary>Profiler: where the time went at batch size 1</summary>" in comment
    assert "Over 16 decode steps, in a separate pass" in comment
    assert "Kernel counts and API calls are identical." in comment
    assert "`runs/traces/base-0-bs1.trace.json.gz`" in comment
    # batch size 2 regressed too but has no trace section: no fold for it
    assert "where the time went at batch size 2" not in comment


def test_trace_that_cannot_be_read_is_reported_not_fatal(tmp_path: Path) -> None:
    bad = tmp_path / "base-0-bs1.trace.json.gz"
    bad.write_bytes(b"")
    good = tmp_path / "head-0-bs1.trace.json.gz"
    shutil.copy(FIXTURES / "h200-refengine-step-graph-bs1.json.gz", good)
    sections = trace_sections({"base": {1: [(0, bad)]}, "head": {1: [(0, good)]}}, "base", "head", [1], 16, tmp_path)
    base, head = sections[0].arms
    assert base.figures is None and base.error and "empty" in base.error.lower()
    assert head.figures is not None
    assert sections[0].diff is None


def test_piecewise_head_paragraph_names_counts_and_launches(tmp_path: Path) -> None:
    base_trace = FIXTURES / "h200-harness-guard-step-one-graph.json.gz"
    head_trace = FIXTURES / "h200-harness-guard-step-piecewise.json.gz"
    sections = trace_sections(
        {"base": {1: [(0, base_trace)]}, "head": {1: [(0, head_trace)]}}, "base", "head", [1], 8, tmp_path
    )
    report = committed(EXAMPLE).model_copy(update={"traces": sections})
    comment = render_comment(report)
    before, after = _kernels_per_step(base_trace, 8), _kernels_per_step(head_trace, 8)
    assert after == before  # an eager kernel stands where a graph's kernel stood
    assert f"Kernels per step: {after:.0f} in both, but" in comment
    assert "`cudaGraphLaunch` 1 -> 4" in comment
    assert "Idle time between kernels:" in comment


def test_steady_median_gap_points_at_the_tail() -> None:
    """The H200 demo at batch size 2: same kernels, same median gap, more idle time."""
    report = committed(EXAMPLE)
    section = next(s for s in report.traces if s.batch_size == 2)
    assert section.diff is not None
    gaps, idle = section.diff.gaps, section.diff.idle_ms_per_step
    assert gaps.median_gap_us.delta == 0 and idle.delta and idle.delta > 0
    comment = render_comment(report)
    tail = gaps.largest_1pct_gaps_ms_per_step.delta
    expected = f"stays at {gaps.median_gap_us.before:.3f} us; the largest 1% of gaps carry {tail:.3f} of the"
    assert f"{expected} {idle.delta:.3f} ms" in comment


def test_slower_kernels_with_a_sliver_of_idle_say_nothing_about_gap_tails() -> None:
    """H200 pair kernel-1-07: kernels slower, idle up by well under a tenth of the change."""
    report = _pair_report("h200", "kernel-1-07")
    diff = report.traces[0].diff
    assert diff is not None and diff.gaps.median_gap_us.delta == 0
    idle = diff.idle_ms_per_step.delta or 0.0
    assert 0 < idle < 0.1 * diff.busy_ms_per_step_from_durations  # from the H200's figures, not the code
    comment = render_comment(report)
    softmax = next(c for c in diff.kernels_replaced if c.name == "softmax_warp_forward")
    before, after = softmax.mean_duration_us.before, softmax.mean_duration_us.after
    assert before is not None and after is not None and after > before
    assert "The kernels themselves are slower: `softmax_warp_forward`" in comment
    assert f"`softmax_warp_forward`: 1 per step, now as another variant, {before:.3f} -> {after:.3f} us" in comment
    assert "of gaps carry" not in comment


def _pair_report(folder: str, pair: str) -> Report:
    path = REPO_ROOT / "docs" / "validation" / folder / "pairs" / pair / "report.json.gz"
    return committed(path)


def test_a_profile_out_of_scale_with_the_timed_pass_says_to_read_it_for_shares() -> None:
    """H200 pair idle-1-09: the profiled step grew many times what the timed pass measured."""
    report = _pair_report("h200-30l", "idle-1-09")
    diff, batch = report.traces[0].diff, report.batch_sizes[0]
    assert diff is not None and diff.span_ms_per_step.delta is not None
    medians = {a.arm: a.gpu_ms_per_step.median for a in batch.arms}
    timed = medians[report.head] - medians[report.base]
    assert diff.span_ms_per_step.delta > 5 * timed > 0  # the H200's figures, not the code's
    comment = render_comment(report)
    assert f"The profiled step grew by {diff.span_ms_per_step.delta:.3f} ms" in comment
    assert f"the {timed:.3f} ms the timed pass measured" in comment
    # idle is the change here, so the gap sum is told (compare kernel-0.5-01, where it is not)
    assert "At about 1394 kernels per step, the mean gap's change adds" in comment
    # kernel-1-07: profiled and timed changes agree within a factor of 2, so nothing is said
    assert "The profiled step grew" not in render_comment(_pair_report("h200", "kernel-1-07"))


def _kernel_pair_at_threshold() -> Report:
    """H200 pair kernel-0.5-01 (+0.46% of slower kernels, threshold 0.5%), both of its rounds
    decided again by the interval rule: the report as this guard would have written it."""
    from validation._models import PairRecord
    from validation._pairs import load_pair
    from validation._summary import compare_pair

    folder = REPO_ROOT / "docs" / "validation" / "h200-30l"
    lines = (folder / "pairs.jsonl").read_text().splitlines()
    record = next(r for r in map(PairRecord.model_validate_json, lines) if r.pair_id == "kernel-0.5-01")
    pair = load_pair(folder, record)
    assert pair.facts.rounds == 2
    (batch,) = compare_pair(pair, 2, pair.facts.threshold_pct, pair.facts.tok_threshold_pct, looks=2).batch_sizes
    report = pair.report
    return explained(ruled(report, looks=2, decided_sizes=1, version=RULE_VERSION).model_copy(update={
        "batch_sizes": [batch], "reasons": [], "verdict": batch.verdict, "rounds": 2,
        "schema_version": SCHEMA_VERSION}))


def test_a_real_slowdown_at_the_threshold_is_said_to_be_at_threshold() -> None:
    """GPU time rose +0.49% and its interval holds the 0.5% threshold: the comment says at
    threshold, with the change, its interval and the processes it would take; not noise, and
    never a pass."""
    report = _kernel_pair_at_threshold()
    (batch,) = report.batch_sizes
    bounds = batch.gpu_ms_bounds
    assert batch.verdict == "at_threshold" and batch.decided_by == "gpu_ms" and bounds is not None
    assert 0 < bounds.ci_low_pct < report.rule.gpu_ms.pct < bounds.ci_high_pct  # the H200's figures
    comment = render_comment(report)
    assert comment.splitlines()[1].startswith(
        f"**Decode slowdown at the 0.5% threshold, not ruled out: {bounds.pct:+.2f}% GPU ms per step at batch size 1 "
        "with ")
    # decided at the second of 2 looks, which spends what the first left of alpha 0.01, over 2 families
    second = (0.01 - 0.01 * math.log(1 + (math.e - 1) / 2)) / (2 * 1)
    assert batch.alpha_per_look == pytest.approx(second)
    level = f"{(1 - 2 * second) * 100:.4g}%"
    assert level == "99.62%"
    assert (f"At batch size 1, GPU ms per step rose {bounds.pct:.2f}%: slower, but too close to the 0.5% threshold "
            "to call after its confirmation round.") in comment
    # what would decide it, once, right under the title
    assert comment.splitlines()[3] == ("**Needs more than 200 processes per arm to decide** (this run: 8) at this "
                                       "spread: run it on a quieter runner.")
    # the figures the change is a ratio of, and every interval at the level the verdict was decided at
    row = re.search(rf"\| GPU ms per step \| ([0-9.]+) \| ([0-9.]+) \| {re.escape(f'{bounds.pct:+.2f}%')} "
                    rf"\({re.escape(bounds.interval())}\) \| yes \|", comment)
    assert row is not None
    for shown, arm in zip(row.groups(), ("base", "head")):
        assert abs(float(shown) - _mean(report, arm)) <= 0.5 * 10 ** -len(shown.partition(".")[2])
    assert f"Intervals are {level}, the verdict's level." in comment and "95%" not in comment.split("<details>")[0]
    assert "4 fresh processes per arm, and 4 more in a confirmation round for batch size 1" in comment
    assert "Each bound of the first look is wrong at most 0.31% of the time" in comment  # 62% of alpha over 2
    assert "too noisy" not in comment and "No decode slowdown" not in comment
    # where the time went, as for a regression: two kernels swapped variant
    assert "2 kernel(s) run as another variant of the same function" in comment
    assert "The kernels themselves are slower: `softmax_warp_forward`" in comment


def _mean(report: Report, arm: str) -> float:
    """The arm's geometric mean of GPU ms per step: the figure its change is a ratio of."""
    (batch,) = report.batch_sizes
    assert batch.set_aside == []  # every process is in the change
    stats = next(a for a in batch.arms if a.arm == arm)
    return statistics.geometric_mean(stats.gpu_ms_per_step.values)


def test_an_undecided_report_says_at_threshold_in_the_status_and_summary() -> None:
    from guard.cli import GATE_EXIT
    from guard.publish import annotations, headline
    from guard.publish._status import status_state
    from guard.report import gate

    report = _kernel_pair_at_threshold()
    change = report.batch_sizes[0].gpu_ms_change
    assert change is not None
    bounds = report.batch_sizes[0].gpu_ms_bounds
    assert bounds is not None
    assert headline(report) == f"at threshold: batch size 1 GPU ms per step {bounds.pct:+.2f}% ({bounds.interval()})"
    # a slowdown shown at the threshold: undecided, neither green nor red, exit 4 (measure.at_threshold "neutral")
    assert gate(report) == "undecided" and status_state(gate(report)) == "pending" and GATE_EXIT[gate(report)] == 4
    failing = ruled(report, at_threshold="fail")  # measure.at_threshold = "fail"
    assert gate(failing) == "failure" and status_state(gate(failing)) == "failure" and GATE_EXIT[gate(failing)] == 1
    (line,) = annotations(report)
    assert line.startswith("::warning title=Decode slowdown at the threshold::")


def test_a_noisy_report_says_how_noisy_and_what_it_would_take() -> None:
    """The same pair with head's repeats scattered by 3%: no change and the threshold both fit."""
    from tests.report_fixtures import remeasured

    report = remeasured(_pair_report("h200-30l", "kernel-0.5-01"), 1.0, jitter=0.03, looks=2)
    (batch,) = report.batch_sizes
    assert batch.verdict == "inconclusive" and batch.gpu_ms_bounds is not None
    assert batch.gpu_ms_bounds.ci_low_pct < 0 < report.rule.gpu_ms.pct < batch.gpu_ms_bounds.ci_high_pct
    head = next(a for a in batch.arms if a.arm == report.head)
    assert head.gpu_ms_per_step.spread_pct > 5  # 3% either way of base's own times, over base's 0.1%
    comment = render_comment(report)
    assert comment.splitlines()[1].endswith("GPU ms per step too noisy at batch size 1**")
    assert "too noisy to tell a 0.5% slowdown from none" in comment
    needed = batch.repeats_to_decide
    count = "more than 200" if needed is None else f"about {max(needed, 5)}"
    under_title = comment.splitlines()[3]
    assert under_title.startswith(f"**Needs {count} processes per arm to decide** (this run: {head.repeats})")


def test_a_pass_names_a_significant_rise_under_the_threshold_and_an_a_a_pair_does_not() -> None:
    """H200 pair kernel-0.5-03 (+0.45% against 0.5%, 1 round) made a pass of its own figures by a 1%
    threshold, and aa-01 (+0.02%)."""
    from tests.report_fixtures import remeasured

    pair = _pair_report("h200-30l", "kernel-0.5-03")
    report = remeasured(ruled(pair, gpu_ms=0.8, tok_per_s=50.0), 1.0045)
    assert report.verdict == "pass" and report.explanation.headline.notable
    bounds = report.batch_sizes[0].gpu_ms_bounds
    assert bounds is not None and 0 < bounds.ci_low_pct and bounds.ci_high_pct < 0.8 and bounds.pct >= 0.4
    under = render_comment(report)
    assert under.splitlines()[1].endswith(f"; {bounds.pct:+.2f}% GPU ms per step at batch size 1, under it**")
    assert (f"GPU ms per step did rise at batch size 1: {bounds.pct:+.2f}% ({bounds.interval()}), under the "
            "threshold.") in under
    plain = render_comment(_pair_report("h200-30l", "aa-01"))
    assert plain.splitlines()[1].startswith("**No decode slowdown past 0.5% with ") and "did rise" not in plain


def _one_batch(report: Report, **update: object) -> Report:
    batch = report.batch_sizes[0].model_copy(update=update)
    return explained(report.model_copy(update={"batch_sizes": [batch], "verdict": batch.verdict, "traces": []}))


def test_title_and_sentence_name_the_metric_that_decided() -> None:
    """tok/s fell past its threshold while step time held: the title and the sentence say tok/s,
    and the cause is time on the host."""
    from tests.report_fixtures import remeasured

    report = remeasured(committed(EXAMPLE), 1.0)
    batch = report.batch_sizes[0]
    base = next(a for a in batch.arms if a.arm == report.base)
    slow_tok = [v * 0.9 for v in base.tok_per_s.values]  # head's tok/s 10% down, its GPU time the same
    arms = [a.model_copy(update={"tok_per_s": spread(slow_tok)}) if a.arm == report.head else a for a in batch.arms]
    rule = report.rule.model_copy(update={"decided_sizes": 1})  # the one batch size it keeps below
    again = decide_again(batch.model_copy(update={"arms": arms}), report.base, report.head, rule)
    assert again.verdict == "regression" and again.decided_by == "tok_per_s"
    by_tok = explained(report.model_copy(update={"batch_sizes": [again], "verdict": "regression", "traces": []}))
    title = render_comment(by_tok).splitlines()[1]
    assert title.startswith("**Decode 10.0% slower at batch size 1 in tok/s with ") and title.endswith(": host time**")
    tok = again.tok_per_s_bounds
    assert tok is not None
    # and why the device figure differs: GPU ms held, as it leaves the host's launch out
    assert (f"At batch size 1, tokens per second fell {-tok.pct:.2f}%, its whole interval past the 1% threshold; "
            "GPU ms per step, timed with the host's launch held out, changed") in render_comment(by_tok)
    assert "(within the threshold): the difference is the host's part of each step." in render_comment(by_tok)


def test_environment_names_the_gpu_state_and_warnings() -> None:
    report = committed(EXAMPLE)
    state = {"available": True, "power_limit_w": 700.0, "max_sm_clock_mhz": 1980, "persistence_mode": True}
    report = report.model_copy(
        update={
            "gpu_fingerprint": state,
            "warnings": ["arm 'head' repeat 2: clocks held down by sw_thermal_slowdown at the end"],
        }
    )
    comment = render_comment(report)
    environment = comment[comment.index("<summary>Environment</summary>"):]
    assert "power limit 700 W; max SM clock 1980 MHz; persistence mode on" in environment
    # a warning is the report's text, escaped for Markdown: the underscores show as they are
    assert "- arm 'head' repeat 2: clocks held down by sw\\_thermal\\_slowdown at the end" in environment


def test_the_cause_of_each_slower_batch_size_is_a_fact_and_a_sentence() -> None:
    """H200 demo with an ablation arm: at batch size 2 idle time is most of the change."""
    path = REPO_ROOT / "docs" / "examples" / "h200-demo-ablation" / "report.json"
    report = committed(path)
    diff = next(s for s in report.traces if s.batch_size == 2).diff
    assert diff is not None
    idle = diff.idle_ms_per_step.delta or 0.0
    total = idle + max(diff.busy_ms_per_step_from_counts, 0) + max(diff.busy_ms_per_step_from_durations, 0)
    assert idle / total >= 0.6  # computed here from the diff, not by the code under test
    cause = next(c for c in report.explanation.causes if c.batch_size == 2)
    assert cause.kind == "idle_between_kernels" and cause.split is not None
    assert cause.split.idle_share == pytest.approx(idle / total)
    comment = render_comment(report)
    assert "At batch size 2, most of the extra time is idle time between kernels" in comment \
        or "At batch size 2, the extra time is idle time between kernels" in comment
    assert f"{idle / total:.0%} idle between kernels" in comment
    assert "; capture changed at engine.py:" in comment.splitlines()[1]


def test_a_launch_only_slowdown_is_named_where_the_verdict_does_not_see_it() -> None:
    """End-to-end CUDA-event times slower, held GPU times not: the comment says so, by the
    interval rule (the end-to-end lower bound past the threshold), not by a p-value."""
    from tests.report_fixtures import remeasured

    report = remeasured(committed(EXAMPLE), 1.0)
    batch = report.batch_sizes[0]
    assert batch.verdict == "pass" and batch.alpha_per_look is not None
    base = next(a for a in batch.arms if a.arm == report.base).gpu_ms_per_step.values

    def with_end_to_end(factor: float) -> Report:
        arms = [a.model_copy(update={"end_to_end_gpu_ms_per_step": spread(
            [v * (factor if a.arm == report.head else 1.0) for v in base])}) for a in batch.arms]
        one = batch.model_copy(update={"arms": arms})
        return explained(report.model_copy(update={"batch_sizes": [one], "verdict": "pass", "traces": []}))

    noted = with_end_to_end(1.05)
    (note,) = noted.explanation.launch_notes
    assert note.end_to_end.ci_low_pct > noted.rule.gpu_ms.pct
    assert note.end_to_end.confidence == pytest.approx(1 - 2 * batch.alpha_per_look)
    comment = render_comment(noted)
    assert "At batch size 1, timed with the host's launch time included, GPU ms per step rose +5.00%" in comment
    assert "which only tokens per second weighs in the verdict" in comment
    assert with_end_to_end(1.0).explanation.launch_notes == []
    assert "launch time included" not in render_comment(with_end_to_end(1.0))


def test_a_pass_says_what_it_rules_out_for_each_metric() -> None:
    """An A/A pair from the H200: the upper bounds stay under each metric's own threshold."""
    report = committed(AA_PAIR)
    assert report.verdict == "pass" and report.rule.tok_per_s.pct != report.rule.gpu_ms.pct
    batch = report.batch_sizes[0]
    assert batch.gpu_ms_bounds.ci_high_pct < report.rule.gpu_ms.pct
    assert -batch.tok_per_s_bounds.ci_low_pct < report.rule.tok_per_s.pct
    gated = render_comment(_one_batch(report, tok_per_s_gates=True))
    assert (f"No slowdown of {report.rule.gpu_ms.pct:g}% in GPU ms per step and {report.rule.tok_per_s.pct:g}% in "
            "tokens per second "
            "at any batch size measured: every upper bound is under it.") in gated
    comment = render_comment(report)
    assert (f"({report.rule.gpu_ms.pct:g}% in GPU ms per step, {report.rule.tok_per_s.pct:g}% in tokens per second)"
            in comment)


def test_a_pass_whose_tok_per_s_only_informs_claims_nothing_of_tok_per_s() -> None:
    """tok/s too noisy to detect its threshold: the pass rules out a slowdown in step time
    alone, and one sentence says what tok/s could detect and the repeats it would take."""
    report = committed(AA_PAIR)
    informs = _one_batch(report, tok_per_s_gates=False, tok_per_s_detectable_pct=23.4, tok_per_s_repeats_to_gate=None)
    comment = render_comment(informs)
    assert (f"No slowdown of {report.rule.gpu_ms.pct:g}% in GPU ms per step at any batch size measured: every upper "
            "bound is under it.") in comment
    # too noisy to rule its threshold out, it decides only a change wholly past it, and says so
    assert re.search(rf"\| tokens per second \|[^\n]*\| if past {report.rule.tok_per_s.pct:g}% \|", comment)
    repeats = informs.batch_sizes[0].arms[0].repeats
    assert (f"at its spread, {repeats} processes per arm detect only a change of 23.4% at batch size 1, not its "
            f"{report.rule.tok_per_s.pct:g}% threshold; it would take more than 200 per arm") in comment
    gated = _one_batch(report, tok_per_s_gates=False, tok_per_s_detectable_pct=1.8, tok_per_s_repeats_to_gate=41)
    assert "it would take about 41 per arm for it to decide any change" in render_comment(gated)


def test_a_kernel_swapped_for_another_variant_is_a_slower_kernel_on_h200_figures() -> None:
    """Pair kernel-1-01 ran before the trace diff folded variants. Its report keeps both arms'
    kernel tables, so the diff is made again from them, and then slower kernels dominate."""
    import gzip

    from guard.explain import cause_of
    from guard.trace import TraceDiff, diff

    path = REPO_ROOT / "docs" / "validation" / "h200" / "pairs" / "kernel-1-01" / "report.json.gz"
    as_run = json.loads(gzip.decompress(path.read_bytes()))["traces"][0]["diff"]
    recorded = {k["name"] for k in as_run["kernels_added"] + as_run["kernels_removed"]}
    report = committed(path)  # its diff made again from the kernel tables
    section, batch = report.traces[0], report.batch_sizes[0]
    base, head = (a.figures for a in section.arms)
    assert base is not None and head is not None
    again = diff(base, head)
    assert isinstance(section.diff, TraceDiff) and section.diff == again
    assert again.kernels_added == again.kernels_removed == []
    families = {k.name for k in again.kernels_replaced}
    assert families == {"softmax_warp_forward", "internal::gemvx::kernel"}
    assert all(any(family in name for name in recorded) for family in families)
    assert again.busy_ms_per_step_from_durations > 10 * abs(again.busy_ms_per_step_from_counts)
    cause = cause_of(batch, again)
    assert cause is not None and cause.kind == "slower_kernels" and cause.dominant


def _committed_reports() -> list[Path]:
    docs = REPO_ROOT / "docs"
    return sorted([*docs.rglob("report.json"), *docs.rglob("report.json.gz")])


def test_every_block_of_the_comment_starts_after_a_blank_line() -> None:
    """On GitHub a line right under a paragraph joins it: a trace section's first line, a
    heading or a table would read as the previous paragraph's tail. Every report the H200
    wrote into docs/ is rendered again."""
    paths = _committed_reports()
    assert len(paths) >= 40
    joined = []
    for path in paths:
        lines = render_comment(committed(path)).splitlines()
        for above, line in zip(lines, lines[1:]):
            table_starts = line.startswith("|") and not above.startswith("|")
            if (table_starts or line.startswith(("Profiler over", "### ", "<details>"))) and above.strip():
                joined.append(f"{path.relative_to(REPO_ROOT)}: {line[:40]!r} under {above[-40:]!r}")
    assert joined == []


@pytest.mark.parametrize(("field", "count", "said", "once"), [
    ("swept", 2, "started them ended: {head} 2 processes.", "killed by the guard"),
    ("temp_removed", 1, "wrote them ended: {head} 1 file or folder.", "removed by the guard"),
])
def test_what_the_arms_left_behind_is_each_arms_fact_and_said_once_from_it(
    field: str, count: int, said: str, once: str,
) -> None:
    report = _pair_report("h200", "kernel-1-07")
    assert all(getattr(a, field) == 0 for a in report.arms) and once not in render_comment(report)
    assert field not in report.model_dump(mode="json")["arms"][0]  # a report without it reads as before
    arms = [a.model_copy(update={field: count}) if a.name == report.head else a for a in report.arms]
    left = Report.model_validate_json(report.model_copy(update={"arms": arms}).model_dump_json())
    assert [getattr(a, field) for a in left.arms if a.name == report.head] == [count]
    comment = render_comment(left)
    assert comment.count(once) == 1
    assert said.format(head=left.head) in comment
    with pytest.raises(ValueError):  # a count read back from a report is checked, not trusted
        Report.model_validate_json(report.model_copy(update={"arms": arms}).model_dump_json().replace(
            f'"{field}":{count}', f'"{field}":-1'))


def test_what_boxed_the_arms_code_is_the_reports_fact_and_a_missing_box_is_said_once() -> None:
    from guard.sandbox import Isolation

    report = _pair_report("h200", "kernel-1-07")  # written before the field: no key, nothing said
    assert report.isolation is None and "ran without" not in render_comment(report)
    boxed = Isolation(cgroup=True, namespaces=True, as_root=True)
    for isolation, said in [
        (boxed, None),
        (Isolation(container=True, as_root=True), None),
        (Isolation(requested="auto", namespaces=True, as_root=True),
         'ran without a cgroup of their own (build.isolation = "auto")'),
        (Isolation(requested="none", as_root=True),
         "ran without a cgroup of their own or PID, IPC and mount namespaces of their own "
         '(build.isolation = "none")'),
    ]:
        again = Report.model_validate_json(report.model_copy(update={"isolation": isolation}).model_dump_json())
        assert again.isolation == isolation  # read back as written
        comment = render_comment(again)
        if said is None:
            assert "ran without" not in comment
        else:
            assert comment.count("ran without") == 1 and said in comment, comment


def test_the_method_fold_says_a_process_figure_is_its_mean_from_the_schema_that_made_it_one() -> None:
    """A report of schema 11 or older holds medians (tok/s over windows); a later one, means."""
    report = committed(EXAMPLE)
    workload = report.workload.model_copy(update={"tok_per_s_min_s": 0.3, "tok_per_s_window_s": 0.1})
    report = report.model_copy(update={"workload": workload})
    assert report.schema_version <= 11
    older = render_comment(report)
    assert "median over windows of 100 ms or more" in older and "a stall included" not in older
    newer = render_comment(report.model_copy(update={"schema_version": 12}))
    assert ("time per step is its mean over its timed steps, a stall included, and its tokens per second is its "
            "tokens over its decode time, at least 0.3 s of it per batch size.") in newer
    assert "median over windows" not in newer
