"""What a build left in a folder, path by path, so a later run can tell whether anything changed.

A manifest maps each path below the folder ('/'-separated, relative) to what is there:

    "d"            a directory
    "f <sha256>"   a regular file, by content ("x <sha256>" when its owner may execute it)
    "l <target>"   a symbolic link, by the text it holds; never followed
    "o"            anything else (a fifo, a socket, a device); never opened

Contents, not timestamps: an edit that restores the mtime, or a git index told to skip a
path, cannot hide from a hash. Bytecode that a later run wrote is the one exception: a file
under a `__pycache__` folder that the record does not list is removed before comparing,
because Python only loads such a file beside its (verified) source and rebuilds it when it
is gone; one that the record lists is compared like any other file.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
from pathlib import Path

Manifest = dict[str, str]

_BYTECODE_DIR = "__pycache__"
# O_NONBLOCK: a fifo swapped in after the listing opens without waiting for a writer
_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def take_manifest(root: Path, recorded: Manifest | None = None) -> Manifest:
    """The manifest of everything below `root` ({} when it does not exist). Given `recorded`,
    bytecode it does not list is removed first (see the module docstring)."""
    found: Manifest = {}
    if not root.is_dir() or root.is_symlink():
        return found
    pending = [(root, "", False)]
    while pending:
        folder, prefix, in_bytecode = pending.pop()
        with os.scandir(folder) as entries:
            listed = sorted(entries, key=lambda e: e.name)
        for entry in listed:
            rel = prefix + entry.name
            bytecode = in_bytecode or (entry.name == _BYTECODE_DIR and entry.is_dir(follow_symlinks=False))
            if bytecode and recorded is not None and rel not in recorded:
                remove_path(Path(entry.path))
                continue
            if entry.is_dir(follow_symlinks=False):
                found[rel] = "d"
                pending.append((Path(entry.path), rel + "/", bytecode))
            else:
                found[rel] = _describe(Path(entry.path))
    return found


def first_difference(recorded: Manifest, found: Manifest) -> str | None:
    """The first path (in sorted order) that was added, removed or changed; None if none was."""
    changed = [path for path in recorded.keys() | found.keys() if recorded.get(path) != found.get(path)]
    return min(changed) if changed else None


def _describe(path: Path) -> str:
    mode = path.lstat().st_mode
    if stat.S_ISLNK(mode):
        return f"l {os.readlink(path)}"
    if not stat.S_ISREG(mode):
        return "o"
    fd = os.open(path, _OPEN_FLAGS)
    with os.fdopen(fd, "rb", buffering=0) as file:
        opened = os.fstat(fd).st_mode
        if not stat.S_ISREG(opened):  # swapped for something else since the lstat
            return "o"
        digest = hashlib.file_digest(file, "sha256").hexdigest()
    return f"{'x' if opened & stat.S_IXUSR else 'f'} {digest}"


def remove_path(path: Path) -> None:
    """Remove a file, a link (not what it points to) or a whole folder."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()
