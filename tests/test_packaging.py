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
    shutil.copytree(ROOT / "guard", source / "guard", ignore=shutil.ignore_patterns("__pycache__"))
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
    templates = {p.relative_to(ROOT).as_posix() for p in (ROOT / "guard").rglob("*.j2")}  # the dashboard's too
    assert modules and templates
    assert sorted(modules - shipped) == []
    assert sorted(templates - shipped) == []


@pytest.mark.slow
def test_the_editable_install_warns_of_nothing_and_sees_a_module_added_later(tmp_path: Path) -> None:
    source = tmp_path / "source"
    shutil.copytree(ROOT / "guard", source / "guard", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    # the new venv borrows this one's packages (pip, setuptools, the guard's dependencies) through a
    # .pth file, so that the install needs no index; the guard itself is not among them
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    ours = subprocess.run([sys.executable, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    (Path(site) / "borrowed.pth").write_text(ours + "\n")
    proc = subprocess.run(
        [str(python), "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index", "-e", str(source)],
        capture_output=True, text=True, timeout=600, cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    said = (proc.stdout + proc.stderr).lower()
    assert "editable installation" not in said and "deprecat" not in said, proc.stdout + proc.stderr
    (source / "guard" / "_added_later.py").write_text("ADDED = 'yes'\n")
    found = subprocess.run([str(python), "-c", "import guard, guard._added_later as m; print(guard.__file__, m.ADDED)"],
                           capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert found.returncode == 0, found.stderr
    assert found.stdout.split() == [str(source / "guard" / "__init__.py"), "yes"]
