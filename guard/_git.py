"""One way to run git: an argument list, text out, and a clear error when git is missing."""

from __future__ import annotations

import subprocess
from pathlib import Path

from guard._errors import GitError


def run_git(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            ["git", "-C", str(repo), *args],
            capture_output=True, text=True, encoding="utf-8", errors="replace", check=False,
        )
    except FileNotFoundError:
        raise GitError("git not found on PATH; install git or add it to PATH") from None


def read_git_bytes(repo: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    """The same, with stdout as bytes: a file's contents, decoded (or refused) by the caller."""
    try:
        return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, check=False)
    except FileNotFoundError:
        raise GitError("git not found on PATH; install git or add it to PATH") from None
