"""The build cache: its layout, who owns what in it, and the one rule for reusing a build.

The cache dir (default: beside the repository's git data, see default_cache_dir) holds the
mark CACHE_MARK_NAME, written when the guard first builds there: `guard clean` removes
builds only from a folder so marked. One folder per (commit, build config) under it:

    <sha12>-<config key>/      the guard's
        lock                   the guard's: shared while a run uses the build, exclusive to (re)build it
        marker.json            the guard's: written last; the commit, the config key, and the
                               manifests of tree/ and venv/ as the build left them
        build.log              the guard's: what the build printed (its commands only get the fd)
        tree/                  the commit, checked out detached: a git worktree of the repository
        venv/                  method "venv" only: the arm's environment

The folder, the lock and the marker belong to the guard's user and nobody else may write
them. tree/ and venv/ are the only paths that the build's commands, which are the pull
request's code, need to write, so they alone are handed to build.user while its install
runs (when the guard is root), and sealed, the guard's and read-only, before write_record
takes their manifests.

A build is reused only when all of this holds, checked in this order:
- the folder and marker.json are the guard user's and no other user may write them: a
  marker that someone else could have written proves nothing;
- the marker is this layout's, for this commit and this config key;
- tree/ and venv/ match their manifests byte for byte (see _manifest): tracked files,
  untracked and ignored ones, the build's outputs, tree/.git itself;
- git says the worktree's HEAD is the commit (tree/.git being verified, git reads this
  repository's record of the worktree, not one the tree points it to);
- method "docker": the engine's tag for the folder still names the image id the marker
  records, labelled with the commit and the key (guard.checkout._docker.check_image).
Anything else rebuilds the folder from nothing.

What the manifests do not cover: the interpreter, and the packages the venv sees from
outside it (the creating interpreter's, torch among them). Those are not in the cache; they
must be kept out of the pull request's reach by the user it runs as.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from guard._git import common_dir, worktree_head
from guard.checkout._manifest import Manifest, first_difference, remove_path, take_manifest

# bump when the build procedure or this layout changes, so folders made the old way are not reused
LAYOUT_VERSION = 2
LOCK_NAME = "lock"
MARKER_NAME = "marker.json"
LOG_NAME = "build.log"
TREE_NAME = "tree"
VENV_NAME = "venv"
CACHE_MARK_NAME = "regression-guard-cache"
_CACHE_MARK_TEXT = "Builds of regression-guard. `guard clean` removes them; the guard rebuilds what it needs.\n"

_FOLDER_MODE = 0o755  # others may enter it to reach tree/ and venv/, never write in it
_MARKER_MODE = 0o644
_NOT_OURS = stat.S_IWGRP | stat.S_IWOTH


class BuildRecord(BaseModel):
    """marker.json: what the build left, written once it succeeded."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    layout: int
    sha: str
    key: str  # the folder's name: the commit's short sha and the config key
    build_s: float
    tree: Manifest
    venv: Manifest
    image: str | None = None  # method "docker": the id of the arm's image (see guard.checkout._docker)


StaleWhy = Literal["absent", "unfinished", "untrusted", "other", "modified", "not_checked_out"]


@dataclass(frozen=True)
class Stale:
    """Why a folder's build cannot be reused; `path` (relative to the folder) for "modified"."""

    why: StaleWhy
    path: str | None = None


def default_cache_dir(repo: Path) -> Path:
    """Arm builds live beside the repository's git data, so they go when it goes."""
    common = common_dir(repo)
    return common / "regression-guard" if common else repo / ".regression-guard"


def mark_cache(cache_dir: Path) -> None:
    """Say in `cache_dir` that the guard builds there, once: what `guard clean` looks for."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(cache_dir / CACHE_MARK_NAME, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                     _MARKER_MODE)
    except FileExistsError:
        return
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        file.write(_CACHE_MARK_TEXT)


def prepare_folder(folder: Path) -> None:
    """Make `folder` a directory of the guard's user that only it may write. Something else
    there (a link, another user's folder) is removed first; what is in a folder that others
    could write is left for check_build to judge, and so is rebuilt."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    try:
        found = folder.lstat()
    except FileNotFoundError:
        found = None
    if found is not None and not (stat.S_ISDIR(found.st_mode) and found.st_uid == os.geteuid()):
        remove_path(folder)
    folder.mkdir(mode=_FOLDER_MODE, exist_ok=True)
    os.chmod(folder, _FOLDER_MODE)  # mkdir's mode is narrowed by the umask, never widened


def clear_folder(folder: Path) -> None:
    """Remove everything in `folder` but its lock, which other runs may be waiting on."""
    for entry in folder.iterdir():
        if entry.name != LOCK_NAME:
            remove_path(entry)


def check_build(folder: Path, sha: str) -> Stale | None:
    """None when the build in `folder` is exactly as it was left for commit `sha`; else why not."""
    marker = folder / MARKER_NAME
    try:
        fd = os.open(marker, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return Stale("unfinished" if (folder / TREE_NAME).exists() else "absent")
    except OSError:
        return Stale("untrusted")  # a link, or unreadable
    with os.fdopen(fd, "rb") as file:
        if not (_guard_owned(os.fstat(fd)) and _guard_owned(folder.lstat())):
            return Stale("untrusted")
        try:
            record = BuildRecord.model_validate(json.loads(file.read()))
        except (ValueError, ValidationError):
            return Stale("other")
    if (record.layout, record.sha, record.key) != (LAYOUT_VERSION, sha, folder.name):
        return Stale("other")
    for part, recorded in ((TREE_NAME, record.tree), (VENV_NAME, record.venv)):
        try:
            found = take_manifest(folder / part, recorded)
        except OSError:
            return Stale("modified", part)
        changed = first_difference(recorded, found)
        if changed is not None:
            return Stale("modified", f"{part}/{changed}")
    if worktree_head(folder / TREE_NAME) != sha:
        return Stale("not_checked_out")
    return None


def write_record(folder: Path, sha: str, build_s: float, image: str | None = None) -> None:
    """Take the manifests of what the build left and write the marker: whole, then renamed,
    so a crash never leaves one that looks finished."""
    record = BuildRecord(
        layout=LAYOUT_VERSION, sha=sha, key=folder.name, build_s=build_s,
        tree=take_manifest(folder / TREE_NAME), venv=take_manifest(folder / VENV_NAME), image=image,
    )
    partial = folder / f"{MARKER_NAME}.partial"
    partial.unlink(missing_ok=True)
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, _MARKER_MODE)
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        os.fchmod(fd, _MARKER_MODE)
        # the json module, not pydantic's: it keeps file names that are not UTF-8 exactly
        json.dump(record.model_dump(), file)
    os.replace(partial, folder / MARKER_NAME)


def recorded_image(folder: Path) -> str | None:
    """The image id in the marker of `folder`, once check_build has found the marker sound."""
    with (folder / MARKER_NAME).open("rb") as file:
        return BuildRecord.model_validate(json.loads(file.read())).image


def discard_build(folder: Path) -> None:
    """Remove the worktree and the venv of a build that failed; its log stays."""
    for part in (TREE_NAME, VENV_NAME):
        if (folder / part).exists() or (folder / part).is_symlink():
            remove_path(folder / part)


def _guard_owned(found: os.stat_result) -> bool:
    return found.st_uid == os.geteuid() and not found.st_mode & _NOT_OURS


