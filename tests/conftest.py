"""Shared fixtures: real git repositories made in tmp_path, and the GPU marker."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

GIT_ENV = {
    "GIT_AUTHOR_NAME": "Test Author",
    "GIT_AUTHOR_EMAIL": "test@example.invalid",
    "GIT_COMMITTER_NAME": "Test Author",
    "GIT_COMMITTER_EMAIL": "test@example.invalid",
}


def git(repo: Path, *args: str) -> str:
    proc = subprocess.run(
        ["git", *args], cwd=repo, env=os.environ | GIT_ENV, capture_output=True, text=True, check=True
    )
    return proc.stdout.strip()


def commit_all(repo: Path, message: str) -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "--quiet", "-m", message)
    return git(repo, "rev-parse", "HEAD")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Run as root, the guard runs the arms' code as an unprivileged user (build.user), which
    must reach the test's repositories. pytest keeps root's temp folders under
    /tmp/pytest-of-root, which every pytest session run as root makes 0700 again; so the
    folders are made under a base of this checkout's own, one per session, instead."""
    if os.geteuid() != 0 or config.option.basetemp is not None:
        return
    key = hashlib.sha256(str(config.rootpath).encode()).hexdigest()[:10]
    root = Path(tempfile.gettempdir()) / f"guard-tests-{key}"
    root.mkdir(mode=0o711, exist_ok=True)
    for old in root.glob("session-*"):  # a finished session's folders go, a running one's stay
        if not Path(f"/proc/{old.name.removeprefix('session-')}").exists():
            shutil.rmtree(old, ignore_errors=True)
    config.option.basetemp = str(root / f"session-{os.getpid()}")


@pytest.fixture(scope="session", autouse=True)
def _temp_folders_reachable_by_the_build_user(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Others may search (not list) the test's temp folders, as a runner's work folder lets them."""
    if os.geteuid() != 0:
        return
    base = tmp_path_factory.getbasetemp()
    # under pytest-xdist a worker's base is a folder of the session's, which pytest made 0700 too
    for folder in (base, base.parent) if os.environ.get("PYTEST_XDIST_WORKER") else (base,):
        folder.chmod(folder.stat().st_mode | 0o011)
    made = tmp_path_factory.mktemp

    def mktemp(basename: str, numbered: bool = True) -> Path:
        path = made(basename, numbered)
        path.chmod(path.stat().st_mode | 0o011)
        return path

    tmp_path_factory.mktemp = mktemp  # type: ignore[method-assign]  # tmp_path's folders come from it too


@pytest.fixture(scope="session", autouse=True)
def _inductor_cache_of_the_session(tmp_path_factory: pytest.TempPathFactory) -> None:
    """torch.compile's cache of this session's own, not /tmp/torchinductor_USER, which every run
    on the machine shares: a run killed while inductor wrote a kernel there left a truncated
    .so that the next run's lookup loaded ("file too short"). The guard gives its arms' processes
    caches of their own; this is for what the tests compile in-process."""
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(tmp_path_factory.mktemp("inductor-cache"))


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    _heaviest_files_first(items)
    if _cuda_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def _heaviest_files_first(items: list[pytest.Item]) -> None:
    """The files whose tests take longest start first (the Docker engine's, then by their count
    of `slow` tests), so that `--dist loadfile` does not leave one worker a long file at the
    end while the others wait: longest first is the usual cure for list scheduling's tail.
    Within a file the order stays as written."""
    slow: dict[str, int] = {}
    for item in items:
        path = item.nodeid.split("::", 1)[0]
        slow[path] = slow.get(path, 0) + ("slow" in item.keywords)

    def weight(item: pytest.Item) -> tuple[bool, int]:
        path = item.nodeid.split("::", 1)[0]
        return (not Path(path).name.startswith("test_docker_"), -slow[path])

    items.sort(key=weight)  # stable: the files' own order, and their tests', where weights tie


def sleep_mark() -> str:
    """A duration for `sleep` that no other process of the machine uses (3000-4000 s and a
    fraction): the test finds its sleeps by their command line (`marked`), in whatever PID
    namespace they ran, where their own pids mean nothing to the test."""
    return f"{3000 + os.getpid() % 1000}.{time.monotonic_ns() % 10**6}"


def marked(mark: str) -> list[int]:
    """The processes that run `sleep MARK`, as this test sees them."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and (entry / "cmdline").read_bytes() == f"sleep\0{mark}\0".encode():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def writable_by_all(folder: Path) -> Path:
    """A folder that a workload may leave notes in whoever it runs as (build.user, when the
    tests run as root): sticky and writable by all, like /tmp."""
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o1777)
    return folder


if importlib.util.find_spec("xdist") is not None:  # the hook exists only with pytest-xdist installed

    def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
        """`--dist loadfile` (as `make test` runs the tests), with the files named test_docker_*
        as one: a file's tests go to one worker, so that its module-wide fixtures (a PostgreSQL
        cluster, a reference process) are made once, and the tests of the one Docker engine,
        its disk and its images, run one at a time."""
        if config.getvalue("dist") != "loadfile":
            return None
        from xdist.scheduler import LoadScopeScheduling

        class ByFile(LoadScopeScheduling):
            def _split_scope(self, nodeid: str) -> str:
                path = nodeid.split("::", 1)[0]
                return "tests/test_docker_*" if Path(path).name.startswith("test_docker_") else path

        return ByFile(config, log)
