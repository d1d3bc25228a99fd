"""The comment's note that the head's config changes were not used, with their diff as text."""

from __future__ import annotations

from pydantic import BaseModel

from guard._markdown import block, code
from guard.config import MAX_DIFF_LINES, ConfigChange


class ConfigNote(BaseModel):
    sentence: str
    summary: str
    block: str  # a fenced code block that no line of the diff can close


def config_note(change: ConfigChange | None) -> ConfigNote | None:
    if change is None:
        return None
    names = " and ".join(code(p) for p in change.paths)
    cut = f", cut at {MAX_DIFF_LINES} lines" if change.diff_truncated else ""
    return ConfigNote(
        sentence=f"This pull request changes {names}; those changes were not used: "
                 "the guard ran with the base commit's config.",
        summary=f"The head's config changes (not used{cut})",
        block=block(change.diff, "diff"),
    )

