"""From the pages' data to what the templates show: rows of figures, the charts, the filter.
Every number is formatted here and every sentence is the templates'; strings of git, GitHub
and reports pass through as they are, for the templates' autoescape."""

from __future__ import annotations

from markupsafe import Markup
from pydantic import BaseModel

from guard.dashboard._history_svg import history_svg
from guard.dashboard._models import ChangeBisect, PullRun, PullRuns, RepoHistory, SeriesHistory, TraceLink
from guard.history import ChangePoint
from guard.report import metric, strip_chart, strip_svg, verdict


class BisectStepRow(BaseModel):
    number: int
    sha: str
    verdict: str
    side: str  # "slower" or "not slower" than good
    change: str  # "+8.1% (batch size 2)", or ""


class BisectView(BaseModel):
    state: str  # queued, running, found, not_found, failed
    first_bad_sha: str | None
    url: str | None
    steps: list[BisectStepRow]


class ChangeRow(BaseModel):
    state: str
    direction: str
    before_sha: str
    after_sha: str
    change: str  # "+8.1%"
    p_value: str
    confirmation: str  # the paired run's verdict, or ""
    bisect: BisectView | None = None


class SeriesView(BaseModel, arbitrary_types_allowed=True):
    workload: str
    batch_size: int
    gpu_class: str
    points: int
    latest_sha: str
    latest_ms: str
    chart: Markup
    changes: list[ChangeRow]


class RepoView(BaseModel):
    repo: str
    server_url: str
    regressions_only: bool
    series: list[SeriesView]
    hidden_series: int  # left out by the filter
    pulls: list[dict[str, object]]
    hidden_pulls: int


class BatchRow(BaseModel):
    batch_size: int
    verdict: str
    verdict_key: str
    base_ms: str
    head_ms: str
    change: str


class TraceRow(BaseModel):
    batch_size: int
    arm: str
    kernels_per_step: str
    busy_ms: str
    idle_ms: str
    gap_ms: str
    launches: str
    links: list[TraceLink]


class RunView(BaseModel, arbitrary_types_allowed=True):
    run_id: str
    created_at: str
    verdict: str
    verdict_key: str
    base_sha: str
    head_sha: str
    head_subject: str
    report_url: str | None
    metric: str
    batches: list[BatchRow]
    strip: Markup | None
    traces: list[TraceRow]
    untraced_links: list[TraceLink]  # traces the report's figures do not cover


class PullView(BaseModel):
    repo: str
    pr: int
    title: str
    server_url: str
    repo_url: str
    regressions_only: bool
    runs: list[RunView]
    hidden_runs: int


def _alarming(change: ChangePoint) -> bool:
    return change.direction == "slower" and change.state != "dismissed"


def repo_view(history: RepoHistory, regressions_only: bool) -> RepoView:
    shown = [s for s in history.series if not regressions_only or any(map(_alarming, s.change_points))]
    pulls = [p for p in history.pulls if not regressions_only or p.verdict == "regression"]
    return RepoView(
        repo=history.repo, server_url=history.server_url.rstrip("/"), regressions_only=regressions_only,
        series=[_series(s, history.server_url) for s in sorted(shown, key=lambda s: s.series.id)],
        hidden_series=len(history.series) - len(shown),
        pulls=[p.model_dump() | {"verdict_text": verdict(p.verdict)} for p in pulls],
        hidden_pulls=len(history.pulls) - len(pulls),
    )


def _bisect(bisect: ChangeBisect) -> BisectView:
    return BisectView(
        state=bisect.state, first_bad_sha=bisect.first_bad_sha,
        url=bisect.url,
        steps=[BisectStepRow(
            number=s.number, sha=s.sha, verdict=verdict(s.verdict), side="slower" if s.bad else "not slower",
            change="" if s.worst_gpu_ms_change_pct is None else
            f"{s.worst_gpu_ms_change_pct:+.1f}% (batch size {s.worst_batch_size})") for s in bisect.steps])


def _series(history: SeriesHistory, server_url: str) -> SeriesView:
    gpu = all(p.gpu_timed for p in history.points)
    bisects = {(b.before_sha, b.after_sha): _bisect(b) for b in history.bisects}
    latest = history.points[-1] if history.points else None
    return SeriesView(
        workload=history.series.workload, batch_size=history.series.batch_size,
        gpu_class=history.series.gpu_class, points=len(history.points),
        latest_sha=latest.sha if latest else "", latest_ms=f"{latest.gpu_ms_per_step:.4g}" if latest else "",
        chart=Markup(history_svg(history, server_url, metric("gpu_ms", gpu))),  # etree escaped every string in it
        changes=[ChangeRow(
            state=c.state, direction=c.direction, before_sha=c.before_sha, after_sha=c.after_sha,
            change=f"{c.change_pct:+.1f}%", p_value=f"{c.p_value:.2g}",
            confirmation=c.confirmation.verdict if c.confirmation else "",
            bisect=bisects.get((c.before_sha, c.after_sha)),
        ) for c in history.change_points],
    )


def pull_view(pull: PullRuns, regressions_only: bool) -> PullView:
    runs = [r for r in pull.runs if not regressions_only or r.report.verdict == "regression"]
    return PullView(repo=pull.repo, pr=pull.pr, title=pull.title, server_url=pull.server_url.rstrip("/"),
                    repo_url=pull.repo_url, regressions_only=regressions_only, runs=[_run(r) for r in runs],
                    hidden_runs=len(pull.runs) - len(runs))


def _run(run: PullRun) -> RunView:
    report = run.report
    arms = {a.name: a for a in report.arms}
    gpu = report.gpu_timed()
    chart = strip_chart(report)
    rows = []
    for batch in report.batch_sizes:
        stats = {a.arm: a for a in batch.arms}
        base, head = stats.get(report.base), stats.get(report.head)
        rows.append(BatchRow(
            batch_size=batch.batch_size, verdict=verdict(batch.verdict), verdict_key=batch.verdict,
            base_ms=f"{base.gpu_ms_per_step.median:.4g}" if base else "",
            head_ms=f"{head.gpu_ms_per_step.median:.4g}" if head else "",
            change=f"{batch.gpu_ms_change.pct:+.1f}%" if batch.gpu_ms_change else "",
        ))
    traces, covered = [], set()
    for section in report.traces:
        for arm in section.arms:
            links = [t for t in run.trace_links if (t.arm, t.batch_size) == (arm.arm, section.batch_size)]
            covered.update(id(t) for t in links)
            f = arm.figures
            traces.append(TraceRow(
                batch_size=section.batch_size, arm=arm.arm, links=links,
                kernels_per_step=f"{f.kernels_per_step:.1f}" if f else "",
                busy_ms=f"{f.busy_ms_per_step:.3f}" if f else "", idle_ms=f"{f.idle_ms_per_step:.3f}" if f else "",
                gap_ms=f"{f.gaps.gap_ms_per_step:.3f}" if f else "",
                launches=f"{f.graph_launches_per_step:g} graph, {f.kernel_launches_per_step:g} kernel" if f else "",
            ))
    return RunView(
        run_id=run.run_id, created_at=run.created_at or report.started_at, verdict=verdict(report.verdict),
        verdict_key=report.verdict, base_sha=arms[report.base].sha if report.base in arms else "",
        head_sha=arms[report.head].sha if report.head in arms else "",
        head_subject=arms[report.head].subject if report.head in arms else "", report_url=run.report_url,
        metric=metric("gpu_ms", gpu), batches=rows,
        strip=Markup(strip_svg(chart, metric("gpu_ms", gpu))) if chart else None,  # etree escaped every string in it
        traces=traces, untraced_links=[t for t in run.trace_links if id(t) not in covered],
    )
