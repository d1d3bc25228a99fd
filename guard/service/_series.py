"""The default branch's series as guard.history models, read from and written to the tables,
and the change points found again after each push (guard.history's detector, kept state
reconciled, and each paired run that measured a step applied to it again)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.orm import Session, sessionmaker

from guard.history import (
    ChangePoint, Confirmation, MainPoint, SeriesKey, apply_confirmation, detect_change_points, group_series, reconcile,
)
from guard.service._tables import ChangePoint as ChangePointRow
from guard.service._tables import MainPoint as MainPointRow


def series_key(row: Any) -> SeriesKey:
    return SeriesKey(repo=row.repo, workload=row.workload, batch_size=row.batch_size, gpu_class=row.gpu_class)


def main_points(session: Session, repo: str) -> list[MainPoint]:
    return [MainPoint(series=series_key(p), sha=p.sha, order=p.commit_order or 0, subject=p.subject,
                      gpu_ms_per_step=p.gpu_ms_per_step, gpu_ms_values=p.gpu_ms_values, tok_per_s=p.tok_per_s,
                      gpu_timed=p.gpu_timed, run_id=str(p.run_id))
            for p in session.scalars(select(MainPointRow).where(MainPointRow.repo == repo))]


def change_point_model(row: ChangePointRow) -> ChangePoint:
    return ChangePoint(
        series=series_key(row), before_sha=row.before_sha, after_sha=row.after_sha, before_order=row.before_order,
        after_order=row.after_order, before_ms=row.before_ms, after_ms=row.after_ms, change_pct=row.change_pct,
        direction=row.direction, p_value=row.p_value, state=row.state, confirmation=row.confirmation)


def change_points(session: Session, repo: str) -> dict[SeriesKey, list[ChangePoint]]:
    found: dict[SeriesKey, list[ChangePoint]] = {}
    for c in session.scalars(select(ChangePointRow).where(ChangePointRow.repo == repo)
                             .order_by(ChangePointRow.after_order)):
        found.setdefault(series_key(c), []).append(change_point_model(c))
    return found


def redetect(sessions: sessionmaker, repo: str,
             measured: Mapping[tuple[str, str, str], Confirmation] | None = None) -> int:
    """Finds the change points of the repository's series again; returns how many are kept.
    `measured`: paired runs by (change point id, before sha, after sha), applied to the step they
    measured wherever detection finds it again (guard.service._confirm keeps them)."""
    now = time.time()
    with sessions() as session:
        known = change_points(session, repo)
        kept = 0
        for key, points in group_series(main_points(session, repo)).items():
            current = reconcile(known.get(key, []), detect_change_points(points))
            current = [_measured(c, measured or {}) for c in current]
            session.execute(delete(ChangePointRow).where(
                ChangePointRow.repo == key.repo, ChangePointRow.workload == key.workload,
                ChangePointRow.batch_size == key.batch_size, ChangePointRow.gpu_class == key.gpu_class))
            for c in current:
                session.add(ChangePointRow(
                    repo=key.repo, workload=key.workload, batch_size=key.batch_size, gpu_class=key.gpu_class,
                    before_sha=c.before_sha, after_sha=c.after_sha, before_order=c.before_order,
                    after_order=c.after_order, before_ms=c.before_ms, after_ms=c.after_ms, change_pct=c.change_pct,
                    direction=c.direction, p_value=c.p_value, state=c.state,
                    confirmation=c.confirmation.model_dump() if c.confirmation else None, created_s=now))
            kept += len(current)
        session.commit()
        return kept


def _measured(point: ChangePoint, measured: Mapping[tuple[str, str, str], Confirmation]) -> ChangePoint:
    paired = measured.get((point.id, point.before_sha, point.after_sha))
    if point.state != "candidate" or paired is None:
        return point
    return apply_confirmation(point, paired)
