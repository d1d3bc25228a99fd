"""`make demo` as root with a Python the build user cannot run (one under /root): the demo's
own code runs as root, and the run says so."""

from __future__ import annotations

from pathlib import Path

import pytest


def test_the_demo_runs_as_root_where_the_build_user_cannot_run_this_python(monkeypatch: pytest.MonkeyPatch,
                                                                          tmp_path: Path) -> None:
    """`make demo` as root with a Python under /root: the demo's own code runs as root, said so."""
    import guard.checkout
    from guard.config import load_commit_config
    from guard.demo._repo import make_demo_repo
    from guard.demo._run import _build_user_cannot_run_this_python
    from guard.sandbox import LaunchError

    def unreachable(*_args: object) -> None:
        raise LaunchError("the user 'guard-pr' that runs the pull request's code (build.user) cannot run the "
                          "interpreter the arms run on, /root/.pyenv/bin/python3 (build.python, or the guard's "
                          "own): Permission denied; install it where every user may read it")

    monkeypatch.setattr(guard.checkout, "check_interpreter_reach", unreachable)
    assert _build_user_cannot_run_this_python() == "Permission denied"
    base, _ = make_demo_repo(tmp_path / "root", as_root=True)
    assert load_commit_config(tmp_path / "root", base).build.user == ""
    base, _ = make_demo_repo(tmp_path / "user")
    assert load_commit_config(tmp_path / "user", base).build.user == "guard-pr"
