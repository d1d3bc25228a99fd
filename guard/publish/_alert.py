"""The words of a change-point alert: the issue's title and body and the comment on the culprit's
pull request, from guard.history's plan (one culprit, every confirmed slowdown it caused) and,
where the slowdown spanned several commits, the bisects that found the culprit among them.
Workload names, GPU classes and commit subjects are data: escaped like any string from a report."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from guard._markdown import text

if TYPE_CHECKING:  # guard.history loads numpy and the detector, guard.bisect the pipeline; reading needs neither
    from guard.bisect import BisectResult
    from guard.history import AlertPlan, ChangePoint


def alert_issue_title(plan: AlertPlan) -> str:
    count = len(plan.change_points)
    return (f"Decode slower since {plan.culprit_sha[:8]}: step time {plan.worst_change_pct:+.1f}% "
            f"({count} series)")[:256]


def alert_issue_body(plan: AlertPlan, server_url: str, pr: int | None,
                     bisects: Sequence[BisectResult] = ()) -> str:
    source = (f"It came from pull request #{pr}." if pr is not None
              else "No pull request of this repository holds it: it was pushed to the default branch directly.")
    head = "the first commit measured after it" if bisects else "this commit"
    chains = "".join(f"\n\n{_chain(b, plan.repo, server_url)}" for b in bisects)
    return (
        f"{_lead(plan, server_url)}\n\n{source}\n\n{_table(plan, server_url)}\n\n"
        "Each slowdown is a change point of the default branch's history, confirmed by a paired, interleaved "
        f"run of the last commit before it (base) against {head} (head) on one host"
        f"{_runs(plan)}. This issue is updated, not posted again, when more series confirm the same commit."
        f"{chains}\n"
    )


def alert_comment_body(plan: AlertPlan, server_url: str, issue: int | None,
                       bisects: Sequence[BisectResult] = ()) -> str:
    tracked = f" It is tracked in #{issue}." if issue is not None else ""
    found = "".join(f" {_bisect_lead(b, plan.repo, server_url)}" for b in bisects)
    return (
        f"### regression-guard: this pull request made decode slower on the default branch\n\n"
        f"{_lead(plan, server_url)}{found}{tracked}\n\n{_table(plan, server_url)}\n"
    )


def _bisect_lead(bisect: BisectResult, repo: str, server_url: str) -> str:
    span = (f"the {len(bisect.commits)} commits after {_commit(repo, bisect.good_sha, server_url)} up to "
            f"{_commit(repo, bisect.bad_sha, server_url)}")
    if bisect.outcome == "found" and bisect.first_bad_sha:
        return (f"A bisect of {span} found it in {len(bisect.steps)} paired runs against "
                f"{_commit(repo, bisect.good_sha, server_url)}.")
    return (f"A bisect of {span} found no commit slower than {_commit(repo, bisect.good_sha, server_url)}: "
            f"this alert names the last of them.")


def _chain(bisect: BisectResult, repo: str, server_url: str) -> str:
    """The bisect's measurements, in the order they ran: each a paired run of its commit (head) against good (base)."""
    rows = [f"#### Bisect\n\n{_bisect_lead(bisect, repo, server_url)}\n",
            "| run | commit | subject | verdict | GPU ms per step vs good |", "|---|---|---|---|---|"]
    for step in bisect.steps:
        change = ("" if step.worst_gpu_ms_change_pct is None else
                  f"{step.worst_gpu_ms_change_pct:+.1f}% (batch size {step.worst_batch_size})")
        rows.append(f"| {step.number} | {_commit(repo, step.sha, server_url)} | {text(step.subject[:80])} | "
                    f"{text(step.verdict.replace('_', ' '))} ({'slower' if step.bad else 'not slower'}) | {change} |")
    return "\n".join(rows)


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
