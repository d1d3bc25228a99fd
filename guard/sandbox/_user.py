"""The unprivileged user that pull-request code runs as when the guard runs as root (a build
identity of its own per guard run on the host: pr_user), and which folders it may write.

Root's processes' environments are unreadable to it, and it can write only what the guard
hands it: an arm's worktree and venv while that arm builds, one empty result file per
harness process, the traces folder. Everything else the guard writes (build markers and
logs, specs, the reference, report.json, comment.md) stays root's, and what the user
wrote is sealed (made root's and read-only) as soon as the process that wrote it ends."""

from __future__ import annotations

import fcntl
import functools
import os
import pwd
import re
import shutil
import stat
import subprocess
import threading
from collections.abc import Iterable, Iterator
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

from guard._errors import ConfigError, GuardError

DEFAULT_PR_USER = "guard-pr"
_NAME = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")
_NO_WRITE = ~(stat.S_IWGRP | stat.S_IWOTH)


@dataclass(frozen=True)
class PrUser:
    name: str
    uid: int
    gid: int


def pr_user(name: str) -> PrUser | None:
    """The user this run's pull-request code runs as when the guard runs as root: its own
    build identity of `name` (build.user), created if missing; None, the guard's own user,
    otherwise or when `name` is empty.

    Each guard run on a host has an identity no other running guard has, so that what one
    job's code may write (its arm's tree and venv while it builds, its result files) no other
    job's code can: the first of `name`, `name-1`, `name-2`, ... whose lock file in a folder
    only root writes this process can lock exclusively. The lock is held until the process
    exits (the kernel drops it however it ends), so the next run on the host may take it."""
    if os.geteuid() != 0 or not name:
        return None
    if not _NAME.match(name):
        raise ConfigError(f"build.user '{name}' is not a user name; use lower-case letters, digits, _ and -")
    with _claiming:
        if name not in _claimed:
            _claimed[name] = _claim(name)
        return _claimed[name]


def identity_name(name: str, slot: int) -> str:
    """The name of build identity `slot` of build.user `name`: `name` itself, then `name-1`, ..."""
    if slot == 0:
        return name
    suffix = f"-{slot}"
    return name[: 32 - len(suffix)] + suffix


_IDENTITIES = Path("/run/regression-guard/identities")  # lock files, one per identity in use
IDENTITY_SLOTS = 32  # concurrent guard runs on one host
# The one registry left in the sandbox: a build identity is the process's (its lock is held
# until the process exits, however it ends), so every box of the process gets the same one
_claimed: dict[str, PrUser] = {}
_claiming = threading.Lock()


def _claim(name: str) -> PrUser:
    folder = _root_folder(_IDENTITIES)
    for slot in range(IDENTITY_SLOTS):
        candidate = identity_name(name, slot)
        fd = os.open(folder / f"{candidate}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        return _ensure_user(candidate)  # `fd` is never closed: the lock is this process's until it exits
    raise GuardError(
        f"{IDENTITY_SLOTS} guard runs on this host already hold the build identities of '{name}' (build.user); "
        "let one finish, or run fewer at once"
    )


def _root_folder(folder: Path) -> Path:
    """`folder` and its parent, made if missing: root's own, which no other user may write."""
    for path in (folder.parent, folder):
        with suppress(FileExistsError):
            path.mkdir(mode=0o755)
            os.chmod(path, 0o755)  # whatever the umask
        found = path.lstat()
        if not stat.S_ISDIR(found.st_mode) or found.st_uid != 0 or found.st_mode & 0o022:
            raise GuardError(f"{path} is not a folder of root's that only root may write; remove it and run again")
    return folder


@functools.cache
def _ensure_user(name: str) -> PrUser:
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        entry = _create_user(name)
    if entry.pw_uid == 0:
        raise ConfigError(f"build.user '{name}' is root; name an unprivileged user, or '' to run as the guard")
    return PrUser(name=name, uid=entry.pw_uid, gid=entry.pw_gid)


def _create_user(name: str) -> pwd.struct_passwd:
    useradd = shutil.which("useradd") or "/usr/sbin/useradd"
    # a system user with its own group, no home and no login: every process gets a fresh home
    argv = [useradd, "--system", "--user-group", "--no-create-home", "--home-dir", "/nonexistent",
            "--shell", "/usr/sbin/nologin", name]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=60)
        message = (proc.stderr or proc.stdout).strip()
    except (OSError, subprocess.TimeoutExpired) as exc:
        message = str(exc)
    try:  # made here, or by another run at the same moment
        return pwd.getpwnam(name)
    except KeyError:
        raise GuardError(
            f"could not create the user '{name}' that pull-request code runs as ({message}); create it "
            f"(useradd --system --user-group {name}) or set build.user to an existing unprivileged user"
        ) from None


# Every file and folder of a tree the user may be changing meanwhile is reached by name within
# its folder's file descriptor, without following links (os.fwalk checks each folder it enters
# is the one it listed), and changed through its own descriptor (fchown, fchmod): a folder
# swapped for a link to another tree between the listing and the change cannot redirect root.
_OPEN = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


@dataclass(frozen=True)
class _Node:
    """One entry of a tree: `fd` open on it, or, for a link or a socket (which cannot be opened
    without following or connecting), None and its name within the folder `dir_fd`."""

    fd: int | None
    dir_fd: int | None
    name: str
    info: os.stat_result


def _nodes(root: Path) -> Iterator[_Node]:
    """`root` and everything under it, top down (a folder before what it holds). `root`'s own
    path is followed by name: its parents are the guard's, never the user's."""
    try:
        fd = os.open(root, _OPEN)
    except OSError:  # a link, a socket, or gone
        try:
            yield _Node(None, None, str(root), os.stat(root, follow_symlinks=False))
        except FileNotFoundError:
            pass
        return
    try:
        info = os.fstat(fd)
        if not stat.S_ISDIR(info.st_mode):
            yield _Node(fd, None, str(root), info)
            return
    finally:
        os.close(fd)
    for _, _, files, dir_fd in os.fwalk(root, follow_symlinks=False):
        yield _Node(dir_fd, None, ".", os.fstat(dir_fd))
        for name in files:  # with follow_symlinks=False, a link to a folder is listed here too
            yield from _child(dir_fd, name)


def _child(dir_fd: int, name: str) -> Iterator[_Node]:
    try:
        fd = os.open(name, _OPEN, dir_fd=dir_fd)
    except OSError:
        try:
            yield _Node(None, dir_fd, name, os.stat(name, dir_fd=dir_fd, follow_symlinks=False))
        except FileNotFoundError:
            pass
        return
    try:
        yield _Node(fd, dir_fd, name, os.fstat(fd))
    finally:
        os.close(fd)


def hand_over(user: PrUser, paths: Iterable[Path]) -> None:
    """Give the folders (or files) in `paths`, and all they hold, to `user` to write. A file
    with another name elsewhere (a hard link the user made to a file it could not write) is
    not the folder's to give, and stays as it is; so do links, which are not followed."""
    for path in paths:
        for node in _nodes(path):
            if node.fd is None or (node.info.st_nlink > 1 and not stat.S_ISDIR(node.info.st_mode)):
                continue
            os.fchown(node.fd, user.uid, user.gid)


def seal(user: PrUser, path: Path) -> None:
    """Make what `user` owns in `path` the guard's, read-only to others: it can read and run
    it still, but no longer change it. Set-id bits go; links are not followed, and what
    someone else owns (a hard link to another's file) is left as it was. Top down: a folder
    is the guard's before what it holds is looked at, so the user can no longer change it."""
    uid, gid = os.geteuid(), os.getegid()
    for node in _nodes(path):
        if node.info.st_uid != user.uid:
            continue
        if node.fd is None:  # a link or a socket, itself: by its one name in a folder already looked at
            os.chown(node.name, uid, gid, dir_fd=node.dir_fd, follow_symlinks=False)
            continue
        os.fchown(node.fd, uid, gid)
        mode = stat.S_IMODE(node.info.st_mode) & 0o777 & _NO_WRITE
        # group and others may read (and run) what the owner could: the user still loads it
        os.fchmod(node.fd, mode | ((mode & 0o500) >> 3) | ((mode & 0o500) >> 6))


def writable_file(user: PrUser | None, path: Path) -> None:
    """An empty file at `path` that the user may write, in a folder it may not."""
    path.unlink(missing_ok=True)
    path.touch()
    if user is not None:
        os.chown(path, user.uid, user.gid)


def shared_folder(user: PrUser | None, path: Path) -> None:
    """A folder where the user may add files but not remove or change the guard's: the
    guard's, group-writable for the user's group, sticky (like /tmp)."""
    path.mkdir(parents=True, exist_ok=True)
    if user is not None:
        os.chown(path, os.geteuid(), user.gid, follow_symlinks=False)
        os.chmod(path, 0o1775)


def seal_children(user: PrUser | None, folder: Path) -> None:
    """Seal what the user wrote inside `folder` (a shared one), not the folder itself; its
    links go, so that the guard reading the folder reads only what was written there."""
    if user is None or not folder.is_dir():
        return
    for child in folder.iterdir():
        if child.is_symlink() and child.lstat().st_uid == user.uid:
            child.unlink()
        else:
            seal(user, child)
