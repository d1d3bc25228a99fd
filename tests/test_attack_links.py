"""Root changing a tree the pull request's user is changing at the same moment, tried as an
attacker would: a process of that user swaps one of its folders for a link to a root-only
folder (renameat2 with RENAME_EXCHANGE), or one of its files for a link to a root-only key,
as fast as it can, while root hands the tree over and seals it again. Real processes as a
second user; run where the tests run as root (skipped otherwise)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from guard.sandbox import pr_user, seal_children, shared_folder
from guard.sandbox._user import hand_over, seal

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root, to act as a second user")

# Swaps A and B (each a folder, a file or a link) in the current folder until STOP exists.
SWAPPER = r'''
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD, RENAME_EXCHANGE = -100, 2
a, b, stop = (s.encode() for s in sys.argv[1:4])
swaps = 0
while not os.path.exists(stop):
    if libc.renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE) == 0:
        swaps += 1
print(swaps)
'''

# How long root hands over and seals while the other user races it, stopping early once root's
# files changed: on ff42c78 the hand-over gave some away within a second, the seal within a few.
RACE_S = 6.0


def _root_only(folder: Path, count: int) -> dict[str, tuple[int, int, int]]:
    folder.mkdir(mode=0o700)
    for i in range(count):
        (folder / f"secret-{i}").write_text("root only\n")
        (folder / f"secret-{i}").chmod(0o600)
    return _owners(folder)


def _owners(folder: Path) -> dict[str, tuple[int, int, int]]:
    return {p.name: (p.lstat().st_uid, p.lstat().st_gid, stat.S_IMODE(p.lstat().st_mode))
            for p in [folder, *folder.iterdir()]}


def _as_user(user, cwd: Path, code: str, *args: str) -> subprocess.Popen[str]:
    """`code` run by Python as `user` in `cwd`, with no other group: the attacker's process."""
    return subprocess.Popen([sys.executable, "-c", code, *args], cwd=cwd, user=user.uid, group=user.gid,
                            extra_groups=[], text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={"PATH": "/usr/bin:/bin"})


def _swapper(user, cwd: Path, a: str, b: str) -> subprocess.Popen[str]:
    return _as_user(user, cwd, SWAPPER, a, b, str(cwd / "stop"))


def _stopped(racer: subprocess.Popen[str]) -> int:
    """The racer's count of swaps once it has seen the stop file; killed if it has not in 30 s."""
    try:
        return int(racer.communicate(timeout=30)[0])
    finally:
        racer.kill()
        racer.wait()


def _kinds(folder: Path) -> dict[str, bool]:
    return {p.name: p.is_symlink() for p in folder.iterdir()}


def _started(swapper: subprocess.Popen[str], folder: Path) -> None:
    """Once the swapper has swapped at least once (what is a link in `folder` changed)."""
    first = _kinds(folder)
    deadline = time.monotonic() + 30
    while _kinds(folder) in (first, {}) or not any(_kinds(folder).values()):
        assert swapper.poll() is None and time.monotonic() < deadline, swapper.communicate()
        time.sleep(0.01)


@pytest.mark.slow
@needs_root
def test_a_folder_swapped_for_a_link_mid_hand_over_gives_the_user_nothing_of_roots(tmp_path: Path) -> None:
    user = pr_user("guard-pr")
    victim = tmp_path / "victim"
    before = _root_only(victim, 25)
    tree = tmp_path / "tree"  # a folder the user was handed earlier (a compile cache across rounds)
    (tree / "sub").mkdir(parents=True)
    for i in range(25):
        (tree / "sub" / f"f{i}").write_text("")
    (tree / "link").symlink_to(victim)
    hand_over(user, [tree])  # the user's, and it starts swapping
    swapper = _swapper(user, tree, "sub", "link")
    errors = []
    try:
        _started(swapper, tree)
        end = time.monotonic() + RACE_S
        while time.monotonic() < end and _owners(victim) == before:  # each process: handed over, then sealed
            try:
                hand_over(user, [tree])
                seal(user, tree)
            except OSError as exc:  # a run that fails here still must not have given anything away
                errors.append(exc)
    finally:
        hand_over(user, [tree])  # for the stop file
        (tree / "stop").touch()
        swaps = _stopped(swapper)
    assert swaps > 0  # the race ran
    assert _owners(victim) == before  # no file of root's changed owner or mode
    assert errors == []


# In a folder where it may add files but not change root's (a shared, sticky one, as the traces
# folder): makes a file and a link to TARGET, swaps them until a swap fails (root sealed the
# file, or removed the link), then makes the next pair; until STOP exists.
SEAL_RACER = r'''
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
target, stop = sys.argv[1], sys.argv[2]
n = swaps = 0
while not os.path.exists(stop):
    f, k = f"t{n}", f"k{n}"
    n += 1
    try:
        open(f, "w").close()
        os.symlink(target, k)
    except OSError:
        continue
    while libc.renameat2(-100, f.encode(), -100, k.encode(), 2) == 0:
        swaps += 1
        if swaps % 1000 == 0 and os.path.exists(stop):
            break
print(swaps)
'''


@pytest.mark.slow
@needs_root
def test_a_file_swapped_for_a_link_mid_seal_leaves_roots_key_unreadable(tmp_path: Path) -> None:
    user = pr_user("guard-pr")
    keys = tmp_path / "keys"
    before = _root_only(keys, 1)
    traces = tmp_path / "traces"
    shared_folder(user, traces)  # the user may add files here, as a profiler's traces
    racer = _as_user(user, traces, SEAL_RACER, str(keys / "secret-0"), str(tmp_path / "stop"))
    errors = []
    try:
        _started(racer, traces)
        end = time.monotonic() + RACE_S
        while time.monotonic() < end and _owners(keys) == before:  # each process's traces, sealed when it ends
            try:
                seal_children(user, traces)
            except OSError as exc:  # a run that fails here still must not have given anything away
                errors.append(exc)
    finally:
        (tmp_path / "stop").touch()
        swaps = _stopped(racer)
    assert swaps > 0
    assert _owners(keys) == before  # still root's, still 0600
    assert errors == []
