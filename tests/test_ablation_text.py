"""The comment's ablation lines: what each ablation arm undoes, on the H200 demo's figures."""

from __future__ import annotations

import statistics
from pathlib import Path

import numpy as np

from guard.measure import Spread
from guard.report import Report, render_comment
from guard.report._cause_text import ablation_lines
from guard.report.fold import above_the_fold
from tests.report_fixtures import committed, explained, remeasured

REPO_ROOT = Path(__file__).resolve().parents[1]
DEMO = REPO_ROOT / "docs" / "examples" / "h200-demo-b31932f" / "report.json"


def _demo() -> Report:
    return committed(DEMO)


def _values(report: Report, batch_size: int, arm: str) -> list[float]:
    batch = next(b for b in report.batch_sizes if b.batch_size == batch_size)
    return next(a for a in batch.arms if a.arm == arm).gpu_ms_per_step.values


def _pct(after: list[float], before: list[float]) -> float:
    return (statistics.geometric_mean(after) / statistics.geometric_mean(before) - 1) * 100


def test_the_share_each_batch_size_takes_back_is_the_ablations_distance_from_the_head() -> None:
    report = _demo()
    [line] = ablation_lines(report)
    assert line.startswith("`head-unpadded` (the head build with `REFENGINE_CAPTURE_BATCH_SIZES=1,2`): ")
    for batch_size in (1, 2):
        base, head, unpadded = (_values(report, batch_size, a) for a in ("base", "head", "head-unpadded"))
        head_pct, unpadded_pct = _pct(head, base), _pct(unpadded, base)
        share = (head_pct - unpadded_pct) / head_pct
        assert (f"at batch size {batch_size}, {unpadded_pct:+.2f}% against base (") in line
        assert f"taking back {share:.0%} of the head's {head_pct:+.2f}%" in line
    # padding 1 -> 4 is nearly all of batch size 1's regression, about half of batch size 2's
    assert "taking back 96% of" in line and "taking back 52% of" in line
    comment = render_comment(report)
    assert f"- {line}" in comment
    # the arms' figures are detail: in their own fold, under the answer
    assert comment.index("<summary>Ablation arms") < comment.index(line) < comment.index("<summary>Every arm")


def _with_unpadded(report: Report, batch_size: int, scale: float) -> Report:
    """The ablation arm's repeats at `scale` times base's, at one batch size."""
    batches = []
    for batch in report.batch_sizes:
        if batch.batch_size == batch_size:
            base = next(a for a in batch.arms if a.arm == "base").gpu_ms_per_step.values
            values = [v * scale for v in base]
            spread = Spread(median=statistics.median(values), min=min(values), max=max(values), values=values)
            arms = [
                a.model_copy(update={"gpu_ms_per_step": spread}) if a.arm == "head-unpadded" else a
                for a in batch.arms
            ]
            batch = batch.model_copy(update={"arms": arms})
        batches.append(batch)
    return explained(report.model_copy(update={"batch_sizes": batches}))


def test_all_or_none_of_the_slowdown_is_said_in_words() -> None:
    report = _demo()
    faster = ablation_lines(_with_unpadded(report, 1, 0.99))[0]
    assert "at batch size 1, -1.00% against base" in faster and "taking back all of the head's +36.99%" in faster
    as_slow = ablation_lines(_with_unpadded(report, 1, 1.40))[0]
    assert "taking back none of the head's +36.99%" in as_slow
    assert "taking back 52% of" in as_slow  # batch size 2 is untouched


def test_a_batch_size_that_did_not_regress_gets_the_change_alone_and_a_failed_arm_no_line() -> None:
    report = _demo()
    batches = [b.model_copy(update={"verdict": "pass"}) if b.batch_size == 2 else b for b in report.batch_sizes]
    [line] = ablation_lines(explained(report.model_copy(update={"batch_sizes": batches})))
    second = line[line.index("at batch size 2"):]
    assert "against base" in second and "taking back" not in second
    arms = [a.model_copy(update={"status": "run_failed"}) if a.source else a for a in report.arms]
    failed = explained(report.model_copy(update={"arms": arms}))
    assert ablation_lines(failed) == []
    assert "Ablation arms" not in render_comment(failed)


def test_one_repeat_gives_the_medians_ratio_without_an_interval() -> None:
    report = _demo()
    batches = []
    for batch in report.batch_sizes:
        arms = []
        for a in batch.arms:
            one = a.gpu_ms_per_step.values[:1]
            spread = Spread(median=one[0], min=one[0], max=one[0], values=one)
            arms.append(a.model_copy(update={"gpu_ms_per_step": spread}))
        batches.append(batch.model_copy(update={"arms": arms}))
    [line] = ablation_lines(explained(report.model_copy(update={"batch_sizes": batches})))
    base, unpadded = _values(report, 1, "base")[0], _values(report, 1, "head-unpadded")[0]
    clause = f"at batch size 1, {(unpadded / base - 1) * 100:+.2f}% against base"
    assert clause in line and not line[line.index(clause) + len(clause):].startswith(" (")


def test_an_arm_from_the_base_build_reproduces_a_share_of_the_slowdown() -> None:
    report = _demo()
    arms = [a.model_copy(update={"source": "base"}) if a.source else a for a in report.arms]
    [line] = ablation_lines(explained(report.model_copy(update={"arms": arms})))
    assert line.startswith("`head-unpadded` (the base build with ")
    for batch_size in (1, 2):
        base, head, unpadded = (_values(report, batch_size, a) for a in ("base", "head", "head-unpadded"))
        head_pct, unpadded_pct = _pct(head, base), _pct(unpadded, base)
        assert f"reproducing {unpadded_pct / head_pct:.0%} of the head's {head_pct:+.2f}%" in line
    assert "taking back" not in line


def test_the_heading_names_the_step_time_as_it_was_timed() -> None:
    report = _demo()
    assert "<summary>Ablation arms: GPU ms per step against base</summary>" in render_comment(report)
    batches = [
        b.model_copy(update={"arms": [a.model_copy(update={"timer": "perf_counter"}) for a in b.arms]})
        for b in report.batch_sizes
    ]
    on_cpu = render_comment(report.model_copy(update={"batch_sizes": batches}))
    assert "<summary>Ablation arms: CPU ms per step against base</summary>" in on_cpu
    assert "GPU ms" not in on_cpu and "GPU time" not in on_cpu  # a CPU run never names its times GPU


def _welch(before: list[float], after: list[float], level: float) -> tuple[float, float]:
    """The interval of after / before - 1 in percent on log times, Welch's t, made here with
    scipy.stats rather than the guard's own statistics."""
    from scipy import stats

    a, b = np.log(after), np.log(before)
    va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
    df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    half = stats.t.ppf(0.5 + level / 2, df) * np.sqrt(va + vb)
    diff = a.mean() - b.mean()
    return float(np.expm1(diff - half) * 100), float(np.expm1(diff + half) * 100)


def test_each_ablation_interval_is_at_the_level_its_batch_size_was_decided_at() -> None:
    """The report keeps the arm's change at 95%; the comment shows it at the verdict's level, as
    every other interval in it, and names no other level."""
    report = _demo()
    [line] = ablation_lines(report)
    for batch in report.batch_sizes:
        level = 1 - 2 * batch.alpha_per_look
        assert level > 0.99
        base, unpadded = _values(report, batch.batch_size, "base"), _values(report, batch.batch_size, "head-unpadded")
        low, high = _welch(base, unpadded, level)
        assert f"at batch size {batch.batch_size}, {_pct(unpadded, base):+.2f}% against base ({low:+.2f}% to " \
               f"{high:+.2f}%)" in line
        stored = next(e.change for e in report.explanation.ablations if e.batch_size == batch.batch_size)
        assert stored is not None and stored.confidence == 0.95 and f"{stored.ci_low_pct:+.2f}%" not in line
    assert "95%" not in render_comment(report).split("<summary>Method</summary>")[0]


def test_what_an_ablation_arm_takes_back_is_said_above_the_fold() -> None:
    """A regression's ablation arm: its share of the slowdown per batch size is a line of the
    summary, not only in its fold."""
    report = _demo()
    above = above_the_fold(render_comment(report))
    shares = []
    for batch_size in (1, 2):
        base, head, unpadded = (_values(report, batch_size, a) for a in ("base", "head", "head-unpadded"))
        shares.append((_pct(head, base) - _pct(unpadded, base)) / _pct(head, base))
    assert (f"Ablation arm `head-unpadded` takes back {shares[0]:.0%} of the slowdown at batch size 1 and "
            f"{shares[1]:.0%} at batch size 2.") in above
    # from the base build, the share it reproduces
    arms = [a.model_copy(update={"source": "base"}) if a.source else a for a in report.arms]
    from_base = above_the_fold(render_comment(explained(report.model_copy(update={"arms": arms}))))
    assert "Ablation arm `head-unpadded` reproduces " in from_base and "takes back" not in from_base


def test_no_ablation_line_above_the_fold_where_nothing_regressed() -> None:
    """A pass has no slowdown to take back: the arm's figures stay in their fold."""
    passed = remeasured(_demo(), 1.0)
    assert passed.verdict == "pass" and passed.explanation.ablations
    comment = render_comment(passed)
    assert "Ablation arm `" not in above_the_fold(comment) and "<summary>Ablation arms" in comment
