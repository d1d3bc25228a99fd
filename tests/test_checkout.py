"""The checkout stage against a real git repository, real venvs and real pip."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from guard._errors import BuildError, GitError
from guard._git import tree_size
from guard.checkout import (
    ArmRef, BuiltArm, build_arm, require_distinct, resolve_arms, uncommitted_changes,
)
from guard.cause import find_capture_changes
from guard.config import BuildConfig
from guard.sandbox import choose_box

# isolated from the machine's git config, with an identity so commits work anywhere
_GIT_ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "Guard Test",
    "GIT_AUTHOR_EMAIL": "guard@example.invalid",
    "GIT_COMMITTER_NAME": "Guard Test",
    "GIT_COMMITTER_EMAIL": "guard@example.invalid",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
}

_PYPROJECT = """\
[build-system]
requires = ["setuptools"]
build-backend = "setuptools.build_meta"

[project]
name = "tinypkg"
version = "0.0.1"

[tool.setuptools]
packages = ["tinypkg"]
"""

PIP_INSTALL = "pip install --no-deps --no-build-isolation ."


@dataclass(frozen=True)
class Repo:
    path: Path
    first_sha: str    # main's first commit: VERSION = "one"; the merge-base
    feature_sha: str  # branch "feature" off first_sha: VERSION = "two"
    main_sha: str     # main moved on after feature branched: adds NOTES.txt only


def git(repo: Path, *args: str) -> str:
    proc = subprocess.run(["git", "-C", str(repo), *args], env=_GIT_ENV, capture_output=True, text=True, check=True)
    return proc.stdout.strip()


def commit_version(repo: Path, version: str) -> str:
    (repo / "tinypkg" / "__init__.py").write_text(f'VERSION = "{version}"\n')
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", f"version {version}")
    return git(repo, "rev-parse", "HEAD")


def make_repo(path: Path) -> Repo:
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    (path / "pyproject.toml").write_text(_PYPROJECT)
    (path / "tinypkg").mkdir()
    first = commit_version(path, "one")
    git(path, "checkout", "-q", "-b", "feature")
    feature = commit_version(path, "two")
    git(path, "checkout", "-q", "main")
    (path / "NOTES.txt").write_text("main moved on\n")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "notes")
    return Repo(path=path, first_sha=first, feature_sha=feature, main_sha=git(path, "rev-parse", "HEAD"))


def run_in_arm(arm: BuiltArm, code: str, cwd: Path) -> str:
    """Run `code` the way the harness would: the arm's python, the arm's extra environment."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(arm.env)
    proc = subprocess.run([str(arm.python), "-c", code], env=env, cwd=cwd, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    return make_repo(tmp_path / "repo")


@pytest.fixture(scope="module")
def shared_repo(tmp_path_factory: pytest.TempPathFactory) -> Repo:
    return make_repo(tmp_path_factory.mktemp("shared") / "repo")


# ---- resolve_arms / changed_files -------------------------------------------------------------


def test_explicit_refs_resolve_to_full_shas(repo: Repo) -> None:
    base, head = resolve_arms(repo.path, "main", "feature", "main")
    assert (base.name, base.ref, base.sha) == ("base", "main", repo.main_sha)
    assert (head.name, head.ref, head.sha) == ("head", "feature", repo.feature_sha)

    base, _ = resolve_arms(repo.path, repo.first_sha[:8], "feature", "main")
    assert base.sha == repo.first_sha


def test_default_base_is_merge_base_with_target_branch(repo: Repo) -> None:
    base, head = resolve_arms(repo.path, None, "feature", "main")
    assert base.sha == repo.first_sha
    assert "main" in base.ref
    assert head.sha == repo.feature_sha


def test_default_base_falls_back_to_origin_branch(repo: Repo) -> None:
    git(repo.path, "update-ref", "refs/remotes/origin/trunk", repo.main_sha)
    base, _ = resolve_arms(repo.path, None, "feature", "trunk")
    assert base.sha == repo.first_sha
    assert "origin/trunk" in base.ref


def test_missing_target_branch_is_a_git_error(repo: Repo) -> None:
    with pytest.raises(GitError, match="target branch 'nope'"):
        resolve_arms(repo.path, None, "feature", "nope")


def test_unknown_ref_is_a_git_error_naming_it(repo: Repo) -> None:
    with pytest.raises(GitError) as caught:
        resolve_arms(repo.path, "xyz-no-such-ref", "feature", "main")
    assert "'xyz-no-such-ref' not found" in caught.value.message
    assert str(repo.path) in caught.value.message

    with pytest.raises(GitError, match="'also-missing' not found"):
        resolve_arms(repo.path, None, "also-missing", "main")


def test_a_head_that_is_its_base_is_refused(repo: Repo) -> None:
    with pytest.raises(GitError, match="are the same commit") as caught:
        require_distinct(*resolve_arms(repo.path, repo.feature_sha[:10], "feature", "main"))
    assert "guard calibrate" in caught.value.message
    proc = subprocess.run([sys.executable, "-m", "guard", "run", "--repo", str(repo.path), "--base", "feature",
                           "--head", "feature", "--out", str(repo.path.parent / "out")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "are the same commit" in proc.stderr and "Traceback" not in proc.stderr


def test_uncommitted_changes_are_listed_and_untracked_files_are_not(repo: Repo) -> None:
    assert uncommitted_changes(repo.path) == []
    name = git(repo.path, "ls-files").split()[0]
    tracked = repo.path / name
    tracked.write_text(tracked.read_text() + "\n# edited, not committed\n")
    (repo.path / "scratch.txt").write_text("untracked")
    assert uncommitted_changes(repo.path) == [name]


def test_dash_ref_is_refused_not_passed_as_an_option(repo: Repo) -> None:
    with pytest.raises(GitError, match="not a valid ref"):
        resolve_arms(repo.path, "--all", "feature", "main")


def test_not_a_repository_is_a_git_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))  # don't find a repo above tmp_path
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(GitError, match="not a git repository"):
        resolve_arms(plain, None, "HEAD", "main")
    with pytest.raises(GitError, match="no such directory"):
        resolve_arms(tmp_path / "missing", None, "HEAD", "main")


def test_unrelated_histories_have_no_merge_base(repo: Repo) -> None:
    git(repo.path, "checkout", "-q", "--orphan", "island")
    git(repo.path, "commit", "-q", "-m", "unrelated root")
    with pytest.raises(GitError, match="no common ancestor"):
        resolve_arms(repo.path, None, "island", "main")


def test_changed_files_is_three_dot(repo: Repo) -> None:
    # the report's changed files come from the one diff capture detection reads; NOTES.txt
    # changed on main after feature branched, so main...feature must not list it
    def changed(base: str, head: str) -> list[str]:
        return find_capture_changes(repo.path, base, head, globs=[]).changed_files

    assert changed(repo.main_sha, repo.feature_sha) == ["tinypkg/__init__.py"]
    assert changed(repo.feature_sha, repo.main_sha) == ["NOTES.txt"]


# ---- build_arm, method "none" -----------------------------------------------------------------


def _arms(repo: Repo) -> tuple[ArmRef, ArmRef]:
    return (
        ArmRef(name="base", ref="main~1", sha=repo.first_sha),
        ArmRef(name="head", ref="feature", sha=repo.feature_sha),
    )


def test_none_build_puts_the_arm_commit_on_pythonpath(
    repo: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONPATH", "/already/there")
    config = BuildConfig(method="none")
    messages: list[str] = []
    for arm, version in zip(_arms(repo), ["one", "two"]):
        built = build_arm(repo.path, arm, config, tmp_path / "cache", progress=messages.append, box=choose_box())
        assert built.name == arm.name and built.sha == arm.sha and not built.reused
        assert built.env["PYTHONPATH"] == f"{built.worktree}{os.pathsep}/already/there"
        assert (built.worktree / "tinypkg" / "__init__.py").read_text() == f'VERSION = "{version}"\n'
        assert git(built.worktree, "rev-parse", "HEAD") == arm.sha
        assert built.python == Path(os.path.abspath(sys.executable))
        assert built.build_log.is_file()
        assert run_in_arm(built, "import tinypkg; print(tinypkg.VERSION)", cwd=tmp_path) == version
    assert any(m.startswith(f"base: building {repo.first_sha[:12]} (none)") for m in messages)
    assert any(m.startswith("head: built") for m in messages)


def test_finished_build_is_reused_and_unfinished_one_rebuilt(repo: Repo, tmp_path: Path) -> None:
    base, _ = _arms(repo)
    config = BuildConfig(method="none")
    first = build_arm(repo.path, base, config, tmp_path / "cache", box=choose_box())

    again = build_arm(repo.path, base, config, tmp_path / "cache", box=choose_box())
    assert again.reused and again.build_s == 0.0
    assert again.worktree == first.worktree

    other = build_arm(repo.path, base, config.model_copy(update={"install": "true"}), tmp_path / "cache",
                      box=choose_box())
    assert not other.reused and other.worktree != first.worktree

    # a crash mid-build leaves no marker: the folder must be wiped and built again
    (first.worktree.parent / "marker.json").unlink()
    (first.worktree / "stale.txt").write_text("left over")
    rebuilt = build_arm(repo.path, base, config, tmp_path / "cache", box=choose_box())
    assert not rebuilt.reused
    assert not (rebuilt.worktree / "stale.txt").exists()
    assert git(rebuilt.worktree, "rev-parse", "HEAD") == base.sha


def test_a_commit_over_the_checkout_limits_is_refused_before_anything_is_written(repo: Repo, tmp_path: Path) -> None:
    """A pack of a few kilobytes that holds 3 MiB of zeros in 30 files: its size comes from
    git's objects, so nothing of it is checked out when it is over a limit."""
    git(repo.path, "checkout", "--quiet", "-b", "bomb", repo.feature_sha)
    for i in range(30):
        (repo.path / f"zeros-{i}.bin").write_bytes(bytes(100_000))
    git(repo.path, "add", "-A")
    git(repo.path, "commit", "-q", "-m", "thirty files of zeros")
    bomb = ArmRef(name="head", ref="bomb", sha=git(repo.path, "rev-parse", "HEAD"))
    assert tree_size(repo.path, bomb.sha).bytes > 3_000_000
    for limits, said in (({"max_checkout_mib": 2}, "MiB, over build.max_checkout_mib (2)"),
                         ({"max_checkout_files": 30}, "files, over build.max_checkout_files (30)")):
        with pytest.raises(BuildError) as caught:
            build_arm(repo.path, bomb, BuildConfig(method="none", **limits), tmp_path / "cache", box=choose_box())
        assert caught.value.arm == "head" and said in caught.value.message
        assert caught.value.message.startswith(f"build of arm 'head' failed: its commit {bomb.sha[:12]} holds ")
        assert "nothing of it was checked out" in caught.value.message
        assert not list((tmp_path / "cache").rglob("zeros-*"))  # not one file of it written
    built = build_arm(repo.path, bomb, BuildConfig(method="none", max_checkout_mib=4), tmp_path / "cache",
                      box=choose_box())
    assert len(list(built.worktree.glob("zeros-*"))) == 30


def test_missing_interpreter_is_a_build_error(repo: Repo, tmp_path: Path) -> None:
    base, _ = _arms(repo)
    config = BuildConfig(method="venv", python=str(tmp_path / "no-python-here"))
    with pytest.raises(BuildError, match="not found") as caught:
        build_arm(repo.path, base, config, tmp_path / "cache", box=choose_box())
    assert caught.value.arm == "base"


def test_broken_interpreter_is_a_build_error_with_its_output(repo: Repo, tmp_path: Path) -> None:
    fake = tmp_path / "fake-python"
    fake.write_text("#!/bin/sh\necho fake-python-broken >&2\nexit 1\n")
    fake.chmod(0o755)
    _, head = _arms(repo)
    with pytest.raises(BuildError) as caught:
        build_arm(repo.path, head, BuildConfig(method="venv", python=str(fake)), tmp_path / "cache", box=choose_box())
    assert caught.value.arm == "head"
    assert "fake-python-broken" in caught.value.log_tail
    assert caught.value.log_path is not None and Path(caught.value.log_path).is_file()


# ---- build_arm, method "venv" (real venvs, real pip) -------------------------------------------


@dataclass(frozen=True)
class VenvBuilds:
    cache: Path
    base: BuiltArm
    head: BuiltArm


@pytest.fixture(scope="module")
def venv_builds(shared_repo: Repo, tmp_path_factory: pytest.TempPathFactory) -> VenvBuilds:
    cache = tmp_path_factory.mktemp("venv-cache")
    config = BuildConfig(method="venv", install=PIP_INSTALL)
    base, head = _arms(shared_repo)
    return VenvBuilds(
        cache=cache,
        base=build_arm(shared_repo.path, base, config, cache, box=choose_box()),
        head=build_arm(shared_repo.path, head, config, cache, box=choose_box()),
    )


_PROBE = "import json, sys, tinypkg, torch; print(json.dumps([tinypkg.VERSION, tinypkg.__file__, sys.path]))"


@pytest.mark.slow
def test_venv_arm_runs_its_own_installed_version(venv_builds: VenvBuilds, tmp_path: Path) -> None:
    for built, version in [(venv_builds.base, "one"), (venv_builds.head, "two")]:
        assert not built.reused and built.build_s > 0
        assert built.env == {}
        venv_dir = built.python.parent.parent
        found_version, module_file, path = json.loads(run_in_arm(built, _PROBE, cwd=tmp_path))
        assert found_version == version
        # imported from the venv's install, not from the worktree or anywhere else
        assert Path(module_file).is_relative_to(venv_dir)
        assert "Successfully installed tinypkg" in built.build_log.read_text()
        own_site = next(i for i, p in enumerate(path) if Path(p).is_relative_to(venv_dir))
        parent_site = next(
            i for i, p in enumerate(path) if "site-packages" in p and not Path(p).is_relative_to(venv_dir)
        )
        assert own_site < parent_site


@pytest.mark.slow
def test_venv_build_is_reused_only_for_the_same_config(
    shared_repo: Repo, venv_builds: VenvBuilds, tmp_path: Path
) -> None:
    base, _ = _arms(shared_repo)
    built_ns = venv_builds.base.build_log.stat().st_mtime_ns
    again = build_arm(shared_repo.path, base, BuildConfig(method="venv", install=PIP_INSTALL), venv_builds.cache,
                      box=choose_box())
    assert again.reused and again.python == venv_builds.base.python
    assert again.build_log.stat().st_mtime_ns == built_ns  # checked, not built again: nothing ran pip

    bare = build_arm(shared_repo.path, base, BuildConfig(method="venv", install=""), venv_builds.cache,
                     box=choose_box())
    assert not bare.reused and bare.python != venv_builds.base.python
    assert run_in_arm(bare, "import importlib.util as u; print(u.find_spec('tinypkg') is None)", tmp_path) == "True"


@pytest.mark.slow
def test_failed_install_names_the_arm_and_spoils_nothing(
    shared_repo: Repo, venv_builds: VenvBuilds, tmp_path: Path
) -> None:
    base, head = _arms(shared_repo)
    broken = BuildConfig(method="venv", install="echo boom-marker; exit 3")
    with pytest.raises(BuildError) as caught:
        build_arm(shared_repo.path, base, broken, venv_builds.cache, box=choose_box())
    assert caught.value.arm == "base"
    assert "arm 'base'" in caught.value.message and "code 3" in caught.value.message
    assert "boom-marker" in caught.value.log_tail
    assert caught.value.log_path is not None
    failed_folder = Path(caught.value.log_path).parent
    assert failed_folder.is_dir() and not (failed_folder / "marker.json").exists()
    # the log stays; the half-built worktree and venv go, and git forgets the worktree
    assert not (failed_folder / "tree").exists() and not (failed_folder / "venv").exists()
    assert str(failed_folder / "tree") not in git(shared_repo.path, "worktree", "list", "--porcelain")

    fixed = BuildConfig(method="venv", install=PIP_INSTALL)
    head_built = build_arm(shared_repo.path, head, fixed, venv_builds.cache, box=choose_box())
    assert head_built.reused
    assert json.loads(run_in_arm(head_built, _PROBE, cwd=tmp_path))[0] == "two"

    # the failed folder has no marker, so the same config is built again rather than reused
    with pytest.raises(BuildError, match="code 3"):
        build_arm(shared_repo.path, base, broken, venv_builds.cache, box=choose_box())


@pytest.mark.slow
def test_venv_made_from_a_venv_sees_that_venvs_packages(shared_repo: Repo, tmp_path: Path) -> None:
    # the guard itself may run in a venv: its packages, and .pth-added dirs, must reach the arm
    parent = tmp_path / "parent-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(parent)], check=True)
    parent_python = parent / "bin" / "python"
    parent_site = Path(subprocess.run(
        [str(parent_python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True, text=True, check=True,
    ).stdout.strip())
    (parent_site / "parent_only_mod.py").write_text("WHERE = 'parent venv'\n")
    extra = tmp_path / "extra-dir"
    extra.mkdir()
    (extra / "pth_only_mod.py").write_text("WHERE = 'pth dir'\n")
    (parent_site / "extra.pth").write_text(f"{extra}\n")

    _, head = _arms(shared_repo)
    config = BuildConfig(method="venv", install="", python=str(parent_python))
    built = build_arm(shared_repo.path, head, config, tmp_path / "cache", box=choose_box())
    code = "import parent_only_mod, pth_only_mod; print(parent_only_mod.WHERE, '|', pth_only_mod.WHERE)"
    assert run_in_arm(built, code, cwd=tmp_path) == "parent venv | pth dir"
    # and whatever else the parent sees, torch included where it has one: no more, no less
    probe = "import importlib.util as u; print(sorted(n for n in ('torch', 'numpy', 'pydantic') if u.find_spec(n)))"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    in_parent = subprocess.run(
        [str(parent_python), "-c", probe], env=env, cwd=tmp_path, capture_output=True, text=True, check=True
    )
    assert run_in_arm(built, probe, cwd=tmp_path) == in_parent.stdout.strip()


@pytest.mark.slow
def test_build_past_timeout_is_killed_and_reported(shared_repo: Repo, tmp_path: Path) -> None:
    base, _ = _arms(shared_repo)
    started_s = time.monotonic()
    with pytest.raises(BuildError, match="timed out") as caught:
        config = BuildConfig(method="venv", install="sleep 600", timeout_s=1)
        build_arm(shared_repo.path, base, config, tmp_path / "cache", box=choose_box())
    assert time.monotonic() - started_s < 300  # killed: a wait for the sleep lasts 600 s, whatever the load
    assert caught.value.arm == "base"
