"""Every Markdown file of the repository rendered by GitHub's own parser (cmark-gfm), as GitHub
shows it: a table that a stray paragraph or a short row breaks into a run of pipes, or a
relative link to a file that is not there, is found here rather than by a reader."""

from __future__ import annotations

import re
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlparse

import cmarkgfm
import pytest
from cmarkgfm.cmark import Options

ROOT = Path(__file__).resolve().parents[1]


def _markdown_files() -> list[Path]:
    listed = subprocess.run(["git", "-C", str(ROOT), "ls-files", "*.md"], capture_output=True, text=True, check=True)
    return [ROOT / name for name in listed.stdout.splitlines() if (ROOT / name).is_file()]


class _Rendered(HTMLParser):
    """The paragraphs' text (outside code) and the links of a rendered page."""

    def __init__(self) -> None:
        super().__init__()
        self.paragraphs: list[str] = []
        self.links: list[str] = []
        self._in_p = 0
        self._in_code = 0
        self._text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "p":
            self._in_p += 1
            self._text = []
        elif tag == "code":
            self._in_code += 1
        elif tag == "a":
            self.links += [value for name, value in attrs if name == "href" and value]

    def handle_endtag(self, tag: str) -> None:
        if tag == "p" and self._in_p:
            self._in_p -= 1
            self.paragraphs.append("".join(self._text))
        elif tag == "code" and self._in_code:
            self._in_code -= 1

    def handle_data(self, data: str) -> None:
        if self._in_p and not self._in_code:
            self._text.append(data)


def _render(path: Path) -> _Rendered:
    html = cmarkgfm.github_flavored_markdown_to_html(path.read_text(), options=Options.CMARK_OPT_UNSAFE)
    page = _Rendered()
    page.feed(html)
    return page


def _pipes(paragraph: str) -> bool:
    return any(re.match(r"\s*\|.*\|.*\|", line) for line in paragraph.splitlines())


FILES = _markdown_files()


def test_the_repository_has_markdown_to_check() -> None:
    assert len(FILES) > 50 and ROOT / "README.md" in FILES


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(ROOT)) for p in FILES])
def test_no_table_renders_as_a_run_of_pipes(path: Path) -> None:
    """A paragraph with a line of three pipes or more is a table GitHub did not make."""
    broken = [p for p in _render(path).paragraphs if _pipes(p)]
    assert not broken, f"{path.relative_to(ROOT)}: a table GitHub shows as text: {broken[0][:120]!r}"


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(ROOT)) for p in FILES])
def test_every_relative_link_leads_to_a_file_of_the_repository(path: Path) -> None:
    missing = []
    for href in _render(path).links:
        url = urlparse(href)
        if url.scheme or url.netloc or not url.path:
            continue  # another site, or an anchor on the page itself
        target = (path.parent / unquote(url.path)).resolve()
        if not target.exists():
            missing.append(href)
    assert not missing, f"{path.relative_to(ROOT)}: links to files that are not there: {missing[:5]}"


def test_a_broken_table_is_found() -> None:
    """The check itself: the table docs/github-action.md had, with a paragraph inside it."""
    text = "| output | meaning |\n|---|---|\n| `verdict` | pass |\n\nA paragraph.\n| `x` | y |\n| `z` | w |\n"
    page = _Rendered()
    page.feed(cmarkgfm.github_flavored_markdown_to_html(text))
    assert any(_pipes(p) for p in page.paragraphs)
    good = _Rendered()
    good.feed(cmarkgfm.github_flavored_markdown_to_html(text.replace("\nA paragraph.\n", "")))
    assert not any(_pipes(p) for p in good.paragraphs)


def test_the_quoted_comment_is_the_file_it_cites() -> None:
    """docs/reading-the-comment.md quotes the top of a comment the demo wrote: each quoted line is in that file."""
    text = (ROOT / "docs" / "reading-the-comment.md").read_text()
    cited = re.search(r"\[`(docs/examples/[^`]+/comment\.md)`\]", text)
    assert cited, "docs/reading-the-comment.md cites no example comment"
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("> **Decode"))
    quoted = []
    for line in lines[start:]:
        if not line.startswith(">"):
            break
        quoted.append(line[2:] if line.startswith("> ") else "")
    source = (ROOT / cited.group(1)).read_text().splitlines()
    assert len(quoted) > 5 and [q for q in quoted if q and q not in source] == []


def test_the_outputs_page_states_the_schema_version_the_guard_writes() -> None:
    from guard.report import SCHEMA_VERSION

    stated = re.search(r"`schema_version` \((\d+),", (ROOT / "docs" / "outputs.md").read_text())
    assert stated and int(stated.group(1)) == SCHEMA_VERSION


def _blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", text, re.M | re.S)


def test_the_readmes_workflow_is_the_example_that_make_lint_checks() -> None:
    """The README shows a whole workflow; `make lint` checks examples/workflows/ only, so the
    README's is held to be that file, key for key."""
    import yaml

    shown = _blocks((ROOT / "README.md").read_text(), "yaml")
    assert len(shown) == 1, "the README shows one workflow"
    example = yaml.safe_load((ROOT / "examples" / "workflows" / "private-repo.yml").read_text())
    assert yaml.safe_load(shown[0]) == example
