"""`guard clean` on a real repository with real worktrees, built by build_arm, run as the command."""

from __future__ import annotations

import logging
import fcntl
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from guard.checkout import ArmRef, build_arm, default_cache_dir
from guard.checkout._cache import CACHE_MARK_NAME, LOCK_NAME
from guard.config import BuildConfig
from guard.sandbox import choose_box
from tests.test_checkout import Repo, git, make_repo

REPO_ROOT = Path(__file__).resolve().parents[1]


def guard(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "guard", "clean", *args], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=120)


def worktrees(repo: Path) -> list[str]:
    """The linked worktrees git knows of (the main working tree left out)."""
    listed = git(repo, "worktree", "list", "--porcelain").splitlines()
    return [line.removeprefix("worktree ") for line in listed if line.startswith("worktree ")][1:]


@pytest.fixture
def built(tmp_path: Path) -> tuple[Repo, Path, list[Path]]:
    """A repository whose two arms the guard built, in its default cache dir."""
    repo = make_repo(tmp_path / "repo")
    cache = default_cache_dir(repo.path)
    arms = [build_arm(repo.path, ArmRef(name=name, ref=name, sha=sha), BuildConfig(method="none"), cache,
                      box=choose_box())
            for name, sha in (("base", repo.main_sha), ("head", repo.feature_sha))]
    return repo, cache, [arm.worktree for arm in arms]


def test_clean_removes_the_builds_and_worktrees_the_guard_made(built: tuple[Repo, Path, list[Path]]) -> None:
    repo, cache, trees = built
    assert sorted(worktrees(repo.path)) == sorted(str(t) for t in trees)  # real worktrees to begin with
    done = guard("--repo", str(repo.path))
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("removed ") == 3  # two builds, then the cache dir
    assert not cache.exists()
    assert worktrees(repo.path) == []  # git forgot them too
    assert git(repo.path, "status", "--porcelain") == ""  # the repository itself is untouched
    again = guard("--repo", str(repo.path))
    assert again.returncode == 0 and "nothing to clean" in again.stderr


def test_a_dry_run_lists_and_removes_nothing(built: tuple[Repo, Path, list[Path]]) -> None:
    repo, cache, trees = built
    done = guard("--repo", str(repo.path), "--dry-run")
    assert done.returncode == 0, done.stderr
    listed = [line.removeprefix("would remove ") for line in done.stdout.splitlines()]
    assert sorted(listed) == sorted(str(t.parent) for t in trees)
    assert "run again without --dry-run" in done.stderr
    assert all(t.is_dir() for t in trees) and len(worktrees(repo.path)) == 2


def test_what_the_guard_did_not_make_is_left(built: tuple[Repo, Path, list[Path]]) -> None:
    repo, cache, trees = built
    mine = cache / "notes.txt"
    mine.write_text("keep me\n")
    lookalike = cache / "0123456789ab-0123456789"  # a build's name, without the guard's lock in it
    lookalike.mkdir()
    (lookalike / "data").write_text("keep me too\n")
    done = guard("--repo", str(repo.path))
    assert done.returncode == 0, done.stderr
    assert mine.read_text() == "keep me\n" and (lookalike / "data").is_file()
    assert f"left {mine}: not a build of the guard" in done.stdout
    assert not any(t.exists() for t in trees)
    assert (cache / CACHE_MARK_NAME).is_file()  # the folder stays, as it holds what is not the guard's


def test_a_build_that_a_running_guard_holds_is_left(built: tuple[Repo, Path, list[Path]]) -> None:
    repo, cache, trees = built
    held = trees[0].parent
    fd = os.open(held / LOCK_NAME, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)  # as a run holds the build it measures
        done = guard("--repo", str(repo.path))
    finally:
        os.close(fd)
    assert done.returncode == 0, done.stderr
    assert f"left {held}: a running guard holds it" in done.stdout
    assert trees[0].is_dir() and not trees[1].exists()
    assert worktrees(repo.path) == [str(trees[0])]


def test_unused_for_removes_only_the_builds_no_run_has_used_for_that_long(
    built: tuple[Repo, Path, list[Path]]
) -> None:
    repo, cache, trees = built
    ten_days_ago = time.time() - 10 * 86400
    for tree in trees:
        os.utime(tree.parent / LOCK_NAME, (ten_days_ago, ten_days_ago))
    # a later run reuses base's build: that use is what keeps it
    reused = build_arm(repo.path, ArmRef(name="base", ref="main", sha=repo.main_sha), BuildConfig(method="none"), cache,
                       box=choose_box())
    assert reused.worktree == trees[0]
    done = guard("--repo", str(repo.path), "--unused-for", "7")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [f"removed {trees[1].parent}"]
    assert "kept 1 build(s) used in the last 7 day(s)" in done.stderr
    assert trees[0].is_dir() and not trees[1].exists()
    assert worktrees(repo.path) == [str(trees[0])] and (cache / CACHE_MARK_NAME).is_file()
    # 0 days: every build, as without the option
    done = guard("--repo", str(repo.path), "--unused-for", "0")
    assert done.returncode == 0 and not cache.exists() and worktrees(repo.path) == []


def test_the_service_removes_after_each_job_the_builds_unused_for_its_days(
    built: tuple[Repo, Path, list[Path]], caplog: pytest.LogCaptureFixture
) -> None:
    from guard.service._job import _clean_unused_builds

    caplog.set_level(logging.INFO, logger="guard.service")
    repo, cache, trees = built
    _clean_unused_builds(repo.path, None)  # --cache-unused-days below 0: every build kept
    assert all(t.is_dir() for t in trees)
    old = time.time() - 20 * 86400
    os.utime(trees[1].parent / LOCK_NAME, (old, old))  # a merged pull request's head, say
    _clean_unused_builds(repo.path, 14.0)
    assert trees[0].is_dir() and not trees[1].exists() and worktrees(repo.path) == [str(trees[0])]
    assert f"removed 1 build(s) of {repo.path} unused for 14 days" in caplog.text


def test_a_folder_without_the_mark_is_refused_and_kept(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    elsewhere = tmp_path / "my-stuff"
    (elsewhere / "0123456789ab-0123456789").mkdir(parents=True)
    (elsewhere / "0123456789ab-0123456789" / LOCK_NAME).write_text("")
    done = guard("--repo", str(repo.path), "--cache-dir", str(elsewhere))
    assert done.returncode == 2
    assert done.stderr.startswith("guard: error: ") and "nothing was removed" in done.stderr
    assert "Traceback" not in done.stderr
    assert (elsewhere / "0123456789ab-0123456789" / LOCK_NAME).is_file()


def test_bad_input_is_one_message_and_exit_2(tmp_path: Path) -> None:
    not_a_repo = tmp_path / "plain"
    not_a_repo.mkdir()
    for args in (["--repo", str(not_a_repo)], ["--repo", str(tmp_path / "missing")]):
        done = guard(*args)
        assert done.returncode == 2, args
        assert done.stderr.count("\n") == 1 and "guard: error: " in done.stderr
    file_as_cache = tmp_path / "a-file"
    file_as_cache.write_text("")
    repo = make_repo(tmp_path / "repo")
    done = guard("--repo", str(repo.path), "--cache-dir", str(file_as_cache))
    assert done.returncode == 2 and "is not a folder" in done.stderr
    for days in ("-1", "a week", "nan"):
        done = guard("--repo", str(repo.path), "--unused-for", days)
        assert done.returncode == 2 and "expected a number of days from 0 to 36500" in done.stderr, days
        assert "Traceback" not in done.stderr
