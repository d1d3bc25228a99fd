"""What `pip install` of the guard installs, as the action does on a runner: every module of the
package and the top-level templates inside it, the guard's core alone without the service's
extra, and a wheel installed in a fresh venv that renders and posts a comment with no checkout
in sight while `guard serve` names the extra it lacks."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from guard import UNKNOWN_VERSION
from guard.publish import PublishRequest, publish
from guard.report import read_report, render_comment
from guard.service._extra import SERVICE_INSTALL, SERVICE_MODULES
from tests.github_standin import GitHubStandIn
from tests.report_fixtures import current_file

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
# the committed H200 demo (a regression, so `guard comment` posts it), in the current schema
EXAMPLE = current_file(ROOT / "docs" / "examples" / "h200-demo" / "report.json")


def _source_copy(tmp_path: Path) -> Path:
    """What the action installs from: a copy, since a build folder left in the checkout would hide a gap."""
    source = tmp_path / "source"
    for folder in ("guard", "templates"):
        shutil.copytree(ROOT / folder, source / folder, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    return source


def _wheel(tmp_path: Path) -> Path:
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
         "--wheel-dir", str(tmp_path / "dist"), str(_source_copy(tmp_path))],
        capture_output=True, text=True, timeout=600, cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    (wheel,) = (tmp_path / "dist").glob("regression_guard-*.whl")
    return wheel


def _names(requirements: list[str]) -> set[str]:
    return {Requirement(r).name.lower() for r in requirements}


def test_the_service_extra_is_the_service_stack_and_the_core_holds_none_of_it() -> None:
    extra = _names(PYPROJECT["optional-dependencies"]["service"])
    # every one of these distributions is imported under its own name
    assert extra == set(SERVICE_MODULES)
    assert {"starlette", "uvicorn", "sqlalchemy", "alembic", "githubkit", "psycopg", "procrastinate"} <= extra
    assert not _names(PYPROJECT["dependencies"]) & extra


def test_setup_installs_the_service_extra_for_the_tests_and_the_action_installs_the_core() -> None:
    makefile = (ROOT / "Makefile").read_text()
    assert '-e ".[test,bench,service]"' in makefile
    action = (ROOT / "action.yml").read_text()
    (install,) = [line.strip() for line in action.splitlines() if "-m pip install" in line]
    assert install.endswith('"$GUARD_SRC"') and "[" not in install  # the path alone: no extra


@pytest.mark.slow
def test_the_wheel_holds_every_module_and_template(tmp_path: Path) -> None:
    shipped = set(zipfile.ZipFile(_wheel(tmp_path)).namelist())
    modules = {p.relative_to(ROOT).as_posix() for p in (ROOT / "guard").rglob("*.py") if "__pycache__" not in p.parts}
    # the comment's and the dashboard's, from the top-level folder into the package
    templates = {"guard/_templates/" + p.relative_to(ROOT / "templates").as_posix()
                 for p in (ROOT / "templates").rglob("*.j2")}
    assert modules and {"guard/_templates/comment.md.j2", "guard/_templates/dashboard/base.html.j2"} <= templates
    assert sorted(modules - shipped) == []
    assert sorted(templates - shipped) == []
    assert "guard/service/migrations/script.py.mako" in shipped
    # nothing beside the package: no top-level templates/ in site-packages; the copy has no .git,
    # so its version is the fallback (tests/test_version.py builds one that has)
    assert {name.split("/")[0] for name in shipped} == {"guard", f"regression_guard-{UNKNOWN_VERSION}.dist-info"}


@pytest.mark.slow
def test_the_editable_install_warns_of_nothing_and_sees_a_module_added_later(tmp_path: Path) -> None:
    source = _source_copy(tmp_path)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    # the new venv borrows this one's packages (pip, hatchling, the guard's dependencies) through a
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
    # the editable install renders from the copy's top-level templates/
    rendered = subprocess.run(
        [str(python), "-c", "from guard._template_dir import template_dir; print(template_dir())"],
        capture_output=True, text=True, cwd=tmp_path, timeout=60,
    )
    assert rendered.stdout.strip() == str(source / "templates"), rendered.stderr


def _fresh_venv(tmp_path: Path) -> Path:
    """A venv of the base interpreter that sees no other packages, with its own pip."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300, capture_output=True)
    python = venv / "bin" / "python"
    probe = subprocess.run([str(python), "-m", "pip", "download", "--quiet", "--no-deps", "--dest",
                            str(tmp_path / "probe"), "jinja2"], capture_output=True, text=True, timeout=120)
    if probe.returncode != 0:
        pytest.skip(f"the package index is unreachable, so the core's dependencies cannot be installed: "
                    f"{probe.stderr.strip().splitlines()[-1:]}")
    return venv


def _clean_env(**extra: str) -> dict[str, str]:
    drop = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "GITHUB_TOKEN", "GH_TOKEN", "GITHUB_REPOSITORY",
            "GITHUB_RUN_ID", "GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY", "GITHUB_API_URL", "GITHUB_SERVER_URL")
    return {k: v for k, v in os.environ.items() if k not in drop} | extra


@pytest.mark.slow
def test_the_core_wheel_alone_in_a_fresh_venv_renders_and_posts_a_comment_and_names_the_service_extra(
        tmp_path: Path) -> None:
    wheel = _wheel(tmp_path)
    venv = _fresh_venv(tmp_path)
    python, guard = venv / "bin" / "python", venv / "bin" / "guard"
    away = tmp_path / "elsewhere"  # a cwd with no checkout above it
    away.mkdir()

    def run(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(a) for a in args], capture_output=True, text=True, cwd=away, timeout=300,
                              env=_clean_env(**env))

    # the wheel with its core dependencies, as the action's `pip install` does
    installed = run(python, "-m", "pip", "install", "--quiet", wheel)
    assert installed.returncode == 0, installed.stderr
    where = run(python, "-c", "import importlib.util as u, sys, guard, guard._template_dir as t\n"
                "print(guard.__file__); print(t.template_dir())\n"
                f"print(','.join(n for n in {SERVICE_MODULES + ('torch',)!r} if u.find_spec(n)))")
    assert where.returncode == 0, where.stderr
    package_file, templates, present = (where.stdout.splitlines() + [""])[:3]
    site = Path(package_file).parent.parent
    assert site.is_relative_to(venv) and Path(templates) == site / "guard" / "_templates"
    assert present == ""  # neither the service's packages nor torch came with the core

    helped = run(guard, "--help")
    assert helped.returncode == 0 and "serve" in helped.stdout, helped.stderr

    # the job summary is the comment, rendered by the installed package as this checkout renders it
    summary_file = tmp_path / "summary.md"
    summarized = run(guard, "summary", "--report", EXAMPLE, GITHUB_STEP_SUMMARY=str(summary_file))
    assert summarized.returncode == 0, summarized.stderr
    report = read_report(EXAMPLE)
    assert summary_file.read_text() == render_comment(report) + "\n"

    # `guard comment` posts to GitHub (a stand-in on loopback) the body this checkout's publish posts
    with GitHubStandIn({"installed-token": "guard-bot"}) as api:
        posted = run(guard, "comment", "--report", EXAMPLE, "--repo", "octo/engine", "--pr", "7",
                     GITHUB_TOKEN="installed-token", GITHUB_API_URL=api.url)
        assert posted.returncode == 0, posted.stderr
        (comment,) = api.comments("octo/engine", 7)
    with GitHubStandIn({"checkout-token": "guard-bot"}) as api:
        publish(PublishRequest(report=EXAMPLE, repo="octo/engine", pr=7, api_url=api.url), "checkout-token",
                sleep=lambda _: None)
        (expected,) = api.comments("octo/engine", 7)
    assert report.verdict == "regression" and comment["body"] == expected["body"]
    assert render_comment(report).split("\n", 1)[1] in comment["body"]

    for argv in (["serve"], ["worker", "--db", "postgresql://guard@db:5432/guard"]):
        refused = run(guard, *argv)
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert refused.stderr.count("\n") == 1 and "Traceback" not in refused.stderr
        assert refused.stderr.startswith(f"guard: error: `guard {argv[0]}` needs the service's packages")
        assert refused.stderr.rstrip().endswith(SERVICE_INSTALL)
        missing = refused.stderr.split("packages, and ", 1)[1].split(" are not installed", 1)[0]
        assert missing.split(", ") == list(SERVICE_MODULES)


def test_guard_serve_without_the_service_packages_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    from guard.cli import main

    monkeypatch.chdir(tmp_path)
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "procrastinate" else
                        real(name, *a))
    assert main(["serve", "--work-dir", "never-made"]) == 2
    assert capsys.readouterr().err == ("guard: error: `guard serve` needs the service's packages, and procrastinate "
                                       f"is not installed: {SERVICE_INSTALL}\n")
    assert not Path("never-made").exists()


def test_an_emptied_package_template_folder_is_passed_over(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A checkout synced from before the templates moved can keep an empty guard/_templates:
    the checkout's templates/ is read then, and the package's copy only where it holds the comment's."""
    import guard._template_dir as where

    emptied = tmp_path / "_templates"
    (emptied / "__pycache__").mkdir(parents=True)
    monkeypatch.setattr(where, "INSTALLED", emptied)
    assert where.template_dir() == where.CHECKOUT
    assert (where.CHECKOUT / "comment.md.j2").is_file()
    (emptied / "comment.md.j2").write_text("{{ view.title }}\n")
    assert where.template_dir() == emptied
