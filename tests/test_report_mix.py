"""The mix in the comment and the report: the "Capture coverage and useful work" section with
its table base -> head and the cause sentence made from the attribution's fields, one line
above the fold only when the mix is the cause, the run's record in its fold, a report with both
read back, checked and rendered again byte for byte."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from guard.measure import ArmMeasurement, MixRun, RepeatResult
from guard.report import (
    BatchShare, CapturePolicy, Report, RunRecord, UnfoundedReport, build_view, check_report, read_report,
    render_comment, run_record, share, write_report,
)
from tests.report_fixtures import committed, current_file, explained, remeasured, with_mix
from guard.report.fold import above_the_fold, words
from tests.test_comment_shape import WORDS_ABOVE_THE_FOLD
from tests.test_explain_mix import FALLBACK, NO_FALLBACK, SHARES, _arm, _mix

REPO_ROOT = Path(__file__).resolve().parents[1]
RICH = current_file(REPO_ROOT / "docs" / "examples" / "h200-demo-b31932f" / "report.json")
WIN = {1: ("graph", 1, 1.0), 2: ("graph", 2, 1.5), 3: ("eager", 3, 3.0), 6: ("eager", 6, 4.6)}


def _with_mix(base: dict, head: dict, record: RunRecord | None = None,  # type: ignore[type-arg]
              fixed: float | None = None) -> Report:
    """RICH with a mix of `base` and `head`'s sizes; `fixed`: its batch sizes remeasured with
    head at base's times this factor first."""
    report = committed(RICH) if fixed is None else remeasured(committed(RICH), fixed)
    mix = _mix(_arm(report.base, base), _arm(report.head, head))
    return with_mix(report.model_copy(update={"record": record}), mix)


def _record(report: Report, model: str = "reference") -> RunRecord:
    return RunRecord(model=model, precision="bfloat16",
                     batch_distribution=[BatchShare(batch_size=s, share=v) for s, v in SHARES.items()],
                     capture=[CapturePolicy(arm=report.base, mode="step", captured_sizes=[1, 2, 4, 8], fallback=True),
                              CapturePolicy(arm=report.head, mode="step", captured_sizes=[1, 2, 4, 8],
                                            fallback=False, moe_dispatch="auto")])


def _fold(comment: str, summary: str) -> str:
    start = comment.index(f"<details><summary>{summary}</summary>")
    return comment[start: comment.index("</details>", start)]


def test_padding_is_named_above_the_fold_with_its_share_and_the_table_is_in_its_fold() -> None:
    # the note's case: the captured sizes as fast as before, the mix slower
    report = _with_mix(FALLBACK, NO_FALLBACK, fixed=1.0)
    found = report.explanation.mix
    assert found is not None and found.cause == "padding"
    comment = render_comment(report)
    above = above_the_fold(comment)
    said = f"padding (rows computed that no request asked for) carries {share(found.part('padding').share)}"
    decided = report.mix_comparison
    assert decided is not None and decided.verdict == "regression" and report.verdict == "regression"
    assert decided.gpu_ms_bounds is not None
    assert (f"Over the batch-size mix, GPU ms per step rose {decided.gpu_ms_bounds.pct:.2f}%, its whole interval past "
            f"the 1% threshold; padding carries {share(found.part('padding').share)} of the growth.") in above
    assert "| GPU ms per step | mix |" in above  # decided like a batch size: a row of the table
    assert words(above) <= WORDS_ABOVE_THE_FOLD
    assert above.count("\n|---") == 1  # the mix's table stays in its fold
    fold = _fold(comment, "Capture coverage and useful work")
    base, head = (_arm(report.base, FALLBACK), _arm(report.head, NO_FALLBACK))
    assert f"| capture coverage (steps replayed from a graph) | {share(base.capture_coverage)} | " \
           f"{share(head.capture_coverage)} |" in fold
    assert f"| useful-work coverage (real rows of those computed) | 100% | {share(head.useful_work_coverage)} |" in fold
    assert f"| padding waste | 0% | {share(head.padding_waste)} |" in fold
    assert f"| GPU ms per real token | {base.gpu_ms_per_real_token:.3f} | {head.gpu_ms_per_real_token:.3f} |" in fold
    assert "| 3 | 15% | eager -> graph | 3 -> 4 |" in fold and said in fold
    assert build_view(report).folds[0].summary == "Capture coverage and useful work"


def test_a_win_is_not_blamed_in_the_comment() -> None:
    report = _with_mix(WIN, NO_FALLBACK)
    assert report.explanation.mix is not None and report.explanation.mix.cause is None
    assert report.mix_comparison is not None and report.mix_comparison.verdict == "improvement"
    comment = render_comment(report)
    above = above_the_fold(comment)
    # an improvement is said in what the user feels where that decided it too
    assert report.mix_comparison.decided_by == "tok_per_s"
    assert "Over the batch-size mix, tokens per second changed +" in above and "faster than the 1% threshold." in above
    assert "carries" not in above  # a win: no part of it is blamed
    fold = _fold(comment, "Capture coverage and useful work")
    assert "not slower past the threshold, so no cause is named" in fold and "carries" not in fold


def test_mixed_evidence_lists_the_candidates_instead_of_one_cause() -> None:
    report = _with_mix(FALLBACK, NO_FALLBACK)
    # the profiled sizes 1 and 2 as if their extra time were idle time between kernels
    traces = []
    for section in report.traces:
        diff = section.diff
        assert diff is not None
        idle = diff.idle_ms_per_step.model_copy(update={"delta": 0.5})
        busy = diff.busy_ms_per_step.model_copy(update={"delta": 0.01})
        traces.append(section.model_copy(update={"diff": diff.model_copy(
            update={"idle_ms_per_step": idle, "busy_ms_per_step": busy})}))
    report = explained(report.model_copy(update={"traces": traces}))
    found = report.explanation.mix
    assert found is not None and found.cause == "mixed_evidence"
    above = above_the_fold(render_comment(report))
    assert "the evidence is mixed: padding or graph replay against eager." in above
    assert "carries" not in above.split("batch-size mix")[1]
    fold = _fold(render_comment(report), "Capture coverage and useful work")
    assert "the candidates are padding and graph replay against eager" in fold


def test_the_record_is_in_its_fold_and_describe_strings_stay_text() -> None:
    report = committed(RICH)
    report = _with_mix(FALLBACK, NO_FALLBACK, _record(report, model="[x](https://example.com) @someone"))
    fold = _fold(render_comment(report), "Record of the run")
    base, head = report.arm(report.base), report.arm(report.head)
    assert f"runtime revision: base `{base.sha[:8]}`, head `{head.sha[:8]}`; torch {report.environment.torch}" in fold
    assert f"GPU and driver: {report.environment.gpu}, driver {report.environment.driver}" in fold
    assert "batch distribution (batch\\_mix, seed 0): 1: 40%, 2: 25%, 3: 15%, 6: 20%" in fold
    assert "capture policy, base: mode step; captured sizes 1, 2, 4, 8; other sizes eagerly at their own shape" in fold
    assert "capture policy, head: mode step; captured sizes 1, 2, 4, 8; other sizes padded up" in fold
    assert "](" not in fold.replace("\\](", "") and "@someone" not in fold  # no link, no mention


def test_the_record_is_made_from_each_arms_describe_and_bad_values_are_left_out() -> None:
    def measured(arm: str, described: dict) -> ArmMeasurement:  # type: ignore[type-arg]
        mix = MixRun(max_batch_size=6, steps=4, warmup_steps=1, timer="perf_counter", setup_s=0.1, tok_per_s=1.0,
                     step_ms=[1.0] * 4, tokens=[[0] * 6], workload=described)
        return ArmMeasurement(arm=arm, repeats=[RepeatResult(arm=arm, repeat=0, environment={}, runs=[], mix=mix)])

    base = {"engine": "reference", "dtype": "bfloat16", "capture_mode": "step", "captured_sizes": [2, 1],
            "fallback": True, "moe_dispatch": "auto"}
    head = base | {"fallback": False, "captured_sizes": ["1", 2], "moe_dispatch": {"no": 1}, "dtype": "x" * 500}
    report = committed(RICH)
    mix = _mix(_arm("base", FALLBACK), _arm("head", NO_FALLBACK))
    record = run_record({"base": measured("base", base), "head": measured("head", head)}, ["base", "head"], mix)
    assert record.model == "reference" and record.precision == "x" * 200  # the head's, cut short
    assert [(p.arm, p.fallback, p.captured_sizes, p.moe_dispatch) for p in record.capture] == [
        ("base", True, [1, 2], "auto"), ("head", False, None, None)]
    assert [(b.batch_size, b.share) for b in record.batch_distribution] == list(SHARES.items())
    assert report.record is None  # a report made before the record has none, and renders without its fold


def test_a_report_with_its_mix_reads_back_checked_and_renders_again_byte_for_byte(tmp_path: Path) -> None:
    report = committed(RICH)
    report = _with_mix(FALLBACK, NO_FALLBACK, _record(report))
    write_report(report, tmp_path)
    again = read_report(tmp_path / "report.json")
    check_report(again, tmp_path / "report.json")
    assert render_comment(again) == render_comment(report)
    assert again.explanation.mix == report.explanation.mix
    # a stated cause the figures do not give is refused
    assert again.explanation.mix is not None
    forged = again.model_copy(update={"explanation": again.explanation.model_copy(update={
        "mix": again.explanation.mix.model_copy(update={"cause": "kernel_time"})})})
    with pytest.raises(UnfoundedReport, match=re.escape("explanation.mix")):
        check_report(forged, tmp_path / "report.json")


def test_an_invalid_comparison_states_no_mix_causeabove_the_fold() -> None:
    from guard.compare import Reason

    report = _with_mix(FALLBACK, NO_FALLBACK)
    reasons = [Reason(kind="arm_failed", arm=report.head, repeats_done=2, error="exit 1")]
    invalid = explained(report.model_copy(update={"verdict": "invalid", "reasons": reasons}))
    assert invalid.explanation.mix is not None and invalid.explanation.mix.cause == "padding"  # a fact still
    assert "batch-size mix" not in above_the_fold(render_comment(invalid))
    assert "batch-size mix" in above_the_fold(render_comment(report))


def test_the_mixs_own_profiled_pass_is_its_trace_evidence() -> None:
    from guard.trace import MixTraceSection
    from tests.test_explain_mix import _trace

    report = _with_mix(FALLBACK, NO_FALLBACK)
    assert report.explanation.mix is not None and report.explanation.mix.trace is not None
    assert report.explanation.mix.trace.source == "batch_sizes"  # the profiled fixed sizes, without the mix's
    profiled = explained(report.model_copy(update={"mix_traces": MixTraceSection(
        profile_steps=64, arms=[], diff=_trace(idle_ms=0.5, busy_ms=0.01))}))
    found = profiled.explanation.mix
    assert found is not None and found.trace is not None and found.trace.source == "mix"
    assert found.trace.idle_ms == 0.5 and found.cause == "mixed_evidence"
    assert "the mix's own profiled pass" in _fold(render_comment(profiled), "Capture coverage and useful work")
