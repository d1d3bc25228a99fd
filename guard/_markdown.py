"""Strings from a report or from git, made inert for GitHub-flavoured Markdown and HTML.

Every such string (a commit subject, a ref, a file name, a log tail, an arm's name, a
kernel's) goes through one of these where it is rendered, so it shows as the text it is:
no link, autolink, image, heading, list, table cell, emphasis, HTML tag, mention, issue
reference or code block can come from it. The visible text stays the same: Markdown
backslash escapes render as the character escaped, and the zero-width space that breaks
GitHub's autolinkers and mentions is not seen.
"""

from __future__ import annotations

import re

# Backslash-escaped wherever they stand: what opens code, emphasis, strike-through, links,
# raw HTML, entities, table cells and headings, and the escape character itself.
_ALWAYS = re.compile(r"([\\`*_~\[\]<>&|#])")
# What makes a list, a quote, a thematic break or a setext line, at the start of a line only.
_LEADING = re.compile(r"\A([-+=]|\d{1,9}(?=[.)]))")
_URL_SCHEME = re.compile(r":(?=//)")  # GitHub links http://..., ftp://... while parsing
_WWW = re.compile(r"(?i)(?<![A-Za-z0-9])(www)\.")  # and www.example...
_NEWLINES = re.compile(r"\r\n?|\n")
_BACKTICKS = re.compile(r"`+")
_PUNCTUATION = re.compile(r"[!-/:-@\[-`{-~]")  # every ASCII punctuation mark
ZERO_WIDTH = "\u200b"
# GitHub's filters after Markdown: @user and @org/team mentions, e-mail autolinks, and
# issue references (#12, GH-12), which would ping people and link other threads.
_AFTER_RENDER = re.compile(r"(?<=@)(?=[A-Za-z0-9])|(?<=#)(?=\d)|(?i:(?<=\bGH-))(?=\d)")


# What can hide, reorder or overwrite what a line shows: the C0 and C1 controls (but tab and
# newline, which each caller places), the bidirectional marks, embeddings, overrides and
# isolates, and the line and paragraph separators. A commit subject with U+202E would show its
# text reversed, and the text after it in the title too.
_UNSEEN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")


def visible(value: object) -> str:
    """`value` with each such character written as its code point, `<U+202E>`: plain text for
    a title or a page, and the first step of every function here."""
    return _UNSEEN.sub(lambda m: f"<U+{ord(m[0]):04X}>", str(value))


def text(value: object) -> str:
    """Markdown inline text that renders as `value` and nothing else; one line."""
    # leading blanks would make an indented code block at a paragraph's start; shown, they collapse
    line = visible(_NEWLINES.sub(" ", str(value))).lstrip(" \t")
    line = _ALWAYS.sub(r"\\\1", line)
    line = _LEADING.sub(lambda m: "\\" + m[1] if m[1] in "-+=" else m[1] + "\\", line)
    line = _WWW.sub(r"\1\\.", _URL_SCHEME.sub(r"\\:", line))
    return _AFTER_RENDER.sub(ZERO_WIDTH, line)


def code(value: object) -> str:
    """An inline code span of `value`: fenced longer than any backtick run inside, so none
    can close it, and on one line, so no blank line can end its paragraph. Not for table
    cells, where GitHub splits a code span at '|'."""
    inner = visible(_NEWLINES.sub(" ", str(value))) or " "
    fence = "`" * (_longest_run(inner) + 1)
    # A space on each side is taken off again by the renderer; it keeps a backtick at either
    # end off the fence, and keeps a value that starts and ends with a space as it is.
    padded = inner.startswith("`") or inner.endswith("`") or (inner[:1] == inner[-1:] == " " and inner.strip())
    return f"{fence} {inner} {fence}" if padded else f"{fence}{inner}{fence}"


def block(value: object, language: str = "") -> str:
    """A fenced code block of `value`, fenced longer than any backtick run in it, so no line
    of it can close the block. Starts and ends with its fence lines, without a newline after.
    Control and bidirectional characters (but tab and newline), which could hide or reorder what
    it shows, are written as their code points (`visible`); a carriage return ends a line. `language`
    is the guard's own word (e.g. "diff"), never a report's string."""
    body = visible(_NEWLINES.sub("\n", str(value)).rstrip("\n"))
    fence = "`" * max(3, _longest_run(body) + 1)
    return f"{fence}{language}\n{body}\n{fence}"


def html(value: object) -> str:
    """Text for inside an HTML element (a <summary>), on one line: every ASCII punctuation mark
    as a character reference, which the HTML and the Markdown reader alike show as itself, so
    it holds whether or not the element opens an HTML block; mentions broken as in `text`."""
    line = _AFTER_RENDER.sub(ZERO_WIDTH, visible(_NEWLINES.sub(" ", str(value))))
    return _PUNCTUATION.sub(lambda m: f"&#{ord(m[0])};", line)


def _longest_run(value: str) -> int:
    return max((len(run) for run in _BACKTICKS.findall(value)), default=0)
