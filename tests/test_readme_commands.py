"""The commands of the README and of the documentation site's pages work as written: each
`guard` command they show parses with the CLI's own parser (placeholders filled in, its optional
parts left out and then each given), and each `make` target they name is one the Makefile has.
Running them is the demo's and the pipeline's tests' work; here what a reader copies is held to
what the tools accept."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from guard.cli import _parser

ROOT = Path(__file__).resolve().parents[1]


def _commands(text: str) -> list[str]:
    """The commands of the README's shell blocks: continuation lines joined, comments and
    environment assignments dropped."""
    commands, block = [], None
    for line in text.splitlines():
        fence = re.match(r"\s*```(\w*)", line)
        if fence:
            block = None if block is not None else fence.group(1)
            continue
        if block not in ("sh", "bash", "console"):
            continue
        line = re.sub(r"\s+#.*$", "", line).strip()
        if not line or line.startswith("#"):
            continue
        if commands and commands[-1].endswith("\\"):
            commands[-1] = commands[-1][:-1] + " " + line
        else:
            commands.append(line)
    return [re.sub(r"^([A-Z_]+=\S+\s+)+", "", c) for c in commands]


def _concrete(synopsis: str, with_options: bool) -> list[str]:
    """A synopsis as arguments: `a|b` its first choice, an UPPER placeholder a value, each
    `[...]` part left out, or given."""
    def option(match: re.Match[str]) -> str:
        return match.group(1) if with_options else ""

    text = synopsis
    while re.search(r"\[([^\[\]]*)\]", text):
        text = re.sub(r"\[([^\[\]]*)\]", option, text)
    words = []
    for word in shlex.split(text):
        word = word.split("|")[0]
        if word == "...":  # the option before, given again (with its value)
            words += words[-2:] if len(words) > 1 and words[-2].startswith("--") else words[-1:]
            continue
        if re.fullmatch(r"N|DAYS|PCT|X|[A-Z_]*_N", word):
            word = "1"  # a number
        words.append("x" if re.fullmatch(r"[A-Z][A-Z_]*", word) else word)
    return words


# The README, the site's pages and the lab notebook's pages moved from them; the measurements
# and example runs under docs/ keep the commands they ran, of their day.
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "docs" / "notebook").glob("*.md"))]


def _guard_commands(text: str) -> list[str]:
    """The shell blocks' `guard` commands, and the synopses written inline (`guard clean [--repo PATH] ...`)."""
    return [c for c in _commands(text) if c.startswith("guard ")] + re.findall(r"`(guard [a-z]+ [^`]*\[[^`]*)`", text)


GUARD = [(page.relative_to(ROOT).as_posix(), c) for page in PAGES for c in _guard_commands(page.read_text())]


def test_the_pages_show_the_commands_a_user_runs() -> None:
    shown = {command.split()[1] for _, command in GUARD}
    assert {"run", "demo", "calibrate", "analyze", "diff", "export", "explain", "bisect", "comment"} <= shown


def test_the_readmes_quickstart_is_make_demo_and_make_test() -> None:
    shown = [c for c in _commands((ROOT / "README.md").read_text()) if c.startswith("make ")]
    assert shown == ["make demo", "make test"]


@pytest.mark.parametrize(("page", "command"), GUARD)
@pytest.mark.parametrize("with_options", [False, True])
def test_each_guard_command_parses(page: str, command: str, with_options: bool) -> None:
    argv = _concrete(command, with_options)[1:]
    try:
        _parser().parse_args(argv)
    except SystemExit as exc:
        pytest.fail(f"{page}: `{command}` does not parse as {argv} (exit {exc.code})")


def test_each_make_target_is_the_makefiles() -> None:
    targets = set(re.findall(r"^([a-z][a-z-]*):", (ROOT / "Makefile").read_text(), re.M))
    named = [c.split()[1] for page in PAGES for c in _commands(page.read_text()) if c.startswith("make ")]
    assert named and set(named) <= targets, sorted(set(named) - targets)


def test_a_command_the_cli_does_not_take_is_found() -> None:
    with pytest.raises(SystemExit):
        _parser().parse_args(_concrete("guard run --repo x --heads b", True)[1:])
