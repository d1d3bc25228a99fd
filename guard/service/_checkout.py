"""The service's clone of a repository, fetched before each job: one clone per repository
under the work dir, one fetch at a time (a file lock), the shas checked to be commits."""

from __future__ import annotations

import base64
import fcntl
from pathlib import Path

from guard._errors import GitError
from guard._git import run_git
from guard._types import is_repo_name

_FETCH = ["+refs/heads/*:refs/remotes/origin/*", "+refs/pull/*/head:refs/remotes/origin/pull/*"]
GIT_TIMEOUT_S = 600.0


def fetch_clone(work_dir: Path, repo: str, clone_url: str, shas: list[str], token: str | None = None) -> Path:
    """The clone of `repo`, holding every commit in `shas`."""
    if not is_repo_name(repo):
        raise GitError(f"{repo!r} is not OWNER/NAME")
    clone = work_dir / "repos" / repo
    clone.parent.mkdir(parents=True, exist_ok=True)
    env = _env(token if clone_url.startswith("https://") else None)
    with open(clone.parent / f".{clone.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (clone / ".git").is_dir():
            _git(clone.parent, "clone", "--quiet", "--no-checkout", "--", clone_url, clone.name, env=env)
        _git(clone, "fetch", "--quiet", "--force", "origin", *_FETCH, env=env)
        for sha in shas:
            if not _has(clone, sha):  # not on a branch or pull request ref: ask for it by name
                _git(clone, "fetch", "--quiet", "origin", sha, env=env)
            if not _has(clone, sha):
                raise GitError(f"commit {sha[:12]} is not in {repo} as {clone_url} serves it")
    return clone


def first_parent_position(clone: Path, sha: str) -> tuple[int | None, str]:
    """The commit's position on its first-parent line (its count of first-parent ancestors,
    itself included) and its subject; (None, "") where git cannot say."""
    count = run_git(clone, "rev-list", "--count", "--first-parent", sha, timeout_s=GIT_TIMEOUT_S)
    subject = run_git(clone, "log", "-1", "--format=%s", sha, timeout_s=GIT_TIMEOUT_S)
    order = int(count.stdout) if count.returncode == 0 and count.stdout.strip().isdigit() else None
    return order, subject.stdout.strip() if subject.returncode == 0 else ""


def _has(clone: Path, sha: str) -> bool:
    return run_git(clone, "cat-file", "-e", f"{sha}^{{commit}}", timeout_s=GIT_TIMEOUT_S).returncode == 0


def _env(token: str | None) -> dict[str, str]:
    env = {"GIT_TERMINAL_PROMPT": "0"}
    if token:  # through the environment: a command line is readable by every user of the host
        basic = base64.b64encode(f"x-access-token:{token}".encode()).decode()
        env |= {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "http.extraHeader",
                "GIT_CONFIG_VALUE_0": f"Authorization: Basic {basic}"}
    return env


def _git(where: Path, *args: str, env: dict[str, str]) -> None:
    """A network call; its error names no path of this host (it is posted in the job's Check Run)."""
    done = run_git(where, *args, env=env, timeout_s=GIT_TIMEOUT_S)
    if done.returncode != 0:
        raise GitError(f"git {' '.join(a for a in args if not a.startswith('/'))[:200]} failed: "
                       f"{done.stderr.strip()[-500:]}")
