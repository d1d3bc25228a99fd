"""Change points of one series: ruptures' PELT search for shifts of the mean, each kept only
where Welch's t-test tells the segments on its two sides apart and the step is large enough.

Values are scaled by a noise estimate taken from differences of neighbouring points (robust to
the steps themselves), so one penalty serves series of any unit and noise."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

import numpy as np
import ruptures
from pydantic import BaseModel, Field
from scipy import stats

from guard.history._models import ChangePoint, MainPoint

# median absolute deviation -> standard deviation, for normal noise
_MAD_TO_SD = 1.4826


class DetectSettings(BaseModel):
    min_segment_points: int = Field(default=4, ge=2)  # fewer points on a side is not a level yet
    penalty_per_log_n: float = Field(default=5.0, gt=0)  # PELT's penalty, times log(points), in noise units
    alpha: float = Field(default=0.001, gt=0, lt=1)  # Welch's test between the neighbouring segments
    min_change_pct: float = Field(default=0.5, ge=0)  # smaller steps are not reported, however significant


def detect_change_points(points: Sequence[MainPoint], settings: DetectSettings | None = None) -> list[ChangePoint]:
    """Candidates, oldest first, of one series whose points are in first-parent order."""
    settings = settings or DetectSettings()
    if len({p.series for p in points}) > 1:
        raise ValueError("detect_change_points takes the points of one series")
    ordered = sorted(points, key=lambda p: p.order)
    values = np.array([p.gpu_ms_per_step for p in ordered], dtype=float)
    if len(values) < 2 * settings.min_segment_points:
        return []
    noise = _noise_sd(values)
    if noise == 0:  # a flat series: any step at all is a real one
        noise = float(np.median(values)) * 1e-6 or 1e-12
    search = ruptures.Pelt(model="l2", min_size=settings.min_segment_points, jump=1).fit(values / noise)
    ends = search.predict(pen=settings.penalty_per_log_n * math.log(len(values)))
    bounds = [0, *ends]  # segment i is values[bounds[i]:bounds[i + 1]]
    found = []
    for i in range(1, len(bounds) - 1):
        left, right = values[bounds[i - 1]:bounds[i]], values[bounds[i]:bounds[i + 1]]
        candidate = _candidate(ordered, bounds[i], left, right, settings)
        if candidate is not None:
            found.append(candidate)
    return found


def _candidate(
    ordered: Sequence[MainPoint], index: int, left: np.ndarray, right: np.ndarray, settings: DetectSettings
) -> ChangePoint | None:
    before_ms, after_ms = statistics.median(left.tolist()), statistics.median(right.tolist())
    change_pct = (after_ms - before_ms) / before_ms * 100
    if abs(change_pct) < settings.min_change_pct:
        return None
    if np.ptp(left) == 0 and np.ptp(right) == 0:
        p_value = 0.0 if before_ms != after_ms else 1.0  # two flat levels: the t statistic is undefined
    else:
        p_value = float(stats.ttest_ind(left, right, equal_var=False).pvalue)
    if not p_value < settings.alpha:
        return None
    before, after = ordered[index - 1], ordered[index]
    return ChangePoint(
        series=before.series, before_sha=before.sha, after_sha=after.sha, before_order=before.order,
        after_order=after.order, before_ms=before_ms, after_ms=after_ms, change_pct=change_pct,
        direction="slower" if change_pct > 0 else "faster", p_value=p_value,
    )


def _noise_sd(values: np.ndarray) -> float:
    """The points' own scatter: a difference of two neighbours carries it twice, and a step
    shows in one difference only, which the median passes over."""
    diffs = np.diff(values)
    return float(_MAD_TO_SD * np.median(np.abs(diffs - np.median(diffs))) / math.sqrt(2))
