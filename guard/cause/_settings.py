"""Settings that capture code reads, such as `CAPTURE_MODE = "step"`.

Changing such a value changes what gets captured although its line names no graph API.
Capture code, in the head version of the same file, is
 - a def that calls a graph API (a capture def), or
 - the condition or loop that decides whether a capture def or graph API is called.
A changed line counts when it assigns
 - a module-level name that capture code reads, directly or through one `self.<attr>` it
   is stored in (`self.mode = CAPTURE_MODE`);
 - a `self.<attr>` that capture code reads (`self.idle_us = ...` in `__init__`), directly
   or through one other attribute computed from it (`self.split = self.idle_us > 0`);
 - the default of a parameter that a method stores in such an attribute
   (`def __init__(self, split=None)` with `self.split = bool(split) ...`).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from guard.cause._patterns import find_apis
from guard.cause._scope import Scope, ScopeIndex

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
        self._capturing: list[Reader] = []
        self._attr_flows: dict[str, set[str]] = {}

    def in_lines(self, start: int, end: int) -> list[SettingUse]:
        """Uses by capture code of what statements touching lines start..end assign: module-level
        names, self attributes, and parameter defaults."""
        tree = self.index.tree
        if tree is None or end < start:
            return []
        assigned = [
            name
            for stmt in tree.body
            if _touches(stmt, start, end)
            for name in _assigned_names(stmt)
        ]
        attrs = [
            attr
            for node in ast.walk(tree)
            if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and _touches(node, start, end)
            for attr in _assigned_attrs(node)
        ]
        defaults = _changed_defaults(tree, start, end)
        if not (assigned or attrs or defaults):
            return []
        if self._readers is None:
            self._readers, self._flows = _readers(self.index), _attribute_flows(tree)
            # Attributes are read everywhere in a class: only code that captures counts for them,
            # not code that only replays (a decode step reads its position counter too).
            self._capturing = _capturing_readers(self.index, self._readers)
            self._attr_flows = _attribute_flows(tree, from_attrs=True)
        uses = _uses(assigned, self._readers, self._flows)
        capturing = self._capturing
        uses += _attr_uses(attrs, capturing, self._attr_flows)
        for name, function in defaults:
            stored = _attribute_flows(function).get(name, set())
            uses += [
                SettingUse(f"{name}=", reader.where, reader.gates, f"self.{attr}")
                for reader in capturing for attr in sorted(stored) if attr in reader.attrs
            ]
        return list(dict.fromkeys(uses))


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


REPLAY_ONLY = frozenset({"graph.replay"})


def _capturing_readers(index: ScopeIndex, readers: list[Reader]) -> list[Reader]:
    """The readers in or deciding a def that captures, not one that only replays."""
    defs = index.capture_defs()
    capturing = {s.qualname for s in defs if set(s.apis) - REPLAY_ONLY}
    names = {s.name for s in defs if set(s.apis) - REPLAY_ONLY}
    replaying = {s.name for s in defs} - names

    def captures(reader: Reader) -> bool:
        if reader.gates is None:
            return reader.where in capturing
        called = reader.gates.removesuffix("()")
        if called in names:
            return True
        return called not in replaying and any(a.name not in REPLAY_ONLY for a in find_apis(reader.gates))

    return [r for r in readers if captures(r)]


def _attr_uses(attrs: list[str], readers: list[Reader], flows: dict[str, set[str]]) -> list[SettingUse]:
    uses: list[SettingUse] = []
    for attr in dict.fromkeys(attrs):
        for reader in readers:
            if attr in reader.attrs:
                uses.append(SettingUse(f"self.{attr}", reader.where, reader.gates, None))
            uses += [
                SettingUse(f"self.{attr}", reader.where, reader.gates, f"self.{other}")
                for other in sorted(flows.get(attr, ())) if other != attr and other in reader.attrs
            ]
    return uses


def _touches(node: ast.AST, start: int, end: int) -> bool:
    first = getattr(node, "lineno", None)
    return first is not None and first <= end and start <= (getattr(node, "end_lineno", None) or first)


def _assigned_attrs(node: ast.Assign | ast.AnnAssign | ast.AugAssign) -> list[str]:
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    return [t.attr for t in targets if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)
            and t.value.id in _SELF_NAMES]


def _changed_defaults(tree: ast.Module, start: int, end: int) -> list[tuple[str, ast.AST]]:
    """(parameter, its function) for each parameter whose default touches lines start..end."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        args = node.args
        positional = [*args.posonlyargs, *args.args]
        pairs = list(zip(positional[len(positional) - len(args.defaults):], args.defaults))
        pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]
        found += [(arg.arg, node) for arg, default in pairs if _touches(default, start, end)]
    return found


def _assigned_names(stmt: ast.stmt) -> list[str]:
    if isinstance(stmt, ast.Assign):
        targets = stmt.targets
    elif isinstance(stmt, (ast.AnnAssign, ast.AugAssign)):
        targets = [stmt.target]
    else:
        return []
    names: list[str] = []
    for target in targets:
        # `torch._inductor.config.x = ...` sets an attribute of torch; it does not assign `torch`
        elements = target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]
        names += [e.id for e in elements if isinstance(e, ast.Name)]
        names += [e.value.id for e in elements if isinstance(e, ast.Starred) and isinstance(e.value, ast.Name)]
    return names


def _readers(index: ScopeIndex) -> list[Reader]:
    capture = index.capture_defs()
    capture_names = {s.name for s in capture}
    capture_quals = {s.qualname for s in capture}
    readers = [Reader(s.qualname, None, *_reads(s.node, _anchor_spans(s))) for s in capture if s.node is not None]
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


def _anchor_spans(scope: Scope) -> list[tuple[int, int]] | None:
    """Where a capture def reads what decides capture: everywhere, or, for a def that only calls
    defs named for graphs, at those calls and the conditions around them (see _scope)."""
    if not scope.apis or any(a not in scope.anchors for a in scope.apis):
        return None
    return [span for a in scope.apis for span in scope.anchors[a]]


def _reads(node: ast.AST | None, spans: list[tuple[int, int]] | None = None
           ) -> tuple[frozenset[str], frozenset[str]]:
    names: set[str] = set()
    attrs: set[str] = set()
    for sub in ast.walk(node) if node is not None else ():
        line = getattr(sub, "lineno", None)
        if spans is not None and (line is None or not any(s <= line <= e for s, e in spans)):
            continue
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load):
            names.add(sub.id)
        elif (
            isinstance(sub, ast.Attribute) and isinstance(sub.ctx, ast.Load)
            and isinstance(sub.value, ast.Name) and sub.value.id in _SELF_NAMES
        ):
            attrs.add(sub.attr)
    return frozenset(names), frozenset(attrs)


def _attribute_flows(tree: ast.AST, from_attrs: bool = False) -> dict[str, set[str]]:
    """Name -> self attributes assigned from an expression that reads it; with `from_attrs`,
    self attribute -> self attributes assigned from an expression that reads it."""
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
            if from_attrs:
                if (isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name)
                        and sub.value.id in _SELF_NAMES):
                    flows.setdefault(sub.attr, set()).update(attrs)
            elif isinstance(sub, ast.Name):
                flows.setdefault(sub.id, set()).update(attrs)
    return flows
