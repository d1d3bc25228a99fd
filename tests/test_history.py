"""History of main: change points on synthetic series with known steps and noise, the
false-alarm rate on step-free noise, confirmation by a paired run, and the alert plan."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from guard.history import (
    ChangePoint, Confirmation, DetectSettings, MainPoint, SeriesKey, apply_confirmation, confirmation_run,
    detect_change_points, gpu_class, group_series, plan_alerts, points_from_report, reconcile, workload_name,
)
from guard.report import Environment, read_report

CPU_REPORT = Path(__file__).resolve().parents[1] / "docs" / "examples" / "cpu-demo" / "report.json"
KEY = SeriesKey(repo="acme/engine", workload="bench/guard_workload.py:make", batch_size=1, gpu_class="h200-x")


def _sha(i: int, series: SeriesKey = KEY) -> str:
    return f"{i:08x}" + hashlib.sha256(series.id.encode()).hexdigest()[:32]


def _series(values, key: SeriesKey = KEY) -> list[MainPoint]:
    return [MainPoint(series=key, sha=_sha(i), order=i, gpu_ms_per_step=float(v)) for i, v in enumerate(values)]


def _noise(seed: int, n: int, sd_pct: float = 1.0, level_ms: float = 10.0) -> np.ndarray:
    return level_ms * (1 + np.random.default_rng(seed).normal(0, sd_pct / 100, n))


@pytest.mark.parametrize(("step_pct", "noise_pct", "at"), [(5, 1, 30), (-4, 1, 17), (3, 0.5, 45), (20, 3, 8)])
def test_a_known_step_is_found_where_it_is(step_pct, noise_pct, at):
    found_right = 0
    for seed in range(20):
        values = _noise(seed, 60, noise_pct)
        values[at:] *= 1 + step_pct / 100
        points = detect_change_points(_series(values))
        if len(points) == 1 and points[0].after_sha == _sha(at):
            found_right += 1
            got = points[0]
            assert got.before_sha == _sha(at - 1) and got.state == "candidate"
            assert got.direction == ("slower" if step_pct > 0 else "faster")
            assert got.change_pct == pytest.approx(step_pct, abs=3 * noise_pct)
            assert got.p_value < DetectSettings().alpha
    assert found_right >= 18  # a step of 4 to 7 noise deviations, on 8 or more points a side


def test_two_steps_in_one_series_are_both_found():
    values = _noise(7, 90)
    values[30:] *= 1.06
    values[60:] /= 1.06
    found = detect_change_points(_series(values))
    assert [(c.after_sha, c.direction) for c in found] == [(_sha(30), "slower"), (_sha(60), "faster")]


@pytest.mark.slow
def test_false_alarm_rate_on_step_free_noise(capsys):
    """The share of 60-point series of pure noise, normal and heavy-tailed, that report any
    change point: the figure docs/dashboard.md states."""
    series = 400
    normal = sum(bool(detect_change_points(_series(_noise(seed, 60)))) for seed in range(series))
    rng = np.random.default_rng(99)
    heavy = sum(bool(detect_change_points(_series(10 * (1 + 0.01 * rng.standard_t(3, 60))))) for _ in range(series))
    with capsys.disabled():
        print(f"\nfalse alarms on step-free series of 60 points: normal noise {normal}/{series}, "
              f"t(3) noise {heavy}/{series}")
    assert normal / series <= 0.02 and heavy / series <= 0.02


def test_a_single_slow_outlier_is_not_a_step():
    values = _noise(3, 60)
    values[25] *= 1.5  # one slow host, once
    assert detect_change_points(_series(values)) == []


def test_a_short_or_flat_series():
    assert detect_change_points(_series([10.0] * 7)) == []  # fewer than two segments' worth
    flat = detect_change_points(_series([10.0] * 10 + [11.0] * 10))
    assert [(c.after_sha, round(c.change_pct, 6)) for c in flat] == [(_sha(10), 10.0)]
    assert detect_change_points(_series([10.0] * 20)) == []


def test_a_small_significant_step_below_the_floor_is_not_reported():
    values = _noise(5, 60, sd_pct=0.05)
    values[30:] *= 1.003  # 0.3%: clear on this quiet series, below min_change_pct
    assert detect_change_points(_series(values)) == []
    assert detect_change_points(_series(values), DetectSettings(min_change_pct=0.1))


def test_points_of_several_series_are_refused():
    other = KEY.model_copy(update={"batch_size": 2})
    with pytest.raises(ValueError, match="one series"):
        detect_change_points(_series([1.0] * 10) + _series([1.0] * 10, other))


def _step_point() -> ChangePoint:
    values = _noise(11, 40)
    values[20:] *= 1.08
    (found,) = detect_change_points(_series(values))
    return found


def test_confirmation_by_a_paired_run_of_both_sides():
    candidate = _step_point()
    run = confirmation_run(candidate)
    assert (run.base_sha, run.head_sha, run.batch_sizes) == (_sha(19), _sha(20), [1])
    paired = dict(good_sha=run.base_sha, bad_sha=run.head_sha)
    confirmed = apply_confirmation(candidate, Confirmation(**paired, verdict="regression", gpu_ms_change_pct=7.9))
    assert confirmed.state == "confirmed" and confirmed.confirmation.gpu_ms_change_pct == 7.9
    assert apply_confirmation(candidate, Confirmation(**paired, verdict="pass")).state == "dismissed"
    assert apply_confirmation(candidate, Confirmation(**paired, verdict="improvement")).state == "dismissed"
    assert apply_confirmation(candidate, Confirmation(**paired, verdict="invalid")).state == "candidate"
    with pytest.raises(ValueError, match="does not measure"):
        apply_confirmation(candidate, Confirmation(good_sha=_sha(18), bad_sha=_sha(20), verdict="regression"))


def test_reconcile_keeps_decisions_while_main_grows():
    values = list(_noise(11, 40))
    values[20:] = [v * 1.08 for v in values[20:]]
    first = detect_change_points(_series(values))
    confirmed = [apply_confirmation(first[0], Confirmation(good_sha=_sha(19), bad_sha=_sha(20),
                                                           verdict="regression"))]
    longer = detect_change_points(_series(values + list(_noise(12, 10, level_ms=10.8))))
    kept = reconcile(confirmed, longer)
    assert [(c.id, c.state) for c in kept] == [(first[0].id, "confirmed")]
    assert reconcile(first, []) == []  # a candidate no longer found goes
    assert reconcile(confirmed, []) == confirmed  # a measured step stays


def _confirmed(batch_size: int, workload: str = "w", after: int = 20, pct: float = 8.0) -> ChangePoint:
    key = KEY.model_copy(update={"batch_size": batch_size, "workload": workload})
    return ChangePoint(series=key, before_sha=_sha(after - 1), after_sha=_sha(after), before_order=after - 1,
                       after_order=after, before_ms=10, after_ms=10 * (1 + pct / 100), change_pct=pct,
                       direction="slower" if pct > 0 else "faster", p_value=1e-9, state="confirmed")


def test_one_alert_per_culprit_never_a_flood():
    points = [_confirmed(1), _confirmed(2, pct=12.0), _confirmed(4, workload="other"),
              _confirmed(1, after=30, pct=-5.0), _confirmed(8, after=40).model_copy(update={"state": "candidate"})]
    plans = plan_alerts(points, pulls_by_sha={_sha(20): 123}, alerted=set())
    assert len(plans) == 1
    (plan,) = plans
    assert plan.culprit_sha == _sha(20) and plan.comment.pr == 123 and plan.issue.culprit_sha == _sha(20)
    assert sorted(c.series.batch_size for c in plan.change_points) == [1, 2, 4]
    assert plan.worst_change_pct == 12.0
    assert plan_alerts(points, {_sha(20): 123}, alerted={plan.dedupe_key}) == []  # posted once, not again
    (no_pr,) = plan_alerts(points, {}, set())
    assert no_pr.comment is None and no_pr.issue.repo == "acme/engine"  # pushed straight to main: the issue only


def test_gpu_class_splits_on_driver_not_on_the_card():
    state = {"name": "NVIDIA H200", "uuid": "GPU-1", "driver_version": "570.1", "power_limit_w": 700.0}
    base = gpu_class(Environment(gpu="NVIDIA H200"), state)
    other_card = gpu_class(Environment(gpu="NVIDIA H200"), state | {"uuid": "GPU-2"})
    new_driver = gpu_class(Environment(gpu="NVIDIA H200"), state | {"driver_version": "575.2"})
    lower_power = gpu_class(Environment(gpu="NVIDIA H200"), state | {"power_limit_w": 500.0})
    assert base.key == other_card.key
    assert len({base.key, new_driver.key, lower_power.key}) == 3
    assert base.key.startswith("nvidia-h200-") and base.driver == "570.1"
    forged = gpu_class(Environment(gpu="NVIDIA H200"), state | {"power_limit_w": "<b>700</b>"})
    assert forged.power_limit_w is None  # read back from a report: a number or nothing


def test_points_from_a_report_are_the_head_arms_figures():
    report = read_report(CPU_REPORT)
    points = points_from_report(report, "acme/engine", order=5, run_id="run-1")
    head = next(a for a in report.arms if a.name == report.head)
    assert [p.series.batch_size for p in points] == [b.batch_size for b in report.batch_sizes]
    for point, batch in zip(points, report.batch_sizes):
        stats = next(a for a in batch.arms if a.arm == report.head)
        assert point.sha == head.sha and point.gpu_ms_per_step == stats.gpu_ms_per_step.median
        assert point.series.workload == workload_name(report.workload) and point.gpu_timed is False
    failed = report.model_copy(update={"arms": [a.model_copy(update={"status": "build_failed"}) for a in report.arms]})
    assert points_from_report(failed, "acme/engine", order=5) == []


def test_group_series_orders_points_and_keeps_the_latest_of_a_commit():
    other = KEY.model_copy(update={"batch_size": 2})
    points = _series([3.0, 1.0, 2.0])[::-1] + _series([5.0], other)
    again = MainPoint(series=KEY, sha=_sha(1), order=1, gpu_ms_per_step=1.5)
    grouped = group_series([*points, again])
    assert [p.gpu_ms_per_step for p in grouped[KEY]] == [3.0, 1.5, 2.0]
    assert len(grouped[other]) == 1
