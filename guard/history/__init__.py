"""The history of main: points per series, change points confirmed by a paired run, and the
alerts they call for, as plain data the service stores and acts on."""

from guard.history._alerts import alert_key, plan_alerts
from guard.history._detect import DetectSettings, detect_change_points
from guard.history._gpu_class import gpu_class
from guard.history._models import (
    AlertPlan, ChangePoint, ChangeState, Confirmation, Direction, GpuClass, IssueAlert, MainPoint, PairedRun,
    PullComment, SeriesKey,
)
from guard.history._points import group_series, points_from_record, points_from_report, workload_name
from guard.history._track import apply_confirmation, confirmation_run, reconcile

__all__ = [
    "AlertPlan",
    "ChangePoint",
    "ChangeState",
    "Confirmation",
    "DetectSettings",
    "Direction",
    "GpuClass",
    "IssueAlert",
    "MainPoint",
    "PairedRun",
    "PullComment",
    "SeriesKey",
    "alert_key",
    "apply_confirmation",
    "confirmation_run",
    "detect_change_points",
    "gpu_class",
    "group_series",
    "plan_alerts",
    "points_from_record",
    "points_from_report",
    "reconcile",
    "workload_name",
]
