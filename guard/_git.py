"""Every git call of the guard: an argument list (never a shell string), text out, and one
error style: a GitError that says what was wrong, where, and what to do."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import NamedTuple

from guard._errors import GitError

# Pin every option a user's git config could change, so the diff parser always sees one format.
DIFF_ARGS = (
    "-c", "core.quotePath=false",
    "diff", "--unified=0", "--inter-hunk-context=0", "--no-color", "--no-ext-diff", "--no-textconv",
    "--find-renames", "--no-relative", "--submodule=short", "--src-prefix=a/", "--dst-prefix=b/",
)
_NO_GIT = "git not found on PATH; install git or add it to PATH"
# Repositories the guard makes itself commit at one date: the same files give the same shas everywhere, every day.
MADE_AT = "2026-01-01T00:00:00+00:00"


def run_git(
    repo: Path, *args: str, env: dict[str, str] | None = None, timeout_s: float | None = None
) -> subprocess.CompletedProcess[str]:
    """`env`: variables set for this call, over the process's own; `timeout_s`: for a call over
    the network, after which it is a GitError."""
    try:
        return subprocess.run(
            ["git", "-C", str(repo), *args],
            capture_output=True, text=True, encoding="utf-8", errors="replace", check=False,
            env=None if env is None else os.environ | env, timeout=timeout_s,
        )
    except FileNotFoundError:
        raise GitError(_NO_GIT) from None
    except subprocess.TimeoutExpired:
        raise GitError(f"git {args[0]} took over {timeout_s:g} s") from None


def read_git_bytes(repo: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    """The same, with stdout as bytes: a file's contents, decoded (or refused) by the caller."""
    try:
        return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, check=False)
    except FileNotFoundError:
        raise GitError(_NO_GIT) from None


def checked_git(
    repo: Path, *args: str, doing: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """run_git, where a failure is a GitError: "could not <doing> in <repo>: git said: ..."."""
    proc = run_git(repo, *args, env=env)
    if proc.returncode != 0:
        said = proc.stderr.strip() or f"exit code {proc.returncode}"
        raise GitError(f"could not {doing} in {repo}: git said: {said}")
    return proc


def made_git(repo: Path, *args: str, author: str, email: str) -> str:
    """git in a repository the guard makes itself (the demo's, the validation suite's): commits
    by `author` at MADE_AT; its output stripped; a failure is a GitError."""
    env = {"GIT_AUTHOR_NAME": author, "GIT_AUTHOR_EMAIL": email, "GIT_COMMITTER_NAME": author,
           "GIT_COMMITTER_EMAIL": email, "GIT_AUTHOR_DATE": MADE_AT, "GIT_COMMITTER_DATE": MADE_AT}
    return checked_git(repo, *args, doing=f"run git {args[0]}", env=env).stdout.strip()


# ---- the repository and its commits ------------------------------------------------------------


def require_repo(repo: Path) -> None:
    if not repo.is_dir():
        raise GitError(f"{repo}: no such directory; pass the path of a git repository")
    proc = run_git(repo, "rev-parse", "--git-dir")
    if proc.returncode != 0:
        raise GitError(
            f"{repo}: not a git repository ({_first_line(proc.stderr)}); "
            "pass the path of the repository to compare"
        )


def common_dir(repo: Path) -> Path | None:
    """The repository's own git folder (shared by its worktrees), or None outside a repository."""
    proc = run_git(repo, "rev-parse", "--path-format=absolute", "--git-common-dir")
    found = proc.stdout.strip()
    return Path(found) if proc.returncode == 0 and found else None


def resolve_commit(repo: Path, ref: str, what: str = "ref") -> str:
    """Full sha of the commit `ref` names; `what` names it in the error ("ref", "base commit")."""
    if not ref or ref.startswith("-"):
        # a leading dash would be read by git as an option, not a ref
        raise GitError(f"{what} {ref!r} is not a valid ref name; pass a branch, tag or commit sha")
    proc = run_git(repo, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}")
    sha = proc.stdout.strip()
    if proc.returncode != 0 or not sha:
        raise GitError(f"{what} '{ref}' not found in {repo}; fetch it or pass an existing branch, tag or commit")
    return sha


def merge_base(repo: Path, one: str, other: str, one_name: str | None = None, other_name: str | None = None) -> str:
    """The commit `one...other` diffs from: where the two histories parted."""
    proc = run_git(repo, "merge-base", one, other)
    sha = proc.stdout.strip()
    if proc.returncode == 0 and sha:
        return sha
    names = f"'{one_name or one[:12]}' and '{other_name or other[:12]}'"
    if proc.returncode == 1:
        hint = "pass a base ref explicitly"
        if run_git(repo, "rev-parse", "--is-shallow-repository").stdout.strip() == "true":
            # CI checkouts are often shallow, which hides the common ancestor
            hint = "the clone is shallow; fetch more history (git fetch --unshallow) or pass a base ref explicitly"
        raise GitError(f"{names} have no common ancestor in {repo}, so there is no 'base...head' diff; {hint}")
    raise GitError(f"could not find the merge base of {names} in {repo}: git said: {_first_line(proc.stderr)}")


def find_branch(repo: Path, branch: str) -> tuple[str, str]:
    """(name to show, sha) of `branch`: the local branch, else origin's copy, else a full ref name."""
    candidates = [(f"refs/heads/{branch}", branch), (f"refs/remotes/origin/{branch}", f"origin/{branch}")]
    if not branch.startswith("-"):
        # also accept a ref spelled out in full, e.g. "origin/main" or "upstream/main"
        candidates.append((branch, branch))
    for full_ref, shown in candidates:
        proc = run_git(repo, "rev-parse", "--verify", "--quiet", f"{full_ref}^{{commit}}")
        if proc.returncode == 0 and proc.stdout.strip():
            return shown, proc.stdout.strip()
    raise GitError(
        f"target branch '{branch}' not found in {repo}: neither a local branch '{branch}' "
        f"nor 'origin/{branch}' exists; fetch it (git fetch origin {branch}) or pass a base ref explicitly"
    )


def commit_subject(repo: Path, sha: str) -> str:
    """First line of the commit message: the change, in its author's words."""
    return checked_git(repo, "log", "-1", "--format=%s", sha, doing=f"read the message of {sha[:12]}").stdout.strip()


def diff_text(repo: Path, base_sha: str, head_sha: str) -> str:
    """`git diff base...head` in the one format the capture-change parser reads."""
    return checked_git(repo, *DIFF_ARGS, f"{base_sha}...{head_sha}",
                       doing=f"diff {base_sha[:12]}...{head_sha[:12]}").stdout


def file_at(repo: Path, sha: str, path: str) -> str | None:
    """Text of `path` at commit `sha`, or None when it is not a readable file there."""
    proc = run_git(repo, "cat-file", "blob", f"{sha}:{path}")
    return proc.stdout if proc.returncode == 0 else None


# ---- the working tree and the worktrees of the arms ---------------------------------------------


def uncommitted_changes(repo: Path) -> list[str]:
    """Tracked files the working tree changed: the guard builds commits, so it leaves them out."""
    proc = checked_git(repo, "status", "--porcelain", "-z", "--untracked-files=no",
                       doing="check the working tree for uncommitted changes")
    return [entry[3:] for entry in proc.stdout.split("\0") if len(entry) > 3]


class TreeSize(NamedTuple):
    """What a commit's tree holds, as git records it: its files and links, and their bytes."""

    files: int
    bytes: int


def tree_size(repo: Path, sha: str) -> TreeSize:
    """The files (blobs: files and links) of `sha`'s whole tree and their sizes, from git's
    objects, before anything is written: a pack of a megabyte can hold a gigabyte of zeros."""
    proc = checked_git(repo, "ls-tree", "-r", "-l", "-z", "--full-tree", sha, doing=f"list the tree of {sha[:12]}")
    files = size = 0
    for entry in proc.stdout.split("\0"):
        fields = entry.split("\t", 1)[0].split()
        if len(fields) == 4 and fields[1] == "blob" and fields[3].isdigit():  # a submodule is a commit: nothing
            files += 1
            size += int(fields[3])
    return TreeSize(files, size)


def add_worktree(repo: Path, dest: Path, sha: str) -> str:
    """Check `sha` out, detached, at `dest` (which must not exist yet); returns git's output."""
    proc = checked_git(repo, "worktree", "add", "--detach", str(dest), sha, doing=f"check out {sha[:12]} into {dest}")
    return proc.stdout + proc.stderr


def prune_worktrees(repo: Path) -> None:
    """Forget worktrees whose folders were deleted, so their paths can be used again."""
    checked_git(repo, "worktree", "prune", doing="prune stale worktrees")


def worktree_head(worktree: Path) -> str | None:
    """The commit checked out in `worktree`, or None if it is no longer a working checkout."""
    if not worktree.is_dir():
        return None
    proc = run_git(worktree, "rev-parse", "--verify", "--quiet", "HEAD")
    return proc.stdout.strip() if proc.returncode == 0 else None


def persisted_credentials(repo: Path) -> list[str]:
    """Config keys of the repository that hold an HTTP credential (actions/checkout's
    `http.<url>.extraheader` when persist-credentials is left on). The arms' worktrees share
    this config, so the pull request's code could read them."""
    proc = run_git(repo, "config", "--local", "--name-only", "--get-regexp", r"^http\..*extraheader$")
    return proc.stdout.split() if proc.returncode == 0 else []


def _first_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[0] if lines else "no message"
