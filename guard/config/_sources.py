"""Where a config and the files it names are read from: a commit, through git, or a folder
outside the pull request's checkout. Either way a file is a regular file of bounded size."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Protocol

from pydantic import BaseModel

from guard._errors import ConfigError
from guard._git import read_git_bytes, run_git
from guard._types import CommitSha
from guard.config._paths import resolve_inside

# guard.toml and a thresholds file are a few hundred bytes; a reference-tokens file holds
# (warmup + steps) x batch size ids per batch size
MAX_CONFIG_BYTES = 1 << 20
MAX_REFERENCE_BYTES = 64 << 20

_REGULAR_MODES = ("100644", "100755")


class Files(Protocol):
    def read(self, path: str, key: str, limit_bytes: int) -> bytes | None:
        """The contents of `path` (None: there is no such file); `key` names it in messages."""
        ...

    def shown(self, path: str) -> str:
        """`path` as a message names it: where it was read from."""
        ...


class CommitFiles(BaseModel):
    """The files of one commit, as git stores them: what the work tree holds does not matter."""

    repo: Path
    sha: CommitSha

    def shown(self, path: str) -> str:
        return f"{path} (commit {self.sha[:12]})"

    def read(self, path: str, key: str, limit_bytes: int) -> bytes | None:
        listed = read_git_bytes(self.repo, "ls-tree", "--full-tree", "-l", "-z", self.sha, "--", path)
        if listed.returncode != 0:
            said = listed.stderr.decode("utf-8", "replace").strip()
            raise ConfigError(f"{key}: could not list {self.shown(path)}: git said: {said}")
        entry = next((e for e in listed.stdout.split(b"\0") if e.endswith(b"\t" + path.encode())), None)
        if entry is None:
            return None  # a path through a symlinked folder is not in the tree either
        mode, kind, obj, size = entry.split(b"\t")[0].decode().split()
        if mode == "120000":
            raise ConfigError(f"{key}: {self.shown(path)} is a symlink; name the file itself, inside the repository")
        if kind != "blob" or mode not in _REGULAR_MODES:
            raise ConfigError(f"{key}: {self.shown(path)} is not a regular file; name a file")
        _check_size(int(size), limit_bytes, key, self.shown(path))
        blob = read_git_bytes(self.repo, "cat-file", "blob", obj)
        if blob.returncode != 0:
            said = blob.stderr.decode("utf-8", "replace").strip()
            raise ConfigError(f"{key}: could not read {self.shown(path)}: git said: {said}")
        return blob.stdout


class FolderFiles(BaseModel):
    """The files of a folder the caller named (an explicit --config's own): each must lie
    inside it once symlinks are followed, and outside `checkout`, the pull request's."""

    folder: Path
    checkout: Path | None = None

    def shown(self, path: str) -> str:
        return str(self.folder / path)

    def read(self, path: str, key: str, limit_bytes: int) -> bytes | None:
        found = resolve_inside(self.folder, path, key, "the config's folder")
        if self.checkout is not None:
            refuse_inside_checkout(found, self.checkout, f"{key}: {path}")
        return read_regular_file(found, key, limit_bytes)


def refuse_inside_checkout(path: Path, repo: Path, shown: str) -> None:
    """A file the caller names must not lie in the repository's work tree: everything there
    (files, symlinks, submodules) is the pull request's to shape."""
    resolved = path.resolve()
    for tree in _work_trees(repo):
        if resolved.is_relative_to(tree):
            raise ConfigError(
                f"{shown}: lies inside the repository's work tree ({tree}), which the pull request controls; "
                "leave --config out to read guard.toml from the base commit, or keep the file outside the checkout"
            )


def _work_trees(repo: Path) -> list[Path]:
    """The folder given as the repository and the top of its work tree (they differ in a subfolder)."""
    trees = [repo.resolve()]
    top = run_git(repo, "rev-parse", "--show-toplevel")
    if top.returncode == 0 and top.stdout.strip():
        trees.append(Path(top.stdout.strip()).resolve())
    return trees


def read_regular_file(path: Path, key: str, limit_bytes: int) -> bytes | None:
    """At most `limit_bytes` of a regular file (None: it does not exist); a device, fifo or
    folder is refused before it is opened for reading."""
    try:
        found = os.stat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ConfigError(f"{key}: cannot read {path} ({exc.strerror}); check the path") from None
    if not stat.S_ISREG(found.st_mode):
        raise ConfigError(f"{key}: {path} is not a regular file; name a file")
    _check_size(found.st_size, limit_bytes, key, str(path))
    try:
        with open(path, "rb") as handle:
            data = handle.read(limit_bytes + 1)  # a file that grew since the stat is still cut off
    except OSError as exc:
        raise ConfigError(f"{key}: cannot read {path} ({exc.strerror}); check the path") from None
    _check_size(len(data), limit_bytes, key, str(path))
    return data


def _check_size(size: int, limit_bytes: int, key: str, shown: str) -> None:
    if size > limit_bytes:
        raise ConfigError(
            f"{key}: {shown} is {size} bytes, more than the {limit_bytes // 1024} KiB such a file may hold; "
            "name the right file"
        )
