"""What each metric did in the verdict: tok/s informs, and does not decide, where the run's
repeats at its spread could not detect a change of its threshold, and is left out of the table
where it was not measurable at all (compare's `tok_per_s_measurable`)."""

from __future__ import annotations

from guard.compare import BatchComparison
from guard.measure import MOST_REPEATS
from guard.report._schema import Report


def informational(report: Report) -> list[BatchComparison]:
    """The batch sizes whose tok/s was shown for information, not gated on."""
    return [b for b in report.batch_sizes
            if not b.tok_per_s_gates and b.tok_per_s_detectable_pct is not None and b.tok_per_s_measurable]


def unmeasurable(report: Report) -> list[BatchComparison]:
    """Everything decided whose tok/s was not measurable: its row is left out of the table."""
    return [b for b in report.decided() if not b.tok_per_s_measurable and b.tok_per_s_detectable_pct is not None]


def _detectable(batches: list[BatchComparison]) -> str:
    return ", ".join(f"{b.tok_per_s_detectable_pct:.1f}% at "
                     + ("the mix" if b.mix else f"batch size {b.batch_size}") for b in batches)


def _repeats(report: Report, batch: BatchComparison) -> int:
    return min((a.repeats for a in batch.arms if a.arm in (report.base, report.head)), default=0)


def tok_role_note(report: Report) -> str:
    """One sentence, when tok/s did not gate somewhere: what it could detect, and the repeats
    that would let it decide at its threshold."""
    batches = informational(report)
    if not batches:
        return ""
    threshold = report.tok_threshold_pct or report.threshold_pct
    repeats = _repeats(report, batches[0])
    detectable = _detectable(batches)
    needed = [b.tok_per_s_repeats_to_gate for b in batches]
    most = (f"more than {MOST_REPEATS}" if None in needed
            else f"about {max(n for n in needed if n is not None)}")
    return (f"tok/s informs here and does not decide: at its spread, {repeats} processes per arm detect "
            f"only a change of {detectable}, not its {threshold:g}% threshold; it would take {most} per arm "
            "for tok/s to decide. A tok/s slowdown still counts when its whole interval is past the threshold.")


def tok_unmeasured_note(report: Report) -> str:
    """One short sentence, where tok/s was left out of the table: why."""
    batches = unmeasurable(report)
    if not batches:
        return ""
    threshold = report.tok_threshold_pct or report.threshold_pct
    return (f"tok/s is not shown, as not measurable here: at its spread, {_repeats(report, batches[0])} "
            f"processes per arm detect only a change of {_detectable(batches)}, far past its {threshold:g}% threshold.")
