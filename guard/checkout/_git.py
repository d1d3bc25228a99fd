"""Git plumbing for the checkout stage: resolve refs, diff two commits, manage worktrees.

Every git call takes an argument list (never a shell string) and every failure a user can
cause becomes a GitError that says what was wrong, where, and what to do.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from guard._errors import GitError
from guard._git import run_git
from guard.checkout._models import ArmRef


def resolve_arms(repo: Path, base: str | None, head: str, target_branch: str) -> tuple[ArmRef, ArmRef]:
    """Resolve head, and base (default: merge-base of head with the target branch), to commits."""
    require_repo(repo)
    head_sha = resolve_commit(repo, head)
    if base is None:
        target, target_sha = _find_target_branch(repo, target_branch)
        base_sha = _merge_base(repo, head, head_sha, target, target_sha)
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


def uncommitted_changes(repo: Path) -> list[str]:
    """Tracked files the working tree changed: the guard builds commits, so it leaves them out."""
    proc = _git_checked(repo, "status", "--porcelain", "-z", "--untracked-files=no",
                        doing="check the working tree for uncommitted changes")
    return [entry[3:] for entry in proc.stdout.split("\0") if len(entry) > 3]


def changed_files(repo: Path, base_sha: str, head_sha: str) -> list[str]:
    """Paths changed on head since it left base (`git diff --name-only base...head`)."""
    # -z: names arrive unquoted even with odd characters; --no-renames: a move lists both paths
    proc = _git_checked(
        repo, "diff", "--name-only", "--no-renames", "-z", f"{base_sha}...{head_sha}",
        doing=f"list files changed between {base_sha[:12]} and {head_sha[:12]}",
    )
    return [name for name in proc.stdout.split("\0") if name]


def commit_subject(repo: Path, sha: str) -> str:
    """First line of the commit message: the change, in its author's words."""
    proc = _git_checked(repo, "log", "-1", "--format=%s", sha, doing=f"read the message of {sha[:12]}")
    return proc.stdout.strip()


def require_repo(repo: Path) -> None:
    if not repo.is_dir():
        raise GitError(f"{repo}: no such directory; pass the path of a git repository")
    proc = _git(repo, "rev-parse", "--git-dir")
    if proc.returncode != 0:
        raise GitError(
            f"{repo}: not a git repository ({_first_line(proc.stderr)}); "
            "pass the path of the repository to compare"
        )


def resolve_commit(repo: Path, ref: str) -> str:
    """Full sha of the commit `ref` names."""
    if not ref or ref.startswith("-"):
        # a leading dash would be read by git as an option, not a ref
        raise GitError(f"ref {ref!r} is not a valid ref name; pass a branch, tag or commit sha")
    proc = _git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    sha = proc.stdout.strip()
    if proc.returncode != 0 or not sha:
        raise GitError(f"ref '{ref}' not found in {repo}; fetch it or pass an existing ref")
    return sha


def add_worktree(repo: Path, dest: Path, sha: str) -> str:
    """Check `sha` out, detached, at `dest` (which must not exist yet); returns git's output."""
    proc = _git_checked(
        repo, "worktree", "add", "--detach", str(dest), sha,
        doing=f"check out {sha[:12]} into {dest}",
    )
    return proc.stdout + proc.stderr


def prune_worktrees(repo: Path) -> None:
    """Forget worktrees whose folders were deleted, so their paths can be used again."""
    _git_checked(repo, "worktree", "prune", doing="prune stale worktrees")


def worktree_head(worktree: Path) -> str | None:
    """The commit checked out in `worktree`, or None if it is no longer a working checkout."""
    if not worktree.is_dir():
        return None
    proc = _git(worktree, "rev-parse", "--verify", "--quiet", "HEAD")
    return proc.stdout.strip() if proc.returncode == 0 else None


def _find_target_branch(repo: Path, branch: str) -> tuple[str, str]:
    """(name to show, sha) of the branch the default base comes from: local, else origin's copy."""
    candidates = [(f"refs/heads/{branch}", branch), (f"refs/remotes/origin/{branch}", f"origin/{branch}")]
    if not branch.startswith("-"):
        # also accept a ref spelled out in full, e.g. "origin/main" or "upstream/main"
        candidates.append((branch, branch))
    for full_ref, shown in candidates:
        proc = _git(repo, "rev-parse", "--verify", "--quiet", f"{full_ref}^{{commit}}")
        if proc.returncode == 0 and proc.stdout.strip():
            return shown, proc.stdout.strip()
    raise GitError(
        f"target branch '{branch}' not found in {repo}: neither a local branch '{branch}' "
        f"nor 'origin/{branch}' exists; fetch it (git fetch origin {branch}) or pass a base ref explicitly"
    )


def _merge_base(repo: Path, head: str, head_sha: str, target: str, target_sha: str) -> str:
    proc = _git(repo, "merge-base", head_sha, target_sha)
    sha = proc.stdout.strip()
    if proc.returncode == 0 and sha:
        return sha
    if proc.returncode == 1:
        hint = "pass a base ref explicitly"
        if _git(repo, "rev-parse", "--is-shallow-repository").stdout.strip() == "true":
            # CI checkouts are often shallow, which hides the common ancestor
            hint = "the clone is shallow; fetch more history (git fetch --unshallow) or pass a base ref explicitly"
        raise GitError(f"'{head}' and '{target}' have no common ancestor in {repo}; {hint}")
    raise GitError(f"git merge-base of '{head}' and '{target}' failed in {repo}: {_first_line(proc.stderr)}")


def _git_checked(repo: Path, *args: str, doing: str) -> subprocess.CompletedProcess[str]:
    proc = _git(repo, *args)
    if proc.returncode != 0:
        said = proc.stderr.strip() or f"exit code {proc.returncode}"
        raise GitError(f"could not {doing} in {repo}: git said: {said}")
    return proc


_git = run_git


def _first_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[0] if lines else "no message"


def persisted_credentials(repo: Path) -> list[str]:
    """Config keys of the repository that hold an HTTP credential (actions/checkout's
    `http.<url>.extraheader` when persist-credentials is left on). The arms' worktrees share
    this config, so the pull request's code could read them."""
    proc = _git(repo, "config", "--local", "--name-only", "--get-regexp", r"^http\..*extraheader$")
    return proc.stdout.split() if proc.returncode == 0 else []
