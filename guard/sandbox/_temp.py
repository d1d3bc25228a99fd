"""The pull-request user's files in the folders every user may write: a fresh home per launch,
and what the user left in the shared temp folders removed when a launch ends.

What the user owns in /tmp, /var/tmp, /dev/shm, /run/lock, the guard's temp folder and the
world-writable folders directly in them is removed when a launch ends, but the homes of
launches still running, and before a launch starts (what a killed guard's run left), uncounted:
a head process cannot leave a file there for a base process to find. Only a guard alone on the
host with that user does it: each holds a shared lock on /run/regression-guard-user-UID.lock
while a process of its runs as the user, and cleans only when it can turn that lock exclusive,
so a guard per GPU of one host never removes what another's running processes use (a home,
NCCL's /dev/shm). A mount namespace with a private /tmp (guard/sandbox/_namespace.py) hides
what a launch leaves there anyway; this is what remains where the host gives none."""

from __future__ import annotations

import fcntl
import os
import shutil
import stat
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from guard.sandbox._user import PrUser, hand_over, seal

SHARED_TEMP = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock")  # where every user may write on Debian
_USER_LOCK = "/run/regression-guard-user-{uid}.lock"  # in a folder only root writes


class SharedTemp:
    """One guard's hold on the shared temp folders: the homes its launches use now, what it
    has handed the user to write now, and the users' lock files it holds while a launch runs."""

    def __init__(self) -> None:
        self.homes: set[str] = set()  # the fresh homes of the launches that run: theirs until they end
        self.handed: set[str] = set()  # what is the user's to write now (`handed_over`): no clean-up takes it
        self.held: dict[int, int] = {}  # uid -> the guard's descriptor of that user's lock file, held shared

    def clear(self, user: PrUser | None) -> int | None:
        """Remove what `user` owns in the shared temp folders, and in the world-writable folders
        directly in them, but the homes of running launches; how many files and folders (a
        folder with all it holds is one). Links are removed, never followed. None, and nothing
        removed, where a launch of another guard of this host runs as `user` (or no lock can be
        had). Called within `holding`."""
        if user is None:
            return 0
        lock = self.held.get(user.uid)
        if lock is None:
            return None
        try:
            fcntl.lockf(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # atomic: refused, the shared lock stays
        except OSError:
            return None
        try:
            keep = self.homes | self.handed  # a folder the guard gave it, in /tmp itself, is the guard's to seal
            folders = dict.fromkeys((tempfile.gettempdir(), *SHARED_TEMP))
            return sum(_clear(folder, user.uid, 1, keep) for folder in folders)
        finally:
            fcntl.lockf(lock, fcntl.LOCK_SH)

    @contextmanager
    def holding(self, users: Iterable[PrUser]) -> Iterator[None]:
        """A shared lock on each user's lock file for the block (a launch, its clean-ups included):
        while this guard's processes run as a user, no other guard of the host cleans that user's
        files, and this one cleans only when no other's run."""
        taken = []
        try:
            for user in users:
                lock = None if user.uid in self.held else _lock_file(user)
                if lock is None:
                    continue
                try:
                    fcntl.lockf(lock, fcntl.LOCK_SH)  # waits only for another guard's clean-up, milliseconds
                except OSError:
                    os.close(lock)
                    continue
                self.held[user.uid] = lock
                taken.append(user.uid)
            yield
        finally:
            for uid in taken:
                os.close(self.held.pop(uid))  # the lock goes with the descriptor

    @contextmanager
    def handed_over(self, user: PrUser | None, paths: Iterable[Path]) -> Iterator[None]:
        """`paths` are the user's to write inside the block, and sealed after it, however it ends."""
        folders = list(paths)
        if user is None:
            yield
            return
        names = {os.path.abspath(folder) for folder in folders} - self.handed
        self.handed.update(names)
        try:
            hand_over(user, folders)
            yield
        finally:
            self.handed.difference_update(names)
            for folder in folders:
                seal(user, folder)

    @contextmanager
    def fresh_home(self, user: PrUser | None) -> Iterator[dict[str, str]]:
        """For the pull-request user, a home and temp folder of its own for one process, so that
        nothing one process leaves there (a pip config, a user site-packages) reaches the next."""
        if user is None:
            yield {}
            return
        home = Path(tempfile.mkdtemp(prefix=f"{user.name}-home-"))
        self.homes.add(str(home))
        try:
            # git in a build (a version from `git describe`, setuptools-scm's file finder) refuses the
            # checkout's git data, which is root's, unless told to trust it; the user runs the
            # checkout's code anyway. Said twice: in the environment, and in the home's own config
            # for tools that drop GIT_* variables before they call git (setuptools-scm does). The
            # file is written before the home is the user's, so no path of theirs is followed.
            _write_own(home, ".gitconfig", b"[safe]\n\tdirectory = *\n", user)
            _give(home, user)
            yield {"HOME": str(home), "TMPDIR": str(home), "XDG_CACHE_HOME": str(home / ".cache"),
                   "USER": user.name, "LOGNAME": user.name,
                   "GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "safe.directory", "GIT_CONFIG_VALUE_0": "*"}
        finally:
            shutil.rmtree(home, ignore_errors=True)
            self.homes.discard(str(home))


def _lock_file(user: PrUser) -> int | None:
    """A descriptor of `user`'s lock file (not inherited); None where the file cannot be the guard's own."""
    lock: int | None = None
    try:
        lock = os.open(_USER_LOCK.format(uid=user.uid), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        found = os.fstat(lock)
        if found.st_uid != os.geteuid() or not stat.S_ISREG(found.st_mode):
            raise OSError("not the guard's own file")
    except OSError:
        if lock is not None:
            os.close(lock)
        return None
    return lock


def _clear(folder: str, uid: int, depth: int, keep: set[str] | frozenset[str]) -> int:
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return 0
    removed = 0
    for entry in entries:
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if info.st_uid == uid:
            if os.path.abspath(entry.path) not in keep:
                removed += _remove_entry(entry.path, info)
        elif depth and stat.S_ISDIR(info.st_mode) and info.st_mode & stat.S_IWOTH:
            removed += _clear(entry.path, uid, depth - 1, keep)  # another's sticky folder (.X11-unix, say)
    return removed


def _remove_entry(path: str, info: os.stat_result) -> int:
    try:
        if stat.S_ISDIR(info.st_mode):
            shutil.rmtree(path)  # by file descriptor: a link inside is removed, not followed
        else:
            os.unlink(path)
    except FileNotFoundError:
        return 0
    except OSError:
        return 0 if os.path.lexists(path) else 1
    return 1


def _give(folder: Path, user: PrUser) -> None:
    """`folder`, which root made, handed to `user` through a descriptor: no link is followed."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        os.fchown(fd, user.uid, user.gid)
    finally:
        os.close(fd)


def _write_own(folder: Path, name: str, data: bytes, user: PrUser) -> None:
    """A new file `name` in `folder`, given to `user`: made by descriptor (no link followed, none
    there before), written and handed over through that descriptor."""
    dir_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=dir_fd)
        try:
            os.write(fd, data)
            os.fchown(fd, user.uid, user.gid)
        finally:
            os.close(fd)
    finally:
        os.close(dir_fd)
