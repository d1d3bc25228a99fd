"""The git calls capture-change detection needs: check commits, diff them, read a file at a commit."""

from __future__ import annotations

from pathlib import Path

from guard._errors import GitError
from guard._git import run_git

# Pin every option a user's git config could change, so the parser always sees the same format.
DIFF_ARGS = (
    "-c", "core.quotePath=false",
    "diff", "--unified=0", "--inter-hunk-context=0", "--no-color", "--no-ext-diff", "--no-textconv",
    "--find-renames", "--no-relative", "--submodule=short", "--src-prefix=a/", "--dst-prefix=b/",
)


def resolve(repo: Path, rev: str, what: str) -> str:
    """Full sha of the commit `rev` names in `repo`."""
    if not repo.is_dir():
        raise GitError(f"{repo}: no such directory; pass the path of a git repository")
    if not rev or rev.startswith("-"):
        # a leading dash would be read as an option
        raise GitError(f"{what} {rev!r} is not a commit; pass a commit sha or branch name")
    proc = _git(repo, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}")
    if proc.returncode != 0 or not proc.stdout.strip():
        if _git(repo, "rev-parse", "--git-dir").returncode != 0:
            raise GitError(f"{repo}: not a git repository; pass the path of the repository to compare")
        raise GitError(f"{what} '{rev}' not found in {repo}; fetch it or pass an existing commit")
    return proc.stdout.strip()


def merge_base(repo: Path, base_sha: str, head_sha: str) -> str:
    """The commit `base...head` diffs from: where head left base."""
    proc = _git(repo, "merge-base", base_sha, head_sha)
    if proc.returncode != 0 or not proc.stdout.strip():
        raise GitError(
            f"{base_sha[:12]} and {head_sha[:12]} have no common ancestor in {repo}, so there is no "
            "'base...head' diff; if the clone is shallow, fetch more history (git fetch --unshallow)"
        )
    return proc.stdout.strip()


def diff_text(repo: Path, base_sha: str, head_sha: str) -> str:
    proc = _git(repo, *DIFF_ARGS, f"{base_sha}...{head_sha}")
    if proc.returncode != 0:
        said = proc.stderr.strip() or f"exit code {proc.returncode}"
        raise GitError(f"could not diff {base_sha[:12]}...{head_sha[:12]} in {repo}: git said: {said}")
    return proc.stdout


def file_at(repo: Path, sha: str, path: str) -> str | None:
    """Text of `path` at commit `sha`, or None when it is not a readable file there."""
    proc = _git(repo, "cat-file", "blob", f"{sha}:{path}")
    return proc.stdout if proc.returncode == 0 else None


_git = run_git
