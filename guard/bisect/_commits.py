"""The commits a bisect searches: those after good on bad's first-parent line."""

from __future__ import annotations

from pathlib import Path

from guard._errors import GitError
from guard._git import checked_git, require_repo, resolve_commit


def commits_between(repo: Path, good: str, bad: str) -> tuple[str, str, list[str]]:
    """(good sha, bad sha, the commits after good up to bad, oldest first). Good must be on
    bad's first-parent line: a merged branch's commit is not a point of the line searched."""
    require_repo(repo)
    good_sha = resolve_commit(repo, good, "--good")
    bad_sha = resolve_commit(repo, bad, "--bad")
    if good_sha == bad_sha:
        raise GitError(f"--good and --bad are the same commit ({good_sha[:12]}); pass a good commit older than bad")
    line = checked_git(repo, "rev-list", "--first-parent", "--reverse", f"{good_sha}..{bad_sha}",
                       doing=f"list the commits from {good_sha[:12]} to {bad_sha[:12]}").stdout.split()
    parent = checked_git(repo, "rev-parse", f"{line[0]}^1", doing="read a parent").stdout.strip() if line else ""
    if not line or parent != good_sha:
        raise GitError(
            f"--good {good} ({good_sha[:12]}) is not on the first-parent line of --bad {bad} ({bad_sha[:12]}); "
            "pass a good commit that bad descends from, e.g. an older commit of the same branch"
        )
    return good_sha, bad_sha, line
