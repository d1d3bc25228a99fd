"""The explain stage run on a run's parts (`explain_run`): as the pipeline runs it, and on a
report's own figures as a report read back is checked (its stated facts must be the ones its
numbers give)."""

from __future__ import annotations

from guard.cause import CaptureChanges
from guard.compare import Comparison
from guard.config import Rule
from guard.explain import Cause, Explanation, explain
from guard.measure import MixReport
from guard.report._schema import ArmInfo, Report
from guard.trace import MixTraceSection, RankTraceSection, TraceSection


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
    return explain_run(report, report.base, report.head, report.rule, report.arms, traces=report.traces,
                       capture=report.capture, mix=report.mix, mix_traces=report.mix_traces,
                       rank_traces=report.rank_traces)


def explain_run(
    comparison: Comparison, base: str, head: str, rule: Rule, arms: list[ArmInfo], *, traces: list[TraceSection],
    capture: CaptureChanges | None, mix: MixReport | None, mix_traces: MixTraceSection | None,
    rank_traces: list[RankTraceSection],
) -> Explanation:
    """The explain stage's inputs made from a run's parts, as the pipeline has them and as a
    report keeps them: the one place they are assembled."""
    return explain(
        comparison.verdict, comparison.batch_sizes, {t.batch_size: t.diff for t in traces if t.diff is not None},
        base, head, rule=rule,
        ablation_builds={a.name: a.source for a in arms if a.source is not None and a.status == "ok"},
        capture=capture, mix=mix, mix_trace=mix_traces.diff if mix_traces is not None else None,
        mix_decision=comparison.mix_comparison,
        rank_diffs={t.batch_size: t.diff for t in rank_traces if t.diff is not None},
        compiled=comparison.compiled,
    )
