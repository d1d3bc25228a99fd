"""Which alerts to post: one per culprit commit, for its confirmed slowdowns in every series, and
none for a culprit already alerted. The words are the publish stage's; this is the plan."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Set

from guard.history._models import AlertPlan, ChangePoint, IssueAlert, PullComment


def alert_key(repo: str, culprit_sha: str) -> str:
    return f"change-point:{repo}@{culprit_sha}"


def plan_alerts(
    change_points: Iterable[ChangePoint], pulls_by_sha: Mapping[str, int], alerted: Set[str],
    culprits: Mapping[str, str] | None = None,
) -> list[AlertPlan]:
    """`pulls_by_sha`: the pull request each main commit came from, where the service knows it.
    `alerted`: the dedupe keys already posted. Candidates, dismissed steps and speed-ups give none.
    `culprits`: by change point id, the commit a bisect of its two sides found; a change point
    without one blames its first commit after the step."""
    by_culprit: dict[tuple[str, str], list[ChangePoint]] = {}
    for point in change_points:
        if point.state == "confirmed" and point.direction == "slower":
            culprit = (culprits or {}).get(point.id, point.after_sha)
            by_culprit.setdefault((point.series.repo, culprit), []).append(point)
    plans = []
    for (repo, sha), points in sorted(by_culprit.items(), key=lambda item: min(p.after_order for p in item[1])):
        key = alert_key(repo, sha)
        if key in alerted:
            continue
        pr = pulls_by_sha.get(sha)
        plans.append(AlertPlan(
            dedupe_key=key, repo=repo, culprit_sha=sha,
            change_points=sorted(points, key=lambda p: p.series.id),
            worst_change_pct=max(p.change_pct for p in points),
            comment=PullComment(repo=repo, pr=pr, sha=sha) if pr is not None else None,
            issue=IssueAlert(repo=repo, culprit_sha=sha),
        ))
    return plans
