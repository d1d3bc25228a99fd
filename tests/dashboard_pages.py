"""The dashboard's test pages: a repository whose main has known steps (found by the real
detector) and a pull request whose runs are a real H200 report with its profiler traces, with
hostile strings where git and GitHub put text."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from guard.dashboard import PullRun, PullRuns, PullSummary, RepoHistory, SeriesHistory, TraceLink
from guard.history import (
    Confirmation, MainPoint, SeriesKey, apply_confirmation, confirmation_run, detect_change_points,
)
from guard.report import read_report

ROOT = Path(__file__).resolve().parents[1]
H200_REPORT = ROOT / "docs" / "examples" / "h200-demo-545b03b" / "report.json"
REPO = "acme/engine"
HOSTILE_SUBJECT = '<script>alert("subject")</script> engine: pad decode'
HOSTILE_TITLE = '<img src=x onerror=alert(1)> capture decode piecewise'
HOSTILE_WORKLOAD = 'bench/w.py:make {"note":"</h3><b>bold</b>"}'
STEP_AT = 24  # the culprit's place on main in the slowed series


def sha(i: int, salt: str = "") -> str:
    return hashlib.sha1(f"{salt}{i}".encode()).hexdigest()


def _points(key: SeriesKey, values: np.ndarray) -> list[MainPoint]:
    return [MainPoint(series=key, sha=sha(i), order=i, gpu_ms_per_step=float(v),
                      subject=HOSTILE_SUBJECT if i == STEP_AT else f"commit {i}") for i, v in enumerate(values)]


def repo_history() -> RepoHistory:
    """Three series: a confirmed slowdown at STEP_AT (batch size 1), a candidate speed-up
    (batch size 2), and flat noise (batch size 4, another workload)."""
    rng = np.random.default_rng(4)
    slowed = SeriesKey(repo=REPO, workload=HOSTILE_WORKLOAD, batch_size=1, gpu_class="nvidia-h200-1a2b3c4d5e")
    values = 4.0 * (1 + rng.normal(0, 0.006, 40))
    values[STEP_AT:] *= 1.09
    points = _points(slowed, values)
    (step,) = detect_change_points(points)
    run = confirmation_run(step)
    step = apply_confirmation(step, Confirmation(good_sha=run.base_sha, bad_sha=run.head_sha,
                                                 verdict="regression", gpu_ms_change_pct=8.7))
    faster = slowed.model_copy(update={"batch_size": 2})
    fast_values = 6.0 * (1 + rng.normal(0, 0.006, 40))
    fast_values[30:] *= 0.93
    fast_points = _points(faster, fast_values)
    flat = slowed.model_copy(update={"workload": "bench/guard_workload.py:make", "batch_size": 4})
    flat_points = _points(flat, 9.0 * (1 + rng.normal(0, 0.006, 40)))
    return RepoHistory(
        repo=REPO,
        series=[SeriesHistory(series=slowed, points=points, change_points=[step]),
                SeriesHistory(series=faster, points=fast_points, change_points=detect_change_points(fast_points)),
                SeriesHistory(series=flat, points=flat_points, change_points=detect_change_points(flat_points))],
        pulls=[PullSummary(pr=42, title=HOSTILE_TITLE, head_sha=sha(STEP_AT), verdict="regression", runs=2,
                           url="/repos/acme/engine/pulls/42"),
               PullSummary(pr=43, title="docs: typo", head_sha=sha(1, "pr"), verdict="pass", runs=1,
                           url="/repos/acme/engine/pulls/43")],
    )


def _gpu_report():
    """The H200 demo's report (the reference engine's piecewise capture, profiled), its head's
    subject made hostile."""
    report = read_report(H200_REPORT)
    arms = [a.model_copy(update={"subject": HOSTILE_SUBJECT}) if a.name == report.head else a for a in report.arms]
    return report.model_copy(update={"arms": arms})


def _unchanged(report):
    """The same run where head measured as base did: every batch size a pass."""
    batches = []
    for batch in report.batch_sizes:
        base = next(a for a in batch.arms if a.arm == report.base)
        arms = [base, base.model_copy(update={"arm": report.head})]
        change = batch.gpu_ms_change.model_copy(update={"pct": 0.0, "ci_low_pct": -0.4, "ci_high_pct": 0.4})
        batches.append(batch.model_copy(update={"arms": arms, "verdict": "pass", "gpu_ms_change": change}))
    return report.model_copy(update={"verdict": "pass", "batch_sizes": batches, "traces": []})


def pull_runs() -> PullRuns:
    regression = _gpu_report()
    passed = _unchanged(regression)
    # where the service keeps each trace: its own route, never the report's path
    links = [TraceLink(arm=arm.arm, batch_size=section.batch_size, repeat=repeat,
                       url=f"/runs/7/traces/{arm.arm}-{repeat}-bs{section.batch_size}.trace.json.gz")
             for section in regression.traces for arm in section.arms for repeat in range(len(arm.traces))]
    return PullRuns(
        repo=REPO, pr=42, title=HOSTILE_TITLE, repo_url="/repos/acme/engine",
        runs=[PullRun(run_id="7", report=regression, report_url="/api/v1/runs/7", trace_links=links),
              PullRun(run_id="6", report=passed, report_url="/api/v1/runs/6")],
    )
