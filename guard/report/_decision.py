"""The comment's words on the interval rule (schema 2): the interval each verdict was decided
on, the metric that decided it, and for a batch size left undecided after the last round, its
change, its interval and the processes it would take to decide. Schema-1 reports, decided by
the significance rule, keep their own sentences (`_title.py`)."""

from __future__ import annotations

from guard.compare import BatchComparison, MetricKey, alpha_per_look
from guard.measure import MOST_REPEATS, Change
from guard.report._schema import Report

VERDICT_LABEL = {"at_threshold": "at threshold"}  # how a verdict is written; the rest as they are
SHORT_NAME: dict[MetricKey, str] = {"gpu_ms": "GPU ms", "tok_per_s": "tok/s"}


def verdict_label(verdict: str) -> str:
    return VERDICT_LABEL.get(verdict, verdict)


def interval_rule(report: Report) -> bool:
    return report.looks is not None


def shown_change(report: Report, batch: BatchComparison, metric: MetricKey) -> Change | None:
    """The change the comment shows: between the bounds it was decided on (interval rule), or
    with the interval at the report's confidence (significance rule)."""
    if interval_rule(report):
        return batch.gpu_ms_bounds if metric == "gpu_ms" else batch.tok_per_s_bounds
    return batch.gpu_ms_change if metric == "gpu_ms" else batch.tok_per_s_change


def _alpha_per_look(report: Report) -> float:
    """What each bound of the run may err: the report's alpha over its looks, metrics and batch sizes."""
    return alpha_per_look(report.alpha, report.looks or 1, max(1, len(report.batch_sizes)))


def level(report: Report) -> str:
    """The level of the intervals shown: '99.75%'."""
    value = 1 - 2 * _alpha_per_look(report) if interval_rule(report) else report.confidence
    return f"{value * 100:.4g}%"


def row_label(report: Report, batch: BatchComparison) -> str:
    """The table's change row: 'regression (tok/s)', 'at threshold (GPU ms)', 'pass'."""
    if not interval_rule(report) or batch.decided_by is None:
        return batch.verdict
    return f"{verdict_label(batch.verdict)} ({SHORT_NAME[batch.decided_by]})"


def decided_by_tok(report: Report, batch: BatchComparison) -> bool:
    return interval_rule(report) and batch.decided_by == "tok_per_s"


def processes_text(report: Report) -> str:
    """'5 fresh processes per arm', and which batch sizes a confirmation round added to."""
    if not interval_rule(report):
        counts = [a.repeats for a in report.arms if a.name in (report.base, report.head)]
        return f"{next((n for n in counts if n), 0)} fresh processes per arm"
    again = [str(b.batch_size) for b in report.batch_sizes if b.look > 1]
    text = f"{report.workload.repeats} fresh processes per arm"
    if again:
        sizes = f"batch size {again[0]}" if len(again) == 1 else f"batch sizes {', '.join(again)}"
        text += f", and {report.workload.repeats} more in a confirmation round for {sizes}, undecided after the first"
    return text


def _metric_name(report: Report, metric: MetricKey) -> str:
    return ("GPU ms per decode step" if report.gpu_timed() else "ms per decode step (CPU)") if metric == "gpu_ms" \
        else "tok/s"


def _threshold(report: Report, metric: MetricKey) -> float:
    return report.threshold_pct if metric == "gpu_ms" else report.tok_threshold_pct or report.threshold_pct


def _processes(report: Report, batch: BatchComparison) -> int:
    return min(a.repeats for a in batch.arms if a.arm in (report.base, report.head))


def _undecided_clause(report: Report, batch: BatchComparison) -> str:
    """'at batch size 2, GPU ms per decode step +0.98% (99.75% interval +0.61% to +1.36%); telling
    it from the 1% threshold at this spread takes about 310 processes per arm (this run: 10)'."""
    metric = batch.decided_by or "gpu_ms"
    change = shown_change(report, batch, metric)
    assert change is not None
    needed = batch.repeats_to_decide
    count = f"more than {MOST_REPEATS}" if needed is None else f"about {needed}"
    spread = ""
    if batch.verdict == "inconclusive":
        arms = {a.arm: a for a in batch.arms}
        figures = [(arms[name].gpu_ms_per_step if metric == "gpu_ms" else arms[name].tok_per_s).spread_pct
                   for name in (report.base, report.head)]
        spread = f", the processes spread over {figures[0]:.2f}% (base) and {figures[1]:.2f}% (head)"
    return (f"at batch size {batch.batch_size}, {_metric_name(report, metric)} {change.pct:+.2f}% "
            f"({level(report)} interval {change.interval()}{spread}); telling it from the "
            f"{_threshold(report, metric):g}% threshold at this spread takes {count} processes per arm "
            f"(this run: {_processes(report, batch)})")


def undecided_sentence(report: Report) -> str:
    """What the run could not decide, as the tail of 'the measurement of this pull request ...'."""
    close = [b for b in report.batch_sizes if b.verdict == "at_threshold"]
    noisy = [b for b in report.batch_sizes if b.verdict == "inconclusive"]
    after = "after its confirmation round" if report.rounds > 1 else "in one round"
    parts = []
    if close:
        parts.append(f"shows a slowdown at about the threshold, too close to it to call {after}: "
                     + "; ".join(_undecided_clause(report, b) for b in close))
    if noisy:
        parts.append(f"was too noisy to tell a slowdown of the threshold from none {after}: "
                     + "; ".join(_undecided_clause(report, b) for b in noisy))
    passed = [str(b.batch_size) for b in report.batch_sizes if b.verdict in ("pass", "improvement")]
    text = ". It ".join(parts)
    if passed:
        sizes = f"batch size {passed[0]}" if len(passed) == 1 else f"batch sizes {', '.join(passed)}"
        text += f". A slowdown of the threshold is ruled out at {sizes}"
    return text


def rule_note(report: Report) -> str:
    """The footer's account of the rule, with this run's figures."""
    each = f"{_alpha_per_look(report) * 100:.3g}%"
    looks, sizes = report.looks or 1, len(report.batch_sizes)
    gpu, tok = report.threshold_pct, report.tok_threshold_pct or report.threshold_pct
    return (
        f"A batch size is a regression when the lower bound of its slowdown is above the threshold "
        f"({gpu:g}% in {_metric_name(report, 'gpu_ms')}, {tok:g}% in tok/s), a pass when the upper bound is "
        f"under it, an improvement when the upper bound is under minus the threshold; each bound is wrong at most "
        f"{each} of the time, alpha {report.alpha:g} split over {looks} round{'s' if looks > 1 else ''} x 2 metrics "
        f"x {sizes} batch size{'s' if sizes > 1 else ''}, so all of them hold together at least "
        f"{(1 - report.alpha) * 100:.4g}% of the time. "
        "tok/s decides only where this run's processes could detect its threshold. A batch size left open "
        + ("gets one confirmation round of the same number of processes; one still open after it "
           if looks > 1 else "")
        + "is at threshold (a slowdown is shown, whether it reaches the threshold is not) or inconclusive "
        "(no change and the threshold both fit). p-values are in report.json, for reference; they decide nothing."
    )
