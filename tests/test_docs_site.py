"""The documentation site builds from docs/ with mkdocs in strict mode, as `make docs` builds it:
a link to a page or file that is not there, an anchor a page does not have, or a page left out
of the navigation is a warning, and any warning fails. mkdocs runs as its own command, the way
a reader and `make docs` run it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config),
                           "--site-dir", str(site)], capture_output=True, text=True, cwd=config.parent, timeout=120)


def test_the_site_builds_without_a_warning(tmp_path: Path) -> None:
    built = _build(ROOT / "mkdocs.yml", tmp_path / "site")
    warnings = [line for line in built.stderr.splitlines() if line.startswith(("WARNING", "ERROR"))]
    assert built.returncode == 0 and not warnings, "\n".join(warnings) or built.stderr[-2000:]
    assert (tmp_path / "site" / "configuration" / "index.html").is_file()


def test_a_broken_anchor_fails_the_build(tmp_path: Path) -> None:
    """The check itself: this repository's validation settings on a page whose link names a
    heading the other page does not have."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "index.md").write_text("# Home\n\nSee [the rule](rule.md#the-rule).\n")
    (tmp_path / "docs" / "rule.md").write_text("# Rule\n\n## Another heading\n")
    settings = (ROOT / "mkdocs.yml").read_text().split("\nvalidation:", 1)[1].split("\n\n", 1)[0]
    config = tmp_path / "mkdocs.yml"
    config.write_text("site_name: check\nnav:\n  - index.md\n  - rule.md\nvalidation:" + settings + "\n")
    built = _build(config, tmp_path / "site")
    assert built.returncode != 0 and "does not contain an anchor '#the-rule'" in built.stderr
