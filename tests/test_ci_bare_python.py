"""tools/ci/check_bare_python.py: CI refuses an interpreter whose packages could hide a set-up step."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "tools" / "ci" / "check_bare_python.py"


def check(python: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    return subprocess.run([python, str(SCRIPT)], env=clean | env, capture_output=True, text=True)


def test_a_venv_is_refused_because_it_reaches_its_base(tmp_path: Path) -> None:
    venv = tmp_path / "v"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    proc = check(str(venv / "bin" / "python"))
    assert proc.returncode == 2
    assert "is a venv" in proc.stderr and "BARE_PYTHON" in proc.stderr


def test_a_dependency_reachable_on_the_path_is_named(tmp_path: Path) -> None:
    base = getattr(sys, "_base_executable", sys.executable)
    planted = tmp_path / "planted"
    (planted / "pydantic").mkdir(parents=True)
    (planted / "pydantic" / "__init__.py").write_text("")
    proc = check(base, PYTHONPATH=str(planted))
    assert proc.returncode == 2
    assert f"importable: pydantic ({planted / 'pydantic'}" in proc.stderr


def test_debians_python_passes_where_it_is_bare() -> None:
    debian = Path("/usr/bin/python3")
    if not debian.exists():
        pytest.skip("no /usr/bin/python3 on this machine")
    proc = check(str(debian))
    if proc.returncode != 0 and "is not bare" in proc.stderr:
        pytest.skip(f"this machine's /usr/bin/python3 has packages installed by hand: {proc.stderr}")
    assert proc.returncode == 0, proc.stderr
    assert "bare" in proc.stdout
