"""Host instructions per step decided beside the times (rule 4): a rise whose whole interval is
past its threshold is a regression, even where end-to-end ms is too noisy to decide; an unchanged
commit's few instructions of noise never decide; a process without the counter leaves the
verdict as it was without instructions."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from guard.compare import compare
from guard.config import Threshold
from guard.measure import ArmMeasurement, HostUsage
from tests.rules import rule_at
from tests.test_end_to_end_verdict import GPU_MS, HOST_JITTER, gpu_arm
from tests.test_stats_properties import PROPERTIES
from tests.test_verdict import CONFIDENCE, THRESHOLD, welch_bounds

INSTRUCTIONS_PCT = 2.0
BASE_COUNT = 1.5e6  # instructions per step of a small decode's main thread
COUNT_JITTER = [1.0, 1.0004, 0.9997, 1.0002, 0.9999]  # about 0.03% from process to process
UNCOUNTED = "not permitted here (perf_event_paranoid, or a container's seccomp filter)"


def counted(arm: ArmMeasurement, counts: list[float | None]) -> ArmMeasurement:
    """`arm` with each process's instructions per step as given (None: that process had no counter)."""
    repeats = []
    for repeat, count in zip(arm.repeats, counts):
        host = HostUsage(voluntary_switches=0, involuntary_switches=0, user_s=0.1, sys_s=0.0,
                         instructions_per_step=count, instructions_unavailable=None if count else UNCOUNTED)
        runs = [run.model_copy(update={"host": host}) for run in repeat.runs]
        repeats.append(repeat.model_copy(update={"runs": runs}))
    return arm.model_copy(update={"repeats": repeats})


def decided(base: ArmMeasurement, head: ArmMeasurement, instructions: bool = True,  # type: ignore[no-untyped-def]
            version: int = 4):
    """By rule 4 unless `version` says otherwise: there end-to-end ms at a 6% host spread informs,
    and instructions are what decides a host-only rise (rule 5: tests/test_felt_verdict.py)."""
    rule = rule_at(THRESHOLD, CONFIDENCE, looks=2, version=version,
                   instructions=Threshold(pct=INSTRUCTIONS_PCT, source="configured") if instructions else None)
    (batch,) = compare({"base": base, "head": head}, "base", "head", [1], rule).batch_sizes
    return batch


def host_only(rise: float) -> tuple[ArmMeasurement, ArmMeasurement, list[float], list[float]]:
    """Base and head of one GPU time, head's host 5% slower at the host's 6% spread, its
    instructions per step `rise` times base's."""
    base_end = [GPU_MS * 1.1 * j for j in HOST_JITTER]
    head_end = [1.05 * v for v in base_end[::-1]]
    base_counts = [BASE_COUNT * j for j in COUNT_JITTER]
    head_counts = [rise * v for v in base_counts[::-1]]
    return gpu_arm("base", base_end), gpu_arm("head", head_end), base_counts, head_counts


def test_a_host_only_rise_in_instructions_is_a_regression_where_end_to_end_time_cannot_tell() -> None:
    base, head, base_counts, head_counts = host_only(1.05)
    without = decided(base, head)  # no counter anywhere: end-to-end ms too noisy to see +5%
    assert without.verdict == "pass" and without.end_to_end_verdict == "pass"
    batch = decided(counted(base, base_counts), counted(head, head_counts))
    assert batch.verdict == "regression" and batch.decided_by == "instructions"
    assert batch.instructions_verdict == "regression"
    assert batch.gpu_ms_verdict == "pass" and batch.end_to_end_verdict == "pass"
    low, high = welch_bounds(base_counts, head_counts, batch.alpha_per_look)
    assert batch.instructions_change is not None
    assert batch.instructions_change.ci_low_pct == pytest.approx(low) and low > INSTRUCTIONS_PCT
    assert batch.instructions_change.ci_high_pct == pytest.approx(high)
    assert batch.at_threshold == [] and not batch.undecided


def test_a_rise_not_told_from_the_threshold_passes_and_a_fall_decides_nothing() -> None:
    """+2% on the threshold itself: shown (its lower bound above 0) but not past 2%, so a pass,
    never held open; -30%: less host work is not a faster decode, so a pass too."""
    for rise in (1.02, 0.7):
        base, head, base_counts, head_counts = host_only(rise)
        batch = decided(counted(base, base_counts), counted(head, head_counts))
        assert batch.instructions_verdict == "pass"
        assert batch.verdict == "pass" and batch.decided_by is None
        assert batch.instructions_change is not None
        shown = batch.instructions_change.ci_low_pct > 0 if rise > 1 else batch.instructions_change.ci_high_pct < -2
        assert shown  # the change is plain either way: it is the rule that leaves it undecided


def test_a_process_without_the_counter_leaves_the_verdict_as_it_was() -> None:
    base, head, base_counts, head_counts = host_only(1.05)
    without = decided(base, head)
    batch = decided(counted(base, base_counts), counted(head, [*head_counts[:-1], None]))
    assert batch.instructions_verdict is None and batch.instructions_change is None
    assert "instructions" not in batch.caught_pct
    keys = ("verdict", "decided_by", "gpu_ms_bounds", "end_to_end_bounds", "tok_per_s_bounds", "at_threshold",
            "caught_pct", "undecided")
    assert {k: getattr(batch, k) for k in keys} == {k: getattr(without, k) for k in keys}
    arms = {a.arm: a for a in batch.arms}
    assert arms["head"].instructions_unavailable == UNCOUNTED and arms["base"].instructions_unavailable is None
    assert "instructions_verdict" not in batch.model_dump()


def test_a_rule_before_4_does_not_decide_instructions() -> None:
    base, head, base_counts, head_counts = host_only(1.5)
    rule = rule_at(THRESHOLD, CONFIDENCE, looks=2, version=3, instructions=Threshold(pct=INSTRUCTIONS_PCT))
    (batch,) = compare({"base": counted(base, base_counts), "head": counted(head, head_counts)}, "base", "head",
                       [1], rule).batch_sizes
    assert batch.verdict == "pass" and batch.instructions_verdict is None
    assert batch.instructions_change is not None  # shown, as rule 3 showed it


COUNTS = st.lists(st.floats(min_value=0.9995, max_value=1.0005), min_size=2, max_size=8)


@PROPERTIES
@given(base=COUNTS, head=COUNTS, scale=st.floats(min_value=1e3, max_value=1e9))
def test_an_unchanged_commit_is_never_decided_by_its_instruction_noise(base: list[float], head: list[float],
                                                                      scale: float) -> None:
    """Any counts of both arms within 0.1% of each other (an A/A, at some ten times the spread
    measured): the mean of head's logarithms is less than 2% past base's, so no lower bound is,
    and the instructions pass; the verdict is the one without them, whatever else was drawn."""
    assert max(base + head) / min(base + head) < 1 + INSTRUCTIONS_PCT / 100
    size = len(HOST_JITTER)
    base_end = [GPU_MS * 1.1 * j for j in HOST_JITTER]
    arms = gpu_arm("base", base_end), gpu_arm("head", base_end[::-1])
    base_counts = [scale * v for v in (base * size)[:size]]
    head_counts = [scale * v for v in (head * size)[:size]]
    batch = decided(counted(arms[0], base_counts), counted(arms[1], head_counts))
    assert batch.instructions_verdict == "pass"
    assert batch.instructions_change is not None
    assert batch.instructions_change.ci_low_pct < math.expm1(math.log(max(head) / min(base))) * 100 + 1e-9
    assert batch.verdict == decided(*arms).verdict


# -- the report: typed fields, and words made from them ------------------------------------------

def _report_with_counts(counts: dict[str, list[float | None]]):  # type: ignore[no-untyped-def]
    """The H200's reference-engine A/A pair (3 processes per arm), each process's instructions
    per step as given, decided again by rule 4 at a 2% threshold (end-to-end ms at 1%), and
    explained."""
    from pathlib import Path

    from guard.compare import decide_again
    from guard.measure import spread
    from tests.report_fixtures import committed, explained, ruled

    report = committed(Path(__file__).resolve().parents[1] / "docs/validation/h200-engines/pairs/ref-bf16-aa"
                       / "report.json")
    report = ruled(report, instructions=INSTRUCTIONS_PCT, end_to_end_ms=1.0)
    (batch,) = report.batch_sizes
    arms = []
    for arm in batch.arms:
        values = counts[arm.arm]
        full = None not in values
        arms.append(arm.model_copy(update={
            "instructions_per_step": spread(values) if full else None,  # type: ignore[arg-type]
            "instructions_unavailable": None if full else UNCOUNTED}))
    again = decide_again(batch.model_copy(update={"arms": arms}), report.base, report.head, report.rule)
    return explained(report.model_copy(update={"batch_sizes": [again], "verdict": again.verdict})), batch


def test_the_comment_names_host_work_where_instructions_decided() -> None:
    from guard.report import render_comment, title

    base = [1.20e6, 1.2004e6, 1.1997e6]
    report, stored = _report_with_counts({"base": base, "head": [1.05 * v for v in base]})
    (batch,) = report.batch_sizes
    assert stored.verdict == "pass" and batch.verdict == "regression" and batch.decided_by == "instructions"
    change = batch.instructions_change
    assert change is not None and change.pct == pytest.approx(5.0)
    assert report.explanation.headline.metric == "instructions"
    assert title(report).startswith("Decode host work up 5.0% at batch size 1 (instructions) with ")
    comment = render_comment(report)
    assert (f"At batch size 1, host instructions per step rose {change.pct:.2f}%, its whole interval past the 2% "
            "threshold; end-to-end ms per step changed") in comment
    felt = batch.end_to_end_bounds
    assert felt is not None and felt.ci_high_pct > 1.0  # it could not tell +1% from none: so the sentence says
    assert (f"end-to-end ms per step changed {felt.pct:+.2f}% (too noisy to say): the host does more work per step, "
            "felt where the host bounds the step.") in comment
    assert "| host instructions per step | 1.20 M | 1.26 M | +5.00% (" in comment
    caught = batch.caught_pct["instructions"]
    assert caught > 2.0  # the threshold and then some: a rise must be wholly past it
    assert f"end to end; {caught:.2g}% in host instructions" in comment
    assert comment.split("| host instructions per step |")[1].split("\n")[0].endswith("| if up past 2% |")


def test_the_comment_says_instructions_decided_nothing_where_a_process_had_no_counter() -> None:
    from guard.report import render_comment

    base = [1.20e6, 1.2004e6, 1.1997e6]
    report, stored = _report_with_counts({"base": base, "head": [1.05 * base[0], 1.05 * base[1], None]})
    (batch,) = report.batch_sizes
    assert batch.verdict == stored.verdict == "pass" and batch.instructions_verdict is None
    comment = render_comment(report)
    assert ("Host instructions per step decided nothing: not every process counted them (head: not permitted "
            "here (perf\\_event\\_paranoid, or a container's seccomp filter)).") in comment  # as Markdown escapes it
    assert "| host instructions" not in comment
    counted_everywhere, _ = _report_with_counts({"base": base, "head": base[::-1]})
    assert "decided nothing" not in render_comment(counted_everywhere)

    # a machine without the counter: said once, in the Method fold, not above it on every run
    from guard.report.fold import above_the_fold

    uncounted, _ = _report_with_counts({"base": [None, None, None], "head": [None, None, None]})
    comment = render_comment(uncounted)
    method = comment.split("<summary>Method</summary>")[1]
    assert "Host instructions per step decided nothing: not every process counted them (base: " in method
    assert "decided nothing" not in above_the_fold(comment)


def test_a_run_whose_head_does_more_host_work_fails_and_its_report_holds_up(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The whole pipeline, its processes answered by the stand-in: the same step times, head's
    instructions per step 10% above base's; the report states rule 4's threshold (kept by rule 5)
    and is decided again to the same verdict when read back."""
    from guard.report import SCHEMA_VERSION, read_report
    from tests.conftest import commit_all
    from tests.standin import StandIn, run_in_process
    from tests.test_pipeline import make_repo

    repo = make_repo(tmp_path)
    (repo / "note.txt").write_text("more host work per step\n")
    commit_all(repo, "more host work per step")
    standin = StandIn(instructions=lambda p, _bs: BASE_COUNT * (1.1 if p.arm == "head" else 1.0)
                      * COUNT_JITTER[p.number % len(COUNT_JITTER)])
    run = run_in_process(repo, tmp_path / "out", standin)
    report = run.report
    assert report.verdict == "regression" and run.exit_code == 1
    assert report.rule.pct("instructions") == INSTRUCTIONS_PCT and report.rule.decides_instructions
    assert {b.decided_by for b in report.batch_sizes} == {"instructions"}
    assert all(b.gpu_ms_verdict == "pass" for b in report.batch_sizes)
    assert report.rule.instructions is not None and report.rule.instructions.source == "configured"
    again = read_report(tmp_path / "out" / "report.json")  # refused where it would not hold up
    assert again.verdict == "regression" and again.schema_version == SCHEMA_VERSION
    assert "Decode host work up 10.0% at batch size" in run.comment
