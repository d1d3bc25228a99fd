"""The report's trace part and the comment's trace paragraph, from real H200 traces."""

from __future__ import annotations

import gzip
import json
import shutil
import statistics
from pathlib import Path

from guard.report import Report, render_comment
from guard.trace import trace_sections

REPO_ROOT = Path(__file__).resolve().parents[1]
FIXTURES = REPO_ROOT / "tests" / "fixtures" / "traces"
EXAMPLE = REPO_ROOT / "docs" / "examples" / "h200-demo" / "report.json"
AA_PAIR = REPO_ROOT / "docs" / "validation" / "h200-30l" / "pairs" / "aa-01" / "report.json.gz"


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
    report = Report.model_validate_json(EXAMPLE.read_text())
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
    assert "Profiler over 16 decode steps at batch size 1" in comment
    assert "Kernel counts and API calls are identical." in comment
    assert "`runs/traces/base-0-bs1.trace.json.gz`" in comment
    # batch size 2 regressed too but has no trace section: no paragraph for it
    assert "at batch size 2, in a separate pass" not in comment


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
    report = Report.model_validate_json(EXAMPLE.read_text()).model_copy(update={"traces": sections})
    comment = render_comment(report)
    before, after = _kernels_per_step(base_trace, 8), _kernels_per_step(head_trace, 8)
    assert after == before  # an eager kernel stands where a graph's kernel stood
    assert f"Kernels per step: {after:.0f} in both, but" in comment
    assert "`cudaGraphLaunch` 1 -> 4" in comment
    assert "Idle time between kernels:" in comment


def test_steady_median_gap_points_at_the_tail() -> None:
    """The H200 demo at batch size 2: same kernels, same median gap, more idle time."""
    report = Report.model_validate_json(EXAMPLE.read_text())
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
    assert (f"The kernels themselves are slower: `softmax_warp_forward` (1 per step, now as another variant: "
            f"{before:.2f} -> {after:.2f} us)") in comment
    assert "of gaps carry" not in comment


def _pair_report(folder: str, pair: str) -> Report:
    path = REPO_ROOT / "docs" / "validation" / folder / "pairs" / pair / "report.json.gz"
    return Report.model_validate_json(gzip.decompress(path.read_bytes()))


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
    from benchmarks.validation._models import PairRecord
    from benchmarks.validation._summary import compare_pair

    lines = (REPO_ROOT / "docs" / "validation" / "h200-30l" / "pairs.jsonl").read_text().splitlines()
    record = next(r for r in map(PairRecord.model_validate_json, lines) if r.pair_id == "kernel-0.5-01")
    assert record.rounds == 2
    (batch,) = compare_pair(record, 2, record.threshold_pct, record.tok_threshold_pct, looks=2).batches
    report = _pair_report("h200-30l", "kernel-0.5-01")
    return report.model_copy(update={"batch_sizes": [batch], "reasons": [], "verdict": batch.verdict,
                                     "schema_version": 2, "looks": 2, "rounds": 2})


def test_a_real_slowdown_at_the_threshold_is_said_to_be_at_threshold() -> None:
    """GPU time rose +0.49% (p = 2e-13) and its interval holds the 0.5% threshold: the comment
    says at threshold, with the change, its interval and the processes it would take; not
    noise, and never a pass."""
    report = _kernel_pair_at_threshold()
    (batch,) = report.batch_sizes
    bounds = batch.gpu_ms_bounds
    assert batch.verdict == "at_threshold" and batch.decided_by == "gpu_ms" and bounds is not None
    assert 0 < bounds.ci_low_pct < report.threshold_pct < bounds.ci_high_pct  # the H200's figures
    comment = render_comment(report)
    assert comment.splitlines()[1].endswith(
        f"at threshold at batch size 1, {bounds.pct:+.2f}% GPU time per step against 0.5%**")
    level = f"{(1 - 2 * 0.01 / (2 * 2 * 1)) * 100:.4g}%"  # alpha 0.01 over 2 looks x 2 metrics x 1 batch size
    assert level == "99.5%"
    assert (f"shows a slowdown at about the threshold, too close to it to call after its confirmation round: at batch "
            f"size 1, GPU ms per decode step {bounds.pct:+.2f}% ({level} interval {bounds.interval()}); telling it "
            f"from the 0.5% threshold at this spread takes more than 200 processes per arm (this run: 8).") in comment
    assert f"| change, at threshold (GPU ms) | 1 | {batch.gpu_ms_change.pct:+.2f}% ({bounds.interval()})" in comment
    assert "4 fresh processes per arm, and 4 more in a confirmation round for batch size 1" in comment
    assert "each bound is wrong at most 0.25% of the time" in comment
    assert "too noisy" not in comment and "No decode slowdown" not in comment and "| change, pass" not in comment
    # where the time went, as for a regression: two kernels swapped variant
    assert "2 kernel(s) run as another variant of the same function" in comment
    assert "The kernels themselves are slower: `softmax_warp_forward`" in comment


def test_an_undecided_report_says_at_threshold_in_the_status_and_summary() -> None:
    from guard.cli import VERDICT_EXIT
    from guard.publish import annotations, headline
    from guard.publish._status import status_state

    report = _kernel_pair_at_threshold()
    change = report.batch_sizes[0].gpu_ms_change
    assert change is not None
    assert headline(report).startswith(f"at threshold: batch size 1 GPU ms/step {change.pct:+.2f}%")
    assert status_state(report.verdict) == "success" and VERDICT_EXIT[report.verdict] == 0  # not a regression
    (line,) = annotations(report)
    assert line.startswith("::warning title=Decode slowdown at the threshold::")


def test_a_noisy_report_says_how_noisy_and_what_it_would_take() -> None:
    """The same pair with head's repeats scattered by 3%: no change and the threshold both fit."""
    from tests.report_fixtures import remeasured

    report = remeasured(_pair_report("h200-30l", "kernel-0.5-01"), 1.0, jitter=0.03, looks=2)
    (batch,) = report.batch_sizes
    assert batch.verdict == "inconclusive" and batch.gpu_ms_bounds is not None
    assert batch.gpu_ms_bounds.ci_low_pct < 0 < report.threshold_pct < batch.gpu_ms_bounds.ci_high_pct
    head = next(a for a in batch.arms if a.arm == report.head)
    assert head.gpu_ms_per_step.spread_pct > 5  # 3% either way of base's own times, over base's 0.1%
    comment = render_comment(report)
    assert comment.splitlines()[1].endswith("inconclusive at batch size 1, GPU time per step too noisy to decide**")
    assert "was too noisy to tell a slowdown of the threshold from none in one round" in comment
    assert f"{head.gpu_ms_per_step.spread_pct:.2f}% (head)" in comment
    needed = batch.repeats_to_decide
    count = "more than 200" if needed is None else f"about {needed}"
    assert f"takes {count} processes per arm (this run: {head.repeats})" in comment
    assert "| change, inconclusive (GPU ms) |" in comment


def test_a_pass_names_a_significant_rise_under_the_threshold_and_an_a_a_pair_does_not() -> None:
    """H200 pairs kernel-0.5-03 (+0.45% against 0.5%, p = 1.4e-12) and aa-01 (+0.02%)."""
    under = render_comment(_pair_report("h200-30l", "kernel-0.5-03"))
    assert under.splitlines()[1].endswith(
        "; +0.45% GPU time per step at batch size 1 is significant but under it**")
    assert ("GPU ms per decode step did rise at batch size 1: +0.45% (95% interval +0.41% to +0.49%, "
            "p = 1.4e-12), under the 0.5% threshold.") in under
    plain = render_comment(_pair_report("h200-30l", "aa-01"))
    assert plain.splitlines()[1].endswith("(threshold 0.5% per step)**") and "did rise" not in plain


def _one_batch(report: Report, **update: object) -> Report:
    batch = report.batch_sizes[0].model_copy(update=update)
    return report.model_copy(update={"batch_sizes": [batch], "verdict": batch.verdict, "traces": []})


def test_title_and_sentence_name_the_metric_that_decided() -> None:
    report = Report.model_validate_json(EXAMPLE.read_text())
    change = report.batch_sizes[0].gpu_ms_change
    tok = report.batch_sizes[0].tok_per_s_change
    assert change is not None and tok is not None
    steady = change.model_copy(update={"pct": 0.02, "ci_low_pct": -0.03, "ci_high_pct": 0.07, "p_value": 0.4})
    host = tok.model_copy(update={"pct": -5.0, "ci_low_pct": -6.0, "ci_high_pct": -4.0, "p_value": 1e-4})
    by_tok = _one_batch(report, gpu_ms_change=steady, tok_per_s_change=host, verdict="regression",
                        gpu_ms_verdict="pass", tok_per_s_verdict="regression")
    title = render_comment(by_tok).splitlines()[1]
    assert title.endswith("makes decode slower: -5.0% tok/s at batch size 1 (host time)**")
    noisy_tok = tok.model_copy(update={"pct": -1.0, "ci_low_pct": -4.0, "ci_high_pct": 2.0, "p_value": 0.5})
    noisy = _one_batch(report, gpu_ms_change=steady, tok_per_s_change=noisy_tok, verdict="inconclusive",
                       gpu_ms_verdict="pass", tok_per_s_verdict="inconclusive")
    comment = render_comment(noisy)
    assert comment.splitlines()[1].endswith("inconclusive at batch size 1, tok/s too noisy to decide**")
    threshold = noisy.tok_threshold_pct or noisy.threshold_pct
    assert (f"was too noisy to tell a {threshold:g}% slowdown in tok/s from none; a {noisy.threshold_pct:g}% "
            "slowdown in GPU ms per decode step is ruled out.") in comment
    # an older report without per-metric verdicts keeps the step time in its title
    old = _one_batch(report, verdict="regression", gpu_ms_verdict=None, tok_per_s_verdict=None)
    assert f"{change.pct:+.1f}% GPU time per step at batch size 1" in render_comment(old).splitlines()[1]


def test_environment_names_the_gpu_state_and_warnings() -> None:
    report = Report.model_validate_json(EXAMPLE.read_text())
    state = {"available": True, "power_limit_w": 700.0, "max_sm_clock_mhz": 1980, "persistence_mode": True}
    report = report.model_copy(
        update={
            "environment": report.environment.model_copy(update={"gpu_state": state}),
            "warnings": ["arm 'head' repeat 2: clocks held down by sw_thermal_slowdown at the end"],
        }
    )
    comment = render_comment(report)
    environment = comment[comment.index("### Environment"):]
    assert "power limit 700 W; max SM clock 1980 MHz; persistence mode on" in environment
    # a warning is the report's text, escaped for Markdown: the underscores show as they are
    assert "- arm 'head' repeat 2: clocks held down by sw\\_thermal\\_slowdown at the end" in environment


def test_title_tags_a_batch_size_with_its_dominant_cause() -> None:
    """H200 demo with an ablation arm: at batch size 2 idle time is most of the change."""
    path = REPO_ROOT / "docs" / "examples" / "h200-demo-ablation" / "report.json"
    report = Report.model_validate_json(path.read_text())
    diff = next(s for s in report.traces if s.batch_size == 2).diff
    assert diff is not None
    idle = diff.idle_ms_per_step.delta or 0.0
    total = idle + max(diff.busy_ms_per_step_from_counts, 0) + max(diff.busy_ms_per_step_from_durations, 0)
    assert idle / total >= 0.6  # computed here from the diff, not by the code under test
    title = render_comment(report).splitlines()[1]
    assert "at batch size 2 (idle time between kernels)" in title
    assert "changes CUDA graph capture" in title


def test_a_launch_only_slowdown_is_named_where_the_verdict_does_not_see_it() -> None:
    """End-to-end CUDA-event times slower, held GPU times not: the comment says so."""
    from guard.measure import relative_change

    report = Report.model_validate_json(EXAMPLE.read_text())
    base_ms, steady_ms = [1.630, 1.631, 1.629, 1.630], [1.630, 1.630, 1.631, 1.629]
    launch_ms = [1.650, 1.652, 1.651, 1.649]
    quiet = report.batch_sizes[0].model_copy(update={
        "verdict": "pass", "gpu_ms_change": relative_change(base_ms, steady_ms),
        "end_to_end_gpu_ms_change": relative_change(base_ms, launch_ms),
    })
    noted = report.model_copy(update={"verdict": "pass", "batch_sizes": [quiet], "threshold_pct": 1.0})
    comment = render_comment(noted)
    assert f"At batch size {quiet.batch_size}, timed as the decode loop runs it" in comment
    expected = (statistics.geometric_mean(launch_ms) / statistics.geometric_mean(base_ms) - 1) * 100
    assert f"changed {expected:+.2f}%" in comment and "which only tok/s weighs in the verdict" in comment

    same = quiet.model_copy(update={"end_to_end_gpu_ms_change": relative_change(base_ms, steady_ms)})
    assert "timed as the decode loop runs it" not in render_comment(noted.model_copy(update={"batch_sizes": [same]}))


def test_a_pass_says_what_it_rules_out_for_each_metric() -> None:
    """An A/A pair from the H200: the intervals stay under each metric's own threshold."""
    report = Report.model_validate_json(gzip.decompress(AA_PAIR.read_bytes()))
    assert report.verdict == "pass" and report.tok_threshold_pct != report.threshold_pct
    batch = report.batch_sizes[0]
    assert batch.gpu_ms_change.ci_high_pct < report.threshold_pct
    assert -batch.tok_per_s_change.ci_low_pct < report.tok_threshold_pct
    comment = render_comment(report)
    assert (f"slows decode by less than {report.threshold_pct:g}% in GPU ms per decode step and by less than "
            f"{report.tok_threshold_pct:g}% in tok/s at every batch size measured") in comment
    assert (f"at least {report.threshold_pct:g}% in GPU ms per decode step or {report.tok_threshold_pct:g}% in tok/s"
            in comment)


def test_a_pass_whose_tok_per_s_only_informs_claims_nothing_of_tok_per_s() -> None:
    """tok/s too noisy to detect its threshold: the pass rules out a slowdown in step time
    alone, and one sentence says what tok/s could detect and the repeats it would take."""
    report = Report.model_validate_json(gzip.decompress(AA_PAIR.read_bytes()))
    informs = _one_batch(report, tok_per_s_gates=False, tok_per_s_detectable_pct=23.4, tok_per_s_repeats_to_gate=None)
    comment = render_comment(informs)
    assert (f"slows decode by less than {report.threshold_pct:g}% in GPU ms per decode step at every batch size "
            "measured: the 95% intervals stay under it.") in comment
    assert "% in tok/s at every batch size" not in comment
    repeats = informs.batch_sizes[0].arms[0].repeats
    assert (f"at its spread, {repeats} processes per arm detect only a change of 23.4% at batch size 1, not its "
            f"{report.tok_threshold_pct:g}% threshold; it would take more than 200 per arm") in comment
    gated = _one_batch(report, tok_per_s_gates=False, tok_per_s_detectable_pct=1.8, tok_per_s_repeats_to_gate=41)
    assert "it would take about 41 per arm for tok/s to decide" in render_comment(gated)
    assert "tok/s informs here" not in render_comment(report)  # an older report: tok/s gated


def test_a_kernel_swapped_for_another_variant_is_a_slower_kernel_on_h200_figures() -> None:
    """Pair kernel-1-01 ran before the trace diff folded variants: no cause dominated. Its
    report keeps both arms' kernel tables, so the diff can be made again from them."""
    from guard.report._attribution import cause_tag
    from guard.trace import diff

    path = REPO_ROOT / "docs" / "validation" / "h200" / "pairs" / "kernel-1-01" / "report.json.gz"
    report = Report.model_validate_json(gzip.decompress(path.read_bytes()))
    section, batch = report.traces[0], report.batch_sizes[0]
    assert section.diff is not None and cause_tag(batch, section) is None  # as it ran
    recorded = {k.name for k in section.diff.kernels_added + section.diff.kernels_removed}
    base, head = (a.figures for a in section.arms)
    assert base is not None and head is not None
    again = diff(base, head)
    assert again.kernels_added == again.kernels_removed == []
    families = {k.name for k in again.kernels_replaced}
    assert families == {"softmax_warp_forward", "internal::gemvx::kernel"}
    assert all(any(family in name for name in recorded) for family in families)
    assert again.busy_ms_per_step_from_durations > 10 * abs(again.busy_ms_per_step_from_counts)
    assert cause_tag(batch, section.model_copy(update={"diff": again})) == "slower kernels"


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
        raw = path.read_bytes()
        report = Report.model_validate_json(gzip.decompress(raw) if path.suffix == ".gz" else raw)
        lines = render_comment(report).splitlines()
        for above, line in zip(lines, lines[1:]):
            table_starts = line.startswith("|") and not above.startswith("|")
            if (table_starts or line.startswith(("Profiler over", "### ", "<details>"))) and above.strip():
                joined.append(f"{path.relative_to(REPO_ROOT)}: {line[:40]!r} under {above[-40:]!r}")
    assert joined == []
