"""The words of a change-point alert: the issue's title and body and the comment on the culprit's
pull request, from guard.history's plan (one culprit, every confirmed slowdown it caused).
Workload names and GPU classes are data: escaped like any string from a report."""

from __future__ import annotations

from typing import TYPE_CHECKING

from guard._markdown import text

if TYPE_CHECKING:  # guard.history loads numpy and the detector; reading a plan needs neither
    from guard.history import AlertPlan, ChangePoint


def alert_issue_title(plan: AlertPlan) -> str:
    count = len(plan.change_points)
    return (f"Decode slower since {plan.culprit_sha[:8]}: step time {plan.worst_change_pct:+.1f}% "
            f"({count} series)")[:256]


def alert_issue_body(plan: AlertPlan, server_url: str, pr: int | None) -> str:
    source = (f"It came from pull request #{pr}." if pr is not None
              else "No pull request of this repository holds it: it was pushed to the default branch directly.")
    return (
        f"{_lead(plan, server_url)}\n\n{source}\n\n{_table(plan, server_url)}\n\n"
        "Each slowdown is a change point of the default branch's history, confirmed by a paired, interleaved "
        "run of the last commit before it (base) against this commit (head) on one host"
        f"{_runs(plan)}. This issue is updated, not posted again, when more series confirm the same commit.\n"
    )


def alert_comment_body(plan: AlertPlan, server_url: str, issue: int | None) -> str:
    tracked = f" It is tracked in #{issue}." if issue is not None else ""
    return (
        f"### regression-guard: this pull request made decode slower on the default branch\n\n"
        f"{_lead(plan, server_url)}{tracked}\n\n{_table(plan, server_url)}\n"
    )


def _runs(plan: AlertPlan) -> str:
    runs = sorted({int(c.confirmation.run_id) for c in plan.change_points
                   if c.confirmation is not None and (c.confirmation.run_id or "").isdigit()})
    if not runs:
        return ""
    listed = ", ".join(f"`/api/v1/runs/{run}`" for run in runs)
    return f": the service's {'run' if len(runs) == 1 else 'runs'} {listed}, with every process's figures"


def _lead(plan: AlertPlan, server_url: str) -> str:
    count = len(plan.change_points)
    series = "one series" if count == 1 else f"{count} series"
    return (f"**Commit {_commit(plan.repo, plan.culprit_sha, server_url)} made decode slower: step time "
            f"{plan.worst_change_pct:+.1f}% at worst, in {series}, confirmed by a paired run.**")


def _table(plan: AlertPlan, server_url: str) -> str:
    rows = ["| workload | batch size | GPU class | last before | median ms per step | change | paired run |",
            "|---|---|---|---|---|---|---|"]
    rows += [_row(point, plan.repo, server_url) for point in plan.change_points]
    return "\n".join(rows)


def _row(point: ChangePoint, repo: str, server_url: str) -> str:
    confirmation = point.confirmation
    paired = "" if confirmation is None else text(confirmation.verdict.replace("_", " ")) + (
        f", {confirmation.gpu_ms_change_pct:+.1f}%" if confirmation.gpu_ms_change_pct is not None else "")
    return (f"| {text(point.series.workload)} | {point.series.batch_size} | {text(point.series.gpu_class)} | "
            f"{_commit(repo, point.before_sha, server_url)} | {point.before_ms:.2f} → {point.after_ms:.2f} | "
            f"{point.change_pct:+.1f}% | {paired} |")


def _commit(repo: str, sha: str, server_url: str) -> str:
    # repo and sha were checked (OWNER/NAME, hex) where they came in: a link of the service's own making
    return f"[`{sha[:8]}`]({server_url}/{repo}/commit/{sha})"
