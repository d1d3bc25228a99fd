"""The version: git's tags through hatch-vcs, in a checkout and in the tarball a workflow's
`uses:` downloads; `guard --version` says the installed one; the metadata links the project."""

from __future__ import annotations

import email
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

import guard
from guard.cli import main

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
REPOSITORY = "https://github.com/example-org/regression-guard"


def _git(cwd: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.invalid", "GIT_CONFIG_GLOBAL": "/dev/null", "PATH": "/usr/bin:/bin"}
    return subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=True).stdout


def _metadata(source: Path, dist: Path) -> email.message.Message:
    """The METADATA of the wheel built from `source`, with this environment's hatchling and hatch-vcs."""
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                           "--wheel-dir", str(dist), str(source)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    (wheel,) = dist.glob("regression_guard-*.whl")
    with zipfile.ZipFile(wheel) as zipped:
        (name,) = [n for n in zipped.namelist() if n.endswith(".dist-info/METADATA")]
        return email.message_from_bytes(zipped.read(name))


def _tagged_repo(tmp_path: Path) -> Path:
    """A repository of the package's files alone, its one commit tagged v1.2.0."""
    repo = tmp_path / "repo"
    for folder in ("guard", "templates"):
        shutil.copytree(ROOT / folder, repo / folder, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md", ".git_archival.txt", ".gitattributes"):
        shutil.copy(ROOT / name, repo / name)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "release")
    _git(repo, "tag", "v1.2.0")
    return repo


def test_guard_version_prints_the_installed_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as ended:
        main(["--version"])
    assert ended.value.code == 0
    assert capsys.readouterr().out == f"regression-guard {guard.__version__}\n"


def test_the_version_is_gits_with_the_fallback_the_package_states() -> None:
    assert "hatch-vcs>=0.4" in PYPROJECT["build-system"]["requires"]
    assert "version" in PYPROJECT["project"]["dynamic"] and "version" not in PYPROJECT["project"]
    assert PYPROJECT["tool"]["hatch"]["version"] == {"source": "vcs", "fallback-version": guard.UNKNOWN_VERSION}
    # a GitHub tarball fills the archival file in only where git is told to
    assert ".git_archival.txt export-subst" in (ROOT / ".gitattributes").read_text().splitlines()


def test_the_project_urls_are_the_projects_own_repository() -> None:
    urls = PYPROJECT["project"]["urls"]
    assert set(urls) == {"Homepage", "Documentation", "Changelog", "Issues"}
    assert all(url.startswith(REPOSITORY) for url in urls.values())
    assert urls["Changelog"].endswith("/CHANGELOG.md") and (ROOT / "CHANGELOG.md").is_file()


@pytest.mark.slow
def test_a_tagged_checkout_and_its_tarball_build_the_tags_version(tmp_path: Path) -> None:
    repo = _tagged_repo(tmp_path)
    # what a workflow's `uses: ...@v1.2.0` downloads: `git archive`, no .git
    tarball = tmp_path / "tarball"
    tarball.mkdir()
    archive = subprocess.run(["git", "archive", "v1.2.0"], cwd=repo, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tarball)], input=archive, check=True)
    assert not (tarball / ".git").exists()
    metadata = _metadata(tarball, tmp_path / "dist-tarball")
    assert metadata["Version"] == "1.2.0"
    assert f"Changelog, {REPOSITORY}/blob/main/CHANGELOG.md" in metadata.get_all("Project-URL")
    # a commit after the tag, in the checkout: the next patch's development version
    (repo / "README.md").write_text("changed\n")
    _git(repo, "commit", "-q", "-am", "after the release")
    sha = _git(repo, "rev-parse", "--short=7", "HEAD").strip()
    assert _metadata(repo, tmp_path / "dist-checkout")["Version"].startswith(f"1.2.1.dev1+g{sha}")
