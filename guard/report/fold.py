"""How much a reader meets before the first fold of a comment: `python -m guard.report.fold
COMMENT.md` prints the words above its first `<details>`, counted as the comment-shape test
counts them (tests/test_comment_shape.py holds every rendered comment to its limit)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

FOLD = "<details>"
_HIDDEN = re.compile(r"<!--.*?-->", re.S)  # the comment's marker: GitHub does not show it


def above_the_fold(markdown: str) -> str:
    """The comment up to its first fold; all of it when it has none."""
    return markdown.split(FOLD, 1)[0]


def words(markdown: str) -> int:
    """Words as a reader sees them: a run of non-space holding a letter or a digit, so the
    table's pipes and dashes and the hidden marker are not counted."""
    return sum(1 for w in _HIDDEN.sub("", markdown).split() if re.search(r"[A-Za-z0-9]", w))


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m guard.report.fold COMMENT.md\n"
              "fold: error: name one comment file (a guard run's comment.md)", file=sys.stderr)
        return 2
    path = Path(argv[0])
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        print(f"fold: error: cannot read {path}: {exc}; pass a guard run's comment.md", file=sys.stderr)
        return 2
    print(words(above_the_fold(text)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
