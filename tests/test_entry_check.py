"""Mistakes in the config found before anything is built: `workload.entry` against the base
commit's tree (the file, and the callable it names), and a guard.toml left uncommitted. Each
through `guard run` on a real git repository, as a user meets it: exit 2, one message, no build."""

from __future__ import annotations

from pathlib import Path

import pytest

from guard._errors import ConfigError
from tests.conftest import commit_all, git
from tests.standin import StandIn, run_in_process
from tests.test_pipeline import CONFIG, guard_run, make_repo


def _config(entry: str) -> str:
    return CONFIG.format(method="none", install="", repeats=3).replace('entry = "wl.py:make"', f'entry = "{entry}"')


def _refused(tmp_path: Path, entry: str) -> str:
    repo = make_repo(tmp_path, config=_config(entry))
    (repo / "note.txt").write_text("x\n")
    commit_all(repo, "head")
    proc = guard_run(repo, tmp_path / "out")
    assert proc.returncode == 2, proc.stderr
    assert "building" not in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "out" / "report.json").exists()
    return proc.stderr


def test_a_callable_the_entry_file_does_not_define_is_named_with_what_it_does(tmp_path: Path) -> None:
    said = _refused(tmp_path, "wl.py:mkae")
    assert "workload.entry 'wl.py:mkae': wl.py (commit " in said
    assert "defines no 'mkae'; it defines " in said and "'make'" in said
    assert "guard.toml of the base commit" in said


def test_a_file_that_only_imports_its_callables_is_named_with_what_it_imports(tmp_path: Path) -> None:
    """The demo's own workload file binds `make` by an import: a wrong name lists it."""
    said = _planned(tmp_path, "entry.py:make_workload", {"entry.py": "from wl import make\n\n_hidden = 1\n"})
    assert ("defines no 'make_workload'; it defines no function or class; the names it imports or assigns: "
            "'make'. Name one") in said


def _planned(tmp_path: Path, entry: str, files: dict[str, str] | None = None) -> str:
    """The message `guard run` stops with, in this process: the config's check, before any build."""
    repo = make_repo(tmp_path, config=_config(entry), files=files)
    (repo / "note.txt").write_text("x\n")
    commit_all(repo, "head")
    with pytest.raises(ConfigError) as info:
        run_in_process(repo, tmp_path / "out", StandIn(step_ms=lambda _p, _bs: 1.0))
    return info.value.message


def test_an_entry_file_the_base_commit_lacks_is_said_with_the_python_files_there(tmp_path: Path) -> None:
    said = _planned(tmp_path, "bench/wl.py:make")
    assert "bench/wl.py (commit " in said and "does not exist; that folder holds no Python file" in said
    (tmp_path / "2").mkdir()
    said = _planned(tmp_path / "2", "wlx.py:make")
    assert "wlx.py (commit " in said and "does not exist; the Python files there: 'wl.py'" in said


def test_a_file_that_is_not_python_is_said_with_its_line(tmp_path: Path) -> None:
    repo_files = {"broken.py": "def make(:\n"}
    repo = make_repo(tmp_path, config=_config("broken.py:make"), files=repo_files)
    (repo / "note.txt").write_text("x\n")
    commit_all(repo, "head")
    with pytest.raises(ConfigError, match=r"broken.py \(commit \w+\) is not valid Python \(line 1: "):
        run_in_process(repo, tmp_path / "out", StandIn(step_ms=lambda _p, _bs: 1.0))


def test_an_entry_the_file_defines_by_assignment_or_import_is_not_refused(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, config=_config("entry.py:make"),
                     files={"entry.py": "from wl import make as _m\nmake = _m\n"})
    (repo / "note.txt").write_text("x\n")
    commit_all(repo, "head")
    run = run_in_process(repo, tmp_path / "out", StandIn(step_ms=lambda _p, _bs: 1.0))
    assert run.report.verdict != "invalid", run.text


def test_an_uncommitted_guard_toml_is_named_and_so_is_the_commit_whose_config_is_used(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    (repo / "note.txt").write_text("x\n")
    commit_all(repo, "head")
    base = git(repo, "rev-parse", "main")
    (repo / "guard.toml").write_text((repo / "guard.toml").read_text().replace("repeats = 3", "repeats = 4"))
    run = run_in_process(repo, tmp_path / "out", StandIn(step_ms=lambda _p, _bs: 1.0))
    assert f"config: guard.toml of the base commit {base[:12]}" in run.text
    assert (f"the work tree's guard.toml is not committed, and is not used: the config is the base commit's "
            f"({base[:12]})") in run.text
    assert run.report.workload.repeats == 3  # the base's, not the edit's

