"""The comment's note that the head's config changes were not used, with their diff as text."""

from __future__ import annotations

import re

from pydantic import BaseModel

from guard.config import MAX_DIFF_LINES, ConfigChange

_BACKTICKS = re.compile(r"`+")
# control characters other than tab and newline could hide or reorder what the diff shows
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


class ConfigNote(BaseModel):
    sentence: str
    summary: str
    block: str  # a fenced code block that no line of the diff can close


def config_note(change: ConfigChange | None) -> ConfigNote | None:
    if change is None:
        return None
    names = " and ".join(f"`{p}`" for p in change.paths)  # paths are checked: no backtick in them
    cut = f", cut at {MAX_DIFF_LINES} lines" if change.diff_truncated else ""
    return ConfigNote(
        sentence=f"This pull request changes {names}; those changes were not used: "
                 "the guard ran with the base commit's config.",
        summary=f"The head's config changes (not used{cut})",
        block=code_block(change.diff),
    )


def code_block(text: str) -> str:
    """`text` as a fenced code block whose fence is longer than any run of backticks in it."""
    shown = _CONTROL.sub("\N{REPLACEMENT CHARACTER}", text).rstrip("\n")
    longest = max((len(run) for run in _BACKTICKS.findall(shown)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}diff\n{shown}\n{fence}"
