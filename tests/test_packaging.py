"""What `pip install` of the guard installs, as the action does on a runner: every module of the
package and its templates, not only those an explicit list remembered."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_the_wheel_holds_every_module_and_template(tmp_path: Path) -> None:
    source = tmp_path / "source"  # a copy: a build folder left in the checkout would hide a gap
    for name in ("guard", "templates"):
        shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
         "--wheel-dir", str(tmp_path / "dist"), str(source)],
        capture_output=True, text=True, timeout=600, cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    (wheel,) = (tmp_path / "dist").glob("regression_guard-*.whl")
    shipped = set(zipfile.ZipFile(wheel).namelist())
    modules = {p.relative_to(ROOT).as_posix() for p in (ROOT / "guard").rglob("*.py") if "__pycache__" not in p.parts}
    templates = {f"guard/_templates/{p.name}" for p in (ROOT / "templates").glob("*.j2")}
    assert modules and templates
    assert sorted(modules - shipped) == []
    assert sorted(templates - shipped) == []
