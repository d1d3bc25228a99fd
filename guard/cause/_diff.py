"""Parse `git diff --unified=0` output into files and blocks of changed lines.

The parser does not trust hunk bodies to hold only +/- lines (a user's
diff.interHunkContext can add context lines), so it walks every hunk line and
cuts it into blocks of consecutive changes, each with its own line numbers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_HUNK_RE = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@ ?(.*)$")
_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}


@dataclass
class Block:
    """Consecutive removed and added lines. Line numbers are 1-based.

    old_start/new_start: first removed/added line; when nothing was removed (added)
    they hold the line the change sits after in that version, as git's hunk header does.
    """

    old_start: int
    new_start: int
    removed: list[str] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    header: str = ""  # git's function context from the @@ line

    @property
    def lines(self) -> list[tuple[str, str]]:
        return [("-", line) for line in self.removed] + [("+", line) for line in self.added]


@dataclass
class FileDiff:
    old_path: str | None  # None for a new file
    new_path: str | None  # None for a deleted file
    binary: bool = False
    renamed: bool = False
    copied: bool = False
    blocks: list[Block] = field(default_factory=list)

    @property
    def path(self) -> str:
        """The path the file has after the change, or had before a deletion."""
        path = self.new_path or self.old_path
        assert path is not None
        return path

    @property
    def status(self) -> str:
        if self.old_path is None:
            return "added"
        if self.new_path is None:
            return "deleted"
        if self.renamed:
            return "renamed"
        if self.copied:
            return "copied"
        return "modified"


def parse_diff(text: str) -> list[FileDiff]:
    files: list[FileDiff] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        if lines[i].startswith("diff --git "):
            i = _parse_file(lines, i, files)
        else:
            i += 1  # anything outside a file section (there should be nothing) is skipped
    return files


def _parse_file(lines: list[str], i: int, files: list[FileDiff]) -> int:
    # the later header lines, where present, name the paths without ambiguity and win
    old, new = _split_git_line(lines[i][len("diff --git "):])
    entry = FileDiff(old_path=old, new_path=new)
    i += 1
    while i < len(lines) and not lines[i].startswith(("diff --git ", "@@ ")):
        line = lines[i]
        if line.startswith("new file mode"):
            entry.old_path = None
        elif line.startswith("deleted file mode"):
            entry.new_path = None
        elif line.startswith("rename from "):
            entry.old_path, entry.renamed = _unquote(line[len("rename from "):]), True
        elif line.startswith("rename to "):
            entry.new_path, entry.renamed = _unquote(line[len("rename to "):]), True
        elif line.startswith("copy from "):
            entry.old_path, entry.copied = _unquote(line[len("copy from "):]), True
        elif line.startswith("copy to "):
            entry.new_path, entry.copied = _unquote(line[len("copy to "):]), True
        elif line.startswith("--- "):
            entry.old_path = _strip_prefix(_file_line_name(line[4:]), "a/")
        elif line.startswith("+++ "):
            entry.new_path = _strip_prefix(_file_line_name(line[4:]), "b/")
        elif line.startswith(("Binary files ", "GIT binary patch")):
            entry.binary = True
        i += 1
    while i < len(lines) and lines[i].startswith("@@ "):
        i = _parse_hunk(lines, i, entry)
    files.append(entry)
    return i


def _parse_hunk(lines: list[str], i: int, entry: FileDiff) -> int:
    match = _HUNK_RE.match(lines[i])
    if match is None:
        return i + 1
    old_no, new_no = int(match[1]), int(match[3])
    old_left = int(match[2]) if match[2] is not None else 1
    new_left = int(match[4]) if match[4] is not None else 1
    header = match[5].strip()
    # with a zero count git names the line before the change; step to the hunk's first line
    old_next = old_no if old_left else old_no + 1
    new_next = new_no if new_left else new_no + 1
    block: Block | None = None
    first_block = len(entry.blocks)
    i += 1
    while i < len(lines) and (old_left > 0 or new_left > 0):
        line = lines[i]
        kind, body = line[:1], line[1:]
        if kind == "\\":  # "\ No newline at end of file"
            i += 1
            continue
        if kind not in ("-", "+"):
            block = None
            old_next, new_next = old_next + 1, new_next + 1
            old_left, new_left = old_left - 1, new_left - 1
            i += 1
            continue
        if block is None:
            block = Block(old_start=old_next, new_start=new_next, header=header)
            entry.blocks.append(block)
        if kind == "-":
            block.removed.append(body)
            old_next, old_left = old_next + 1, old_left - 1
        else:
            block.added.append(body)
            new_next, new_left = new_next + 1, new_left - 1
        i += 1
    for block in entry.blocks[first_block:]:
        # a side with no lines keeps git's convention: it names the line the change sits after
        if not block.removed:
            block.old_start -= 1
        if not block.added:
            block.new_start -= 1
    while i < len(lines) and lines[i].startswith("\\"):
        i += 1
    return i


def _split_git_line(rest: str) -> tuple[str | None, str | None]:
    """Both paths of a `diff --git a/X b/Y` line; only trusted when no other header names them."""
    if rest.startswith('"'):
        first, remainder = _take_quoted(rest)
        second = _unquote(remainder.strip())
        return _strip_prefix(first, "a/"), _strip_prefix(second, "b/")
    if rest.endswith('"'):
        cut = rest.find(' "')
        return _strip_prefix(rest[:cut], "a/"), _strip_prefix(_unquote(rest[cut + 1:]), "b/")
    # unquoted and unrenamed: "a/P b/P", so P is the middle of the line
    if len(rest) % 2 == 1:
        half = (len(rest) - 1) // 2
        if rest[half] == " " and rest[2:half] == rest[half + 3:]:
            return rest[2:half], rest[half + 3:]
    old, _, new = rest.partition(" b/")
    return _strip_prefix(old, "a/"), new


def _file_line_name(raw: str) -> str | None:
    if raw == "/dev/null":
        return None
    if raw.startswith('"'):
        return _unquote(raw)
    # git ends a name holding a space with a tab, for GNU patch
    return raw[:-1] if raw.endswith("\t") else raw


def _strip_prefix(name: str | None, prefix: str) -> str | None:
    if name is None or name == "/dev/null":
        return None
    return name[len(prefix):] if name.startswith(prefix) else name


def _take_quoted(text: str) -> tuple[str, str]:
    """The C-quoted string at the start of `text` (unquoted), and what follows it."""
    j = 1
    while j < len(text):
        if text[j] == "\\":
            j += 2
            continue
        if text[j] == '"':
            return _unquote(text[: j + 1]), text[j + 1:]
        j += 1
    return _unquote(text), ""


def _unquote(text: str) -> str:
    """Undo git's C-style quoting: escapes and octal bytes, then decode the bytes as UTF-8."""
    if not (len(text) >= 2 and text.startswith('"') and text.endswith('"')):
        return text
    body = text[1:-1]
    out = bytearray()
    j = 0
    while j < len(body):
        char = body[j]
        if char != "\\" or j + 1 >= len(body):
            out += char.encode("utf-8")
            j += 1
            continue
        nxt = body[j + 1]
        if nxt in _ESCAPES:
            out.append(_ESCAPES[nxt])
            j += 2
        elif nxt.isdigit():
            out.append(int(body[j + 1:j + 4], 8))
            j += 4
        else:
            out += nxt.encode("utf-8")
            j += 2
    return out.decode("utf-8", errors="replace")
