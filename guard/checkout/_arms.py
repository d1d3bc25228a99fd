"""The two arms of a run: head, and base (by default where head left the target branch)."""

from __future__ import annotations

from pathlib import Path

from guard._errors import GitError
from guard._git import find_branch, merge_base, require_repo, resolve_commit
from guard.checkout._models import ArmRef


def resolve_arms(repo: Path, base: str | None, head: str, target_branch: str) -> tuple[ArmRef, ArmRef]:
    """Resolve head, and base (default: merge-base of head with the target branch), to commits."""
    require_repo(repo)
    head_sha = resolve_commit(repo, head)
    if base is None:
        target, target_sha = find_branch(repo, target_branch)
        base_sha = merge_base(repo, head_sha, target_sha, head, target)
        base_ref = f"merge-base with {target}"
    else:
        base_sha = resolve_commit(repo, base)
        base_ref = base
    return ArmRef(name="base", ref=base_ref, sha=base_sha), ArmRef(name="head", ref=head, sha=head_sha)


def require_distinct(base: ArmRef, head: ArmRef) -> None:
    """A run compares two commits: a head that is its base has nothing to compare."""
    if base.sha == head.sha:
        raise GitError(
            f"base ({base.ref}) and head ({head.ref}) are the same commit, {head.sha[:12]}: there is nothing to "
            "compare. Give the pull request's head, or measure this runner's noise on one commit with "
            "`guard calibrate --ref REF`"
        )
