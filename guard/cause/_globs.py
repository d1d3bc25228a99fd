"""Match repository-relative paths against the `[capture] globs` of guard.toml.

`*` and `?` stay inside one path segment, `**` spans any number of segments, and `[...]`
is a character class, as in fnmatch. A glob without a '/' matches the file name at any
depth, as in .gitignore, so "graph_runner.py" finds it wherever it lives.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import PurePosixPath


def matching_glob(path: str, globs: list[str]) -> str | None:
    """The first glob that matches `path`, or None."""
    name = PurePosixPath(path).name
    for glob in globs:
        pattern = glob.strip().removeprefix("./")
        if not pattern:
            continue
        target = path if "/" in pattern.rstrip("/") else name
        if _compile(pattern.rstrip("/")).fullmatch(target):
            return glob
        if pattern.endswith("/") and _compile(pattern + "**").fullmatch(path):
            return glob  # "engine/" means everything under engine/
    return None


@lru_cache(maxsize=256)
def _compile(glob: str) -> re.Pattern[str]:
    out: list[str] = []
    i = 0
    while i < len(glob):
        char = glob[i]
        if glob.startswith("**/", i):
            out.append("(?:[^/]*/)*")  # zero or more whole directories
            i += 3
        elif glob.startswith("**", i):
            out.append(".*")
            i += 2
        elif char == "*":
            out.append("[^/]*")
            i += 1
        elif char == "?":
            out.append("[^/]")
            i += 1
        elif char == "[" and (end := _class_end(glob, i)) is not None:
            body = glob[i + 1:end]
            if body.startswith("!"):
                body = "^" + body[1:]
            out.append("[" + body.replace("\\", "\\\\") + "]")
            i = end + 1
        else:
            out.append(re.escape(char))
            i += 1
    return re.compile("".join(out))


def _class_end(glob: str, start: int) -> int | None:
    """Index of the ']' closing the class opened at `start`; None means a literal '['."""
    j = start + 1
    if j < len(glob) and glob[j] in "!^":
        j += 1
    if j < len(glob) and glob[j] == "]":
        j += 1  # a ']' first in the class is a member
    end = glob.find("]", j)
    return end if end != -1 else None
