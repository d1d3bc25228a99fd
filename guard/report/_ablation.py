"""What each ablation arm undoes: its GPU time per step against base, and, where the head
is a regression, the share of the head's slowdown it takes back (an arm from the head
build) or reproduces (an arm from the base build).

The shares are (head - ablation) / (head - base) and (ablation - base) / (head - base), on
the changes against base, the same geometric-mean ratios the table's change row gives.
They are point figures: read them with the two intervals beside them.
"""

from __future__ import annotations

from guard._markdown import code, text
from guard.compare import ArmStats, BatchComparison
from guard.measure import Change, relative_change
from guard.report._schema import ArmInfo, Report

# Shares this close to 0 or 1 are said as "none" and "all".
_EDGE = 0.02


def ablation_lines(report: Report) -> list[str]:
    """One line per ablation arm that ran, with a clause per batch size it was measured at."""
    lines = []
    for arm in report.arms:
        if arm.source is None or arm.status != "ok":
            continue
        clauses = [c for b in report.batch_sizes if (c := _clause(report, arm, b))]
        if clauses:
            lines.append(f"{_what(arm)}: " + "; ".join(clauses) + ".")
    return lines


def _what(arm: ArmInfo) -> str:
    overrides = ", ".join(code(f"{k}={v}") for k, v in sorted(arm.env.items()))
    built = f"the {text(arm.source)} build" + (f" with {overrides}" if overrides else "")
    return f"{code(arm.name)} ({built})"


def _stats(batch: BatchComparison, name: str) -> ArmStats | None:
    return next((a for a in batch.arms if a.arm == name), None)


def _clause(report: Report, arm: ArmInfo, batch: BatchComparison) -> str | None:
    base, ablated = _stats(batch, report.base), _stats(batch, arm.name)
    if base is None or ablated is None:
        return None
    pct, change = _against_base(base, ablated, report.confidence)
    text = f"at batch size {batch.batch_size}, {pct:+.2f}% against base"
    if change is not None:
        text += f" ({change.interval()})"
    head = batch.gpu_ms_change
    if batch.verdict != "regression" or head is None or head.pct <= 0:
        return text
    if arm.source == report.base:  # the base build with something of the head's turned on
        return f"{text}, {_share(head.pct, pct, 'reproducing')} the head's {head.pct:+.2f}%"
    return f"{text}, {_share(head.pct, pct, 'taking back')} the head's {head.pct:+.2f}%"


def _against_base(base: ArmStats, ablated: ArmStats, confidence: float) -> tuple[float, Change | None]:
    """The step time's change against base in percent, and its interval where the repeats give
    one; with a single repeat, the ratio of the medians alone."""
    try:
        change = relative_change(base.gpu_ms_per_step.values, ablated.gpu_ms_per_step.values, confidence)
    except ValueError:
        return (ablated.gpu_ms_per_step.median / base.gpu_ms_per_step.median - 1) * 100, None
    return change.pct, change


def _share(head_pct: float, ablated_pct: float, verb: str) -> str:
    """How much of the head's slowdown the arm takes back (a head build with part of the
    change undone) or reproduces (a base build with part of it done)."""
    share = (head_pct - ablated_pct) / head_pct if verb == "taking back" else ablated_pct / head_pct
    if share >= 1 - _EDGE:
        return f"{verb} all of"
    if share <= _EDGE:
        return f"{verb} none of"
    return f"{verb} {share:.0%} of"
