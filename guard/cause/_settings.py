"""Module-level settings that capture code reads, such as `CAPTURE_MODE = "step"`.

Changing such a constant changes what gets captured although its line names no graph
API. A module-level name counts when, in the head version of the same file, it is read
 - inside a def that calls a graph API (a capture def), or
 - in the condition or loop that decides whether a capture def or graph API is called,
either directly or through one `self.<attr>` it is stored in (`self.mode = CAPTURE_MODE`).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from guard.cause._patterns import find_apis
from guard.cause._scope import ScopeIndex

_SELF_NAMES = ("self", "cls")


@dataclass(frozen=True)
class Reader:
    """Code that decides capture, and the names and self attributes it reads."""

    where: str  # qualname of the def it is in, or "module level"
    gates: str | None  # the call its condition decides, e.g. "_capture()"; None for a capture def
    names: frozenset[str]
    attrs: frozenset[str]


@dataclass(frozen=True)
class SettingUse:
    name: str
    reader: str
    gates: str | None
    via: str | None  # "self.capture_mode" when read through an attribute


class CaptureSettings:
    """The capture readers of one file version, worked out once and asked about many blocks."""

    def __init__(self, index: ScopeIndex) -> None:
        self.index = index
        self._readers: list[Reader] | None = None
        self._flows: dict[str, set[str]] = {}

    def in_lines(self, start: int, end: int) -> list[SettingUse]:
        """Uses by capture code of the module-level names assigned by statements touching lines start..end."""
        tree = self.index.tree
        if tree is None or end < start:
            return []
        assigned = [
            name
            for stmt in tree.body
            if stmt.lineno <= end and start <= (stmt.end_lineno or stmt.lineno)
            for name in _assigned_names(stmt)
        ]
        if not assigned:
            return []
        if self._readers is None:
            self._readers, self._flows = _readers(self.index), _attribute_flows(tree)
        return _uses(assigned, self._readers, self._flows)


def _uses(assigned: list[str], readers: list[Reader], flows: dict[str, set[str]]) -> list[SettingUse]:
    uses: list[SettingUse] = []
    for name in dict.fromkeys(assigned):
        for reader in readers:
            if name in reader.names:
                uses.append(SettingUse(name, reader.where, reader.gates, None))
            uses += [
                SettingUse(name, reader.where, reader.gates, f"self.{attr}")
                for attr in sorted(flows.get(name, ())) if attr in reader.attrs
            ]
    return list(dict.fromkeys(uses))


def _assigned_names(stmt: ast.stmt) -> list[str]:
    if isinstance(stmt, ast.Assign):
        targets = stmt.targets
    elif isinstance(stmt, (ast.AnnAssign, ast.AugAssign)):
        targets = [stmt.target]
    else:
        return []
    names: list[str] = []
    for target in targets:
        for node in ast.walk(target):
            if isinstance(node, ast.Name):
                names.append(node.id)
    return names


def _readers(index: ScopeIndex) -> list[Reader]:
    capture = index.capture_defs()
    capture_names = {s.name for s in capture}
    capture_quals = {s.qualname for s in capture}
    readers = [Reader(s.qualname, None, *_reads(s.node)) for s in capture if s.node is not None]
    assert index.tree is not None
    for node in ast.walk(index.tree):
        # the test of an if/while, or the iterable of a for, decides whether the capture below it runs
        if isinstance(node, (ast.If, ast.While)):
            decider: ast.AST = node.test
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            decider = node.iter
        else:
            continue
        called = _capture_call(node.body + node.orelse, capture_names)
        if called is None:
            continue
        chain = index.chain(node.lineno)
        if any(scope.qualname in capture_quals for scope in chain):
            continue  # inside a capture def, whose reader already sees everything it reads
        readers.append(Reader(chain[-1].qualname if chain else "module level", called, *_reads(decider)))
    return readers


def _capture_call(body: list[ast.stmt], capture_names: set[str]) -> str | None:
    """How the first call to a capture def or graph API under `body` is spelt, or None."""
    for stmt in body:
        for node in ast.walk(stmt):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
            if name is None:
                continue
            if name in capture_names or find_apis(ast.unparse(func) + "()"):
                return f"{name}()"
    return None


def _reads(node: ast.AST | None) -> tuple[frozenset[str], frozenset[str]]:
    names: set[str] = set()
    attrs: set[str] = set()
    for sub in ast.walk(node) if node is not None else ():
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load):
            names.add(sub.id)
        elif (
            isinstance(sub, ast.Attribute) and isinstance(sub.ctx, ast.Load)
            and isinstance(sub.value, ast.Name) and sub.value.id in _SELF_NAMES
        ):
            attrs.add(sub.attr)
    return frozenset(names), frozenset(attrs)


def _attribute_flows(tree: ast.Module) -> dict[str, set[str]]:
    """Module name -> self attributes assigned from an expression that reads it."""
    flows: dict[str, set[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        attrs = [
            t.attr for t in targets
            if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id in _SELF_NAMES
        ]
        if not attrs:
            continue
        for sub in ast.walk(value):
            if isinstance(sub, ast.Name):
                flows.setdefault(sub.id, set()).update(attrs)
    return flows
