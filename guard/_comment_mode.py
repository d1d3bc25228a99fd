"""When the sticky comment is written: the modes of the Action's `comment` input, `guard
comment --mode` and the service's `--comment-mode`, in one place. Light on purpose: the
command line's parser offers them before any stage is imported."""

from __future__ import annotations

from typing import Literal

CommentMode = Literal["unless-green", "on-regression", "always", "never"]
COMMENT_MODES: tuple[CommentMode, ...] = ("unless-green", "on-regression", "always", "never")
# every verdict that holds the merge gets a comment: a regression, an invalid run, an undecided one
DEFAULT_COMMENT_MODE: CommentMode = "unless-green"
GREEN_VERDICTS = ("pass", "improvement")


def creates_comment(mode: CommentMode, verdict: str) -> bool:
    """Whether a run of this verdict makes a comment where there is none yet (one that exists
    is brought up to date whatever the mode, but `never`): unless-green for every verdict but
    pass and improvement, on-regression for a regression, always for every one."""
    return {"unless-green": verdict not in GREEN_VERDICTS, "on-regression": verdict == "regression",
            "always": True, "never": False}[mode]
