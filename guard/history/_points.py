"""Main-branch points from a report, whose head arm is the commit pushed to main, or from the
record of that commit measured alone: each batch size it measured is one point of its own series."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable

from guard.history._gpu_class import gpu_class
from guard.history._models import MainPoint, SeriesKey
from guard.compare import ArmStats
from guard.record import Record
from guard.report import ArmInfo, Report, WorkloadInfo


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
    batches = [(batch.batch_size, stats) for batch in report.batch_sizes
               if (stats := next((a for a in batch.arms if a.arm == report.head), None)) is not None]
    klass = gpu_class(report.environment, report.gpu_fingerprint).key
    return _points(repo, workload_name(report.workload), klass, head, batches, report.gpu_timed(), order,
                   committed_at, run_id)


def points_from_record(record: Record, repo: str, order: int, run_id: str | None = None) -> list[MainPoint]:
    """A record's figures per batch size, in the series a push's report of the same commit,
    workload and machine gives; none where the commit did not build or run."""
    if not record.measured:
        return []
    klass = gpu_class(record.environment, record.gpu_fingerprint).key
    return _points(repo, workload_name(record.workload), klass, record.arm,
                   [(b.batch_size, b.stats) for b in record.batch_sizes], record.gpu_timed(), order, None, run_id)


def _points(repo: str, workload: str, klass: str, arm: ArmInfo, batches: list[tuple[int, ArmStats]], gpu_timed: bool,
            order: int, committed_at: str | None, run_id: str | None) -> list[MainPoint]:
    points = []
    for batch_size, stats in batches:
        if not _usable(stats.gpu_ms_per_step.values):
            continue
        tok = stats.tok_per_s.median
        points.append(MainPoint(
            series=SeriesKey(repo=repo, workload=workload, batch_size=batch_size, gpu_class=klass),
            sha=arm.sha, order=order, subject=arm.subject, committed_at=committed_at,
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
