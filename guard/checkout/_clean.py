"""`guard clean`: remove the builds (worktrees and venvs, and for method "docker" the arm's
image, by its tag) the guard made in a cache dir.

Only a cache dir that holds the guard's mark is touched, and in it only folders laid out as
the guard lays out a build: named `<sha12>-<config key>`, the guard user's, holding the
guard's lock file. Anything else there is left and listed. A build another run holds
(measures or builds) is left too: its lock says so. With `unused_for_s`, so is a build used
more recently than that: every run that builds or reuses a build sets its lock file's
modification time, which only the guard's user can write.
"""

from __future__ import annotations

import fcntl
import os
import re
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path

from guard._errors import GuardError
from guard._git import prune_worktrees, require_repo
from guard.checkout._cache import CACHE_MARK_NAME, LOCK_NAME, TREE_NAME, recorded_image
from guard.checkout._docker import remove_image
from guard.checkout._manifest import remove_path

_BUILD_NAME = re.compile(r"^[0-9a-f]{12}-[0-9a-f]{10}$")


class CleanError(GuardError):
    """A cache dir `guard clean` will not touch."""


@dataclass
class Cleaning:
    cache_dir: Path
    builds: list[Path] = field(default_factory=list)  # removed, or to remove on a dry run
    in_use: list[Path] = field(default_factory=list)  # builds another run holds: left
    recent: list[Path] = field(default_factory=list)  # builds used within `unused_for_s`: left
    others: list[Path] = field(default_factory=list)  # not the guard's: left
    removed_cache_dir: bool = False


def clean(repo: Path, cache_dir: Path, dry_run: bool = False, unused_for_s: float | None = None) -> Cleaning:
    """Remove the guard's builds from `cache_dir` (the cache of `repo`), and the cache dir
    once it holds nothing else; then git forgets their worktrees. With `dry_run`, only list.
    With `unused_for_s`, only the builds no run has used for that long."""
    require_repo(repo)
    cleaning = Cleaning(cache_dir=cache_dir)
    if not cache_dir.exists() and not cache_dir.is_symlink():
        return cleaning
    if cache_dir.is_symlink() or not cache_dir.is_dir():
        raise CleanError(f"{cache_dir} is not a folder; pass the --cache-dir the guard built in")
    if not (cache_dir / CACHE_MARK_NAME).is_file():
        raise CleanError(
            f"{cache_dir} holds no {CACHE_MARK_NAME} mark, so the guard did not make it (or made it before it "
            "marked its caches); nothing was removed. Pass the --cache-dir `guard run` used, or delete it yourself"
        )
    for entry in sorted(cache_dir.iterdir()):
        if entry.name == CACHE_MARK_NAME:
            continue
        if not _is_build(entry):
            cleaning.others.append(entry)
        elif unused_for_s is not None and time.time() - (entry / LOCK_NAME).lstat().st_mtime < unused_for_s:
            cleaning.recent.append(entry)
        elif dry_run:
            cleaning.builds.append(entry)
        elif _remove_unless_held(entry):
            cleaning.builds.append(entry)
        else:
            cleaning.in_use.append(entry)
    if not dry_run:
        prune_worktrees(repo)  # the removed builds' worktrees: git forgets them
        if not cleaning.others and not cleaning.in_use and not cleaning.recent:
            (cache_dir / CACHE_MARK_NAME).unlink()
            cache_dir.rmdir()
            cleaning.removed_cache_dir = True
    return cleaning


def _is_build(entry: Path) -> bool:
    try:
        folder, lock = entry.lstat(), (entry / LOCK_NAME).lstat()
    except OSError:
        return False
    return (
        bool(_BUILD_NAME.match(entry.name))
        and stat.S_ISDIR(folder.st_mode) and folder.st_uid == os.geteuid()
        and stat.S_ISREG(lock.st_mode) and lock.st_uid == os.geteuid()
    )


def _remove_unless_held(build: Path) -> bool:
    """Remove `build` while holding its lock exclusively; False when another run holds it."""
    fd = os.open(build / LOCK_NAME, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        _remove_image_of(build)
        # the worktree first, the lock last: a run that starts meanwhile finds no build and rebuilds
        for entry in sorted(build.iterdir(), key=lambda p: (p.name == LOCK_NAME, p.name != TREE_NAME)):
            remove_path(entry)
        build.rmdir()
        return True
    finally:
        os.close(fd)


def _remove_image_of(build: Path) -> None:
    """The image a docker build's marker records; only ever the one the guard's tag for the
    build names, so a marker that lies can point at nothing else."""
    try:
        image = recorded_image(build)
    except (OSError, ValueError):  # no marker (an unfinished build), or not one of this layout
        return
    if image is not None:
        remove_image(image, build.name)
