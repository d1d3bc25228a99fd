"""The dashboard: server-rendered pages of main's history and of each pull request's runs."""

from guard.dashboard._history_svg import history_svg
from guard.dashboard._models import ChangeBisect, PullRun, PullRuns, PullSummary, RepoHistory, SeriesHistory, TraceLink
from guard.dashboard._render import pull_page, repo_page

__all__ = [
    "ChangeBisect",
    "PullRun",
    "PullRuns",
    "PullSummary",
    "RepoHistory",
    "SeriesHistory",
    "TraceLink",
    "history_svg",
    "pull_page",
    "repo_page",
]
