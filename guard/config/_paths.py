"""Paths a config names: relative, inside their root, and still inside once symlinks are followed."""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath

from guard._errors import ConfigError

# letters, digits and . _ / - only: the path is shown in the comment and passed to git as is
_PATH_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._/-]*$")
_MODULE_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


def relative_path_problem(value: str, suffix: str) -> str | None:
    """Why `value` is not a path relative to its root ending in `suffix`, or None when it is."""
    parts = PurePosixPath(value).parts
    if not _PATH_RE.match(value) or ".." in parts or "//" in value or not value.endswith(suffix):
        return (f"a relative path to a {suffix} file inside the repository, of letters, digits and . _ / - "
                f"(no leading /, no '..')")
    return None


def entry_problem(entry: str) -> str | None:
    """Why `entry` is neither 'pkg.module:function' nor 'path/file.py:function', or None."""
    target, _, function = entry.rpartition(":")
    if not target or not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", function):
        return "'pkg.module:function' or 'path/file.py:function'"
    if is_file_entry(target):
        if relative_path_problem(target, ".py"):
            return "'path/file.py:function' with a relative path inside the repository (no leading /, no '..')"
        return None
    if not _MODULE_RE.match(target):
        return "'pkg.module:function' (a dotted module name) or 'path/file.py:function'"
    return None


def is_file_entry(target: str) -> bool:
    """The harness loads a target with a '/' or ending in .py as a file, else imports it as a module."""
    return target.endswith(".py") or "/" in target


def resolve_inside(root: Path, relative: str, key: str, what: str = "its folder") -> Path:
    """`root / relative` with symlinks followed, refused unless it still lies inside `root`."""
    root = root.resolve()
    path = (root / relative).resolve()
    if not path.is_relative_to(root):
        raise ConfigError(
            f"{key}: {relative} leads outside {what}, {root} (through a symlink); name a file inside it"
        )
    return path


def check_entry(entry: str, worktree: Path) -> None:
    """A file entry must lie inside the arm's worktree once its symlinks are followed; a module
    entry is imported by name, from the arm's packages or its worktree."""
    target = entry.rpartition(":")[0]
    if is_file_entry(target):
        resolve_inside(worktree, target, "workload.entry", "the arm's worktree")
