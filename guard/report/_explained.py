"""The explain stage run on a report's own figures: as the pipeline ran it, and as a report
read back is checked (its stated facts must be the ones its numbers give)."""

from __future__ import annotations

from guard.explain import Cause, Explanation, explain
from guard.report._schema import Report


def explain_report(report: Report) -> Explanation:
    """The report's facts made again from its figures, as the stage of its schema made them: a
    fact a later schema added (`capture_unchanged`, schema 8; the work a slower batch size's step
    added whatever part of its time dominates, schema 10) is left out of an older report's."""
    found = _explain(report)
    if report.schema_version < 10:
        found = found.model_copy(update={"causes": [_as_schema_8(c) for c in found.causes]})
    return found if report.schema_version >= 8 else found.model_copy(update={"capture_unchanged": None})


def _as_schema_8(cause: Cause) -> Cause:
    """Before schema 10 a cause counted kernels for kernels_added alone, and no copies or memsets."""
    kept = cause.kernels_per_step if cause.kind == "kernels_added" else None
    return cause.model_copy(update={"kernels_per_step": kept, "memcpys_per_step": None, "memsets_per_step": None})


def _explain(report: Report) -> Explanation:
    return explain(
        report.verdict, report.batch_sizes, {t.batch_size: t.diff for t in report.traces if t.diff is not None},
        report.base, report.head, thresholds=report.rule.pcts(), confidence=report.confidence,
        ablation_builds={a.name: a.source for a in report.arms if a.source is not None and a.status == "ok"},
        capture=report.capture, mix=report.mix,
        mix_trace=report.mix_traces.diff if report.mix_traces is not None else None,
        mix_decision=report.mix_comparison,
        rank_diffs={t.batch_size: t.diff for t in report.rank_traces if t.diff is not None},
        compiled=report.compiled,
    )
