"""find_capture_changes: which hunks of `git diff base...head` touch CUDA graph capture.

A block of changed lines counts when
 - its added or removed lines name a graph API (see _patterns.API_PATTERNS) or change an
   engine's graph setting (see _engines), or
 - the def it sits in calls one, or a def/class around it is named for one (a Python
   file's scopes come from its own source; other files fall back to git's hunk header), or
 - it assigns a module-level setting that capture code reads (see _settings), or
 - it reaches a torch.compile site that captures: the call itself, a value its arguments
   read, code the compiled function traces, a call of the compiled function (see _compile_check), or
 - it adds or removes a graph split in a module that a capturing torch.compile of another file
   of the same commit traces or possibly traces (see _split_reach), or
 - its file matches one of the `[capture] globs`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import cached_property
from pathlib import Path

from guard import _git
from guard.cause._compile import CompileView
from guard.cause._compile_check import BlockReach, CompileCheck
from guard.cause._diff import Block, FileDiff, parse_diff
from guard.cause._engines import canonical, is_setting, unchanged_settings
from guard.cause._globs import matching_glob
from guard.cause._models import (
    CaptureChange, CaptureChanges, CaptureHunk, CaptureSetting, GraphSplit, LineRange, MatchedBy,
)
from guard.cause._patterns import code_text, find_apis, find_region_apis, is_comment_line, is_doc_path, is_python_path
from guard.cause._scope import Scope, ScopeIndex
from guard.cause._settings import CaptureSettings
from guard.cause._split_reach import ImportedSplits

EXCERPT_LINES = 3
EXCERPT_WIDTH = 120


def find_capture_changes(repo: Path, base_sha: str, head_sha: str, globs: list[str]) -> CaptureChanges:
    """The changes head made since it left base that touch CUDA graph capture."""
    repo = Path(repo)
    _git.require_repo(repo)
    base = _git.resolve_commit(repo, base_sha, "base commit")
    head = _git.resolve_commit(repo, head_sha, "head commit")
    fork = _git.merge_base(repo, base, head)
    diffs = parse_diff(_git.diff_text(repo, base, head))
    splits = {"added": ImportedSplits(repo, head), "removed": ImportedSplits(repo, fork)}
    files = [change for diff in diffs
             if (change := _FileCheck(repo, fork, head, diff, globs, splits).change()) is not None]
    return CaptureChanges(
        base_sha=base, head_sha=head, merge_base=fork, files=files, changed_files=[d.path for d in diffs]
    )


class _FileCheck:
    """Checks one changed file; reads its two versions from git only when a block needs them."""

    def __init__(self, repo: Path, fork: str, head: str, diff: FileDiff, globs: list[str],
                 splits: dict[str, ImportedSplits]) -> None:
        self.repo, self.fork, self.head, self.diff = repo, fork, head, diff
        self.splits = splits  # by side: "added" lines are read in head, "removed" in the merge base
        paths = [p for p in (diff.new_path, diff.old_path) if p is not None]
        self.glob = next((g for p in paths if (g := matching_glob(p, globs)) is not None), None)
        self.prose = is_doc_path(diff.path)

    def change(self) -> CaptureChange | None:
        if self.prose and self.glob is None:
            return None  # an API named in a README changes no capture
        hunks = [hunk for block in self.diff.blocks if (hunk := self._hunk(block)) is not None]
        if not hunks and self.glob is None:
            return None
        return CaptureChange(
            path=self.diff.path,
            old_path=self.diff.old_path if self.diff.status in ("renamed", "copied") else None,
            status=self.diff.status,  # type: ignore[arg-type]
            binary=self.diff.binary,
            glob=self.glob,
            hunks=hunks,
        )

    def _hunk(self, block: Block) -> CaptureHunk | None:
        path = self.diff.path
        added_text, removed_text = code_text(block.added, path), code_text(block.removed, path)
        added_apis = [] if self.prose else [a.name for a in find_apis(added_text)]
        removed_apis = [] if self.prose else [a.name for a in find_apis(removed_text)]
        # an engine setting given the same value on both sides is left as it was
        kept = unchanged_settings(removed_text, added_text)
        if kept:
            added_apis = [a for a in added_apis if not (is_setting(a) and canonical(a) in kept)]
            removed_apis = [a for a in removed_apis if not (is_setting(a) and canonical(a) in kept)]
        # blank and comment-only changes do not change what runs, whatever def they sit in
        has_code = any(line.strip() and not is_comment_line(line, path) for _, line in block.lines)
        scope_apis = self._scope_apis(block) if has_code and not self.prose else []
        settings = self._settings(block) if has_code else []
        compiled = self._compile(block) if has_code and not self.prose else BlockReach()
        added_apis += [a for a in compiled.added_apis if a not in added_apis]
        removed_apis += [a for a in compiled.removed_apis if a not in removed_apis]
        settings += [s for s in compiled.settings if s not in settings]
        splits = self._splits(block) if has_code and not self.prose and self._indexable() else []
        added_apis += [a for a in _unique(s.api for s in splits if s.side == "added") if a not in added_apis]
        removed_apis += [a for a in _unique(s.api for s in splits if s.side == "removed") if a not in removed_apis]

        matched: list[MatchedBy] = []
        if added_apis or removed_apis or scope_apis:
            matched.append("api")
        if self.glob is not None:
            matched.append("glob")
        if settings:
            matched.append("capture-setting")
        if any(r.how in ("call-site", "captured-call") for r in compiled.reaches):
            matched.append("compile")
        if any(r.how == "compiled-code" for r in compiled.reaches):
            matched.append("compiled-code")
        if splits:
            matched.append("imported-code")
        if not matched:
            return None
        return CaptureHunk(
            range=_head_range(block),
            base_start=block.old_start,
            base_lines=len(block.removed),
            matched_by=matched,
            added_apis=added_apis,
            removed_apis=removed_apis,
            scope_apis=[a for a in scope_apis if a not in added_apis and a not in removed_apis],
            settings=settings,
            compile=compiled.reaches,
            splits=splits,
            function=self._function(block),
            excerpt=_excerpt(block),
        )

    def _compile(self, block: Block) -> BlockReach:
        if self._compile_check is None:
            return BlockReach()
        path = self.diff.path

        def code(lines: list[str], start: int) -> dict[int, str]:
            return {start + i: line for i, line in enumerate(lines)
                    if line.strip() and not is_comment_line(line, path)}

        return self._compile_check.block(code(block.added, block.new_start), code(block.removed, block.old_start))

    @cached_property
    def _compile_check(self) -> CompileCheck | None:
        views = [CompileView(index) if index is not None and index.tree is not None else None
                 for index in (self._head_index, self._base_index)]
        if all(view is None or not view.sites for view in views):
            return None
        return CompileCheck(*views)

    def _splits(self, block: Block) -> list[GraphSplit]:
        """Graph splits on the block's lines outside the file's own compiled code that a capturing
        torch.compile of another file reaches."""
        found: list[GraphSplit] = []
        check = self._compile_check
        for side, lines, start, view in (("added", block.added, block.new_start, check.head if check else None),
                                         ("removed", block.removed, block.old_start, check.base if check else None)):
            path = self.diff.new_path if side == "added" else self.diff.old_path
            if path is None:
                continue
            for number, line in enumerate(lines, start=start):
                if is_comment_line(line, path) or (view is not None and view.region_at(number)):
                    continue  # a split in the file's own compiled code is _compile_check's
                for api in find_region_apis(line):
                    split = self.splits[side].split(path, number, api.name, side)
                    if split is not None:
                        found.append(split)
        return found

    # -- scopes -------------------------------------------------------------------------

    def _indexable(self) -> bool:
        return is_python_path(self.diff.path) and not self.diff.binary

    def _scope_apis(self, block: Block) -> list[str]:
        if self._head_index is None and self._base_index is None:
            return [a.name for a in find_apis(block.header)]  # only git's hunk header to go by
        found: list[str] = []
        for index, start, count in ((self._head_index, block.new_start, len(block.added)),
                                    (self._base_index, block.old_start, len(block.removed))):
            lines = range(start, start + count)
            found += [a for scope in _union(index, start, count) for a in scope.apis_at(lines)]
        return list(dict.fromkeys(found))

    @cached_property
    def _head_index(self) -> ScopeIndex | None:
        return self._index(self.head, self.diff.new_path)

    @cached_property
    def _base_index(self) -> ScopeIndex | None:
        return self._index(self.fork, self.diff.old_path)

    def _index(self, sha: str, path: str | None) -> ScopeIndex | None:
        if path is None or not self._indexable():
            return None
        source = _git.file_at(self.repo, sha, path)
        return ScopeIndex(source, path) if source is not None else None

    @cached_property
    def _head_settings(self) -> CaptureSettings | None:
        return CaptureSettings(self._head_index) if self._head_index is not None else None

    def _settings(self, block: Block) -> list[CaptureSetting]:
        settings = self._head_settings if block.added and not self.prose else None
        if settings is None:
            return []
        uses = settings.in_lines(block.new_start, block.new_start + len(block.added) - 1)
        return [CaptureSetting(name=u.name, reader=u.reader, gates=u.gates, via=u.via) for u in uses]

    def _function(self, block: Block) -> str | None:
        """The innermost def/class around the block's first changed line, head version first."""
        for index, line, count in (
            (self._head_index, block.new_start, len(block.added)),
            (self._base_index, block.old_start, len(block.removed)),
        ):
            if index is not None and count:
                chain = index.chain(line)
                return chain[-1].qualname if chain else None
        return _header_name(block.header) if block.header else None


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


def _union(index: ScopeIndex | None, start: int, count: int) -> list[Scope]:
    if index is None or count == 0:
        return []
    seen: dict[str, Scope] = {}
    for line in range(start, start + count):
        for scope in index.chain(line):
            seen.setdefault(f"{scope.qualname}@{scope.start}", scope)
    return list(seen.values())


def _head_range(block: Block) -> LineRange:
    if block.added:
        return LineRange(start=block.new_start, end=block.new_start + len(block.added) - 1)
    return LineRange(start=block.new_start, end=block.new_start, deletion=True)


def _excerpt(block: Block) -> list[str]:
    lines = [f"{sign}{text.rstrip()}" for sign, text in block.lines if text.strip()]
    return [line if len(line) <= EXCERPT_WIDTH else line[: EXCERPT_WIDTH - 1] + "…" for line in lines[:EXCERPT_LINES]]


def _header_name(header: str) -> str | None:
    """A function or class name out of git's hunk header, for files with no scope index."""
    for pattern in (r"([A-Za-z_][\w:~]*)\s*\(", r"\b(?:class|struct|def|fn|func)\s+([A-Za-z_]\w*)"):
        match = re.search(pattern, header)
        if match:
            return match[1]
    return None
