"""Reports that hold up, for any verdict: a committed H200 report's base measurements, with
head's made from them, every verdict decided again from those values by the compare stage,
by the interval rule, as if in one round of a run that may take `looks` rounds, and its facts
explained again. A test that wants a report saying `pass` gets one whose numbers pass.
`committed` reads a committed report of an older schema as data (validation/_older.py)."""

from __future__ import annotations

from guard.compare import StatedRule, decide_again, most_severe
from guard.measure import spread
import tempfile
from pathlib import Path

from validation._older import read_any as committed
from guard.report import SCHEMA_VERSION, Report, explain_report

__all__ = ["committed", "current_file", "explained", "remeasured"]

_CURRENT = Path(tempfile.mkdtemp(prefix="guard-current-reports-"))


def current_file(path: Path) -> Path:
    """A committed report of an older schema, written as the current schema, for a command to read."""
    out = _CURRENT / f"{path.parent.name}-{path.name.removesuffix('.gz')}"
    if not out.exists():
        out.write_text(committed(path).model_dump_json(indent=2))
    return out


def explained(report: Report) -> Report:
    """`report` with its facts explained again, after a test changed its figures."""
    return report.model_copy(update={"explanation": explain_report(report)})


def remeasured(report: Report, factor: float, jitter: float = 0.0, looks: int = 1) -> Report:
    """`report` as if head's GPU ms per step were base's times `factor`, each repeat moved by
    +`jitter` and -`jitter` in turn (a share), and each arm's tok/s were its batch size over
    its step time; every batch size and the whole decided again, at the first of `looks`."""
    rule = StatedRule(threshold_pct=report.threshold_pct, tok_threshold_pct=report.tok_threshold_pct or
                      report.threshold_pct, alpha=report.alpha, confidence=report.confidence, looks=looks,
                      batch_sizes=len(report.batch_sizes))
    batches = []
    for batch in report.batch_sizes:
        base = next(a for a in batch.arms if a.arm == report.base)
        base_ms = base.gpu_ms_per_step.values
        head_ms = [v * factor * (1 + jitter * (-1) ** i) for i, v in enumerate(base_ms)]
        arms = []
        for arm in batch.arms:
            ms = {report.head: head_ms, report.base: base_ms}.get(arm.arm, arm.gpu_ms_per_step.values)
            arms.append(arm.model_copy(update={
                "gpu_ms_per_step": spread(ms), "tok_per_s": spread([batch.batch_size * 1000 / v for v in ms]),
                "end_to_end_gpu_ms_per_step": None, "host_ms_per_step": None,
            }))
        stored = batch.model_copy(update={"arms": arms, "look": 1})
        batches.append(decide_again(stored, report.base, report.head, rule))
    again = report.model_copy(update={
        "schema_version": SCHEMA_VERSION, "looks": looks, "rounds": 1,
        "batch_sizes": batches,
        "verdict": most_severe([b.verdict for b in batches]),
        "reasons": [r for b in batches for r in b.reasons],
    })
    return again.model_copy(update={"explanation": explain_report(again)})
