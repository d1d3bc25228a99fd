"""Main-branch points from a report: the report's head arm is the commit pushed to main, and
each batch size it measured is one point of its own series."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable

from guard.history._gpu_class import gpu_class
from guard.history._models import MainPoint, SeriesKey
from guard.report import Report, WorkloadInfo


def workload_name(workload: WorkloadInfo) -> str:
    """The entry, and its options when it has any: other options are another workload."""
    if not workload.options:
        return workload.entry
    return f"{workload.entry} {json.dumps(workload.options, sort_keys=True, separators=(',', ':'))}"


def points_from_report(
    report: Report, repo: str, order: int, committed_at: str | None = None, run_id: str | None = None
) -> list[MainPoint]:
    """The head arm's figures per batch size. A batch size whose head figures are missing or not
    finite (a report read back is data) gives no point; a failed head build gives none at all."""
    head = next((a for a in report.arms if a.name == report.head), None)
    if head is None or head.status != "ok":
        return []
    klass = gpu_class(report.environment, report.gpu_fingerprint).key
    workload = workload_name(report.workload)
    gpu_timed = report.gpu_timed()
    points = []
    for batch in report.batch_sizes:
        stats = next((a for a in batch.arms if a.arm == report.head), None)
        if stats is None or not _usable(stats.gpu_ms_per_step.values):
            continue
        tok = stats.tok_per_s.median
        points.append(MainPoint(
            series=SeriesKey(repo=repo, workload=workload, batch_size=batch.batch_size, gpu_class=klass),
            sha=head.sha, order=order, subject=head.subject, committed_at=committed_at,
            gpu_ms_per_step=stats.gpu_ms_per_step.median, gpu_ms_values=stats.gpu_ms_per_step.values,
            tok_per_s=tok if math.isfinite(tok) and tok > 0 else None, gpu_timed=gpu_timed, run_id=run_id,
        ))
    return points


def group_series(points: Iterable[MainPoint]) -> dict[SeriesKey, list[MainPoint]]:
    """Points per series, in first-parent order; a commit measured twice keeps its latest point."""
    by_series: dict[SeriesKey, dict[str, MainPoint]] = {}
    for point in points:
        by_series.setdefault(point.series, {})[point.sha] = point
    return {key: sorted(by_sha.values(), key=lambda p: p.order) for key, by_sha in by_series.items()}


def _usable(values: list[float]) -> bool:
    return bool(values) and all(math.isfinite(v) and v > 0 for v in values)
