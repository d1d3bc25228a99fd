"""The torch.compile sites of one Python file version: what each compiles, how, and whether it captures.

A site is a `torch.compile(...)` call or a `@torch.compile` / `@torch.compile(...)` decorator.
Its arguments are resolved through the file (see _values): a literal, a module constant, an
environment default, a parameter default, a self attribute, a config field, a `**kwargs` dict.
A site captures CUDA graphs when
 - `options={"triton.cudagraphs": ...}` says so (it wins over the mode); else
 - a `backend` other than "inductor" is given: only "cudagraphs" captures; else
 - its mode is "reduce-overhead" or "max-autotune", or the file does not fix the mode
   (an environment variable, a caller, a command line or a config can set it).
No mode at all is torch's "default", which captures nothing.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from functools import cached_property

from guard.cause._models import CompileSite
from guard.cause._region import Regions, RegionDef
from guard.cause._scope import ScopeIndex
from guard.cause._values import UNKNOWN, Resolved, Source, ValueResolver, Where

CAPTURING_MODES = frozenset({"reduce-overhead", "max-autotune"})
# Arguments whose value decides whether a site captures at all (fullgraph, dynamic and the
# rest only shape what a capturing site captures).
DECIDING_ARGUMENTS = ("mode", "options", "backend")
_COMPILE = "torch.compile"


@dataclass
class Site:
    form: str  # "call" or "decorator"
    line: int
    statement: tuple[int, int]  # lines of the statement holding the call, or of the decorator
    caller: str  # qualified name of the def holding it, or "module level"
    where: Where
    target_expr: ast.expr | None
    target_defs: list[ast.FunctionDef | ast.AsyncFunctionDef]
    target: str | None  # qualified name of the first target def, or the argument's text
    bound: list[tuple[str, ast.AST | None]]  # names and self attributes the result is stored in, with their scope
    arguments: dict[str, Resolved] = field(default_factory=dict)  # given arguments, **kwargs entries merged in
    spread: dict[str, Resolved] = field(default_factory=dict)  # `**name` arguments, by name
    gates: list[Resolved] = field(default_factory=list)  # conditions of the if/while blocks around the call

    @property
    def mode(self) -> Resolved | None:
        if "mode" in self.arguments:
            return self.arguments["mode"]
        if self.spread and any(not r.known or not isinstance(r.value, dict) for r in self.spread.values()):
            return Resolved(UNKNOWN, "unknown", True)
        return None  # not given: torch's default

    @property
    def captures(self) -> bool:
        options = self.arguments.get("options")
        if options is not None:
            if not options.known or not isinstance(options.value, dict):
                return True
            if "triton.cudagraphs" in options.value:
                flag = options.value["triton.cudagraphs"]
                return True if flag is UNKNOWN else bool(flag)
        backend = self.arguments.get("backend")
        if backend is not None and not (backend.known and backend.value in (None, "inductor")):
            return not backend.known or backend.overridable or backend.value == "cudagraphs"
        mode = self.mode
        if mode is None:
            return False
        if not mode.known or mode.overridable:
            return True
        return mode.value in CAPTURING_MODES

    def sources(self) -> list[tuple[str, Source]]:
        """(argument, source) for every statement whose value reaches one of the site's arguments."""
        found = [(name, s) for name, value in self.arguments.items() for s in value.sources]
        found += [(f"**{name}", s) for name, value in self.spread.items() for s in value.sources]
        found += [("condition", s) for gate in self.gates for s in gate.sources]
        return found

    def key(self) -> tuple[str, str, str]:
        """What pairs a site of base with its version in head."""
        target = ast.unparse(self.target_expr) if self.target_expr is not None else self.target or ""
        return (self.form, self.caller, target)

    def model(self) -> CompileSite:
        mode = self.mode
        return CompileSite(
            line=self.line,
            caller=self.caller,
            form=self.form,  # type: ignore[arg-type]
            target=self.target,
            mode=mode.value if mode is not None and isinstance(mode.value, str) else None,
            mode_known=mode is None or (mode.known and not mode.overridable),
            mode_source="default" if mode is None else mode.origin,
            env_var=mode.env_var if mode is not None else None,
            backend=_static(self.arguments.get("backend"), str),
            fullgraph=_static(self.arguments.get("fullgraph"), bool),
            dynamic=_static(self.arguments.get("dynamic"), bool),
            cudagraphs_option=_option(self.arguments.get("options")),
            captures_graphs=self.captures,
        )


class CompileView:
    """The compile sites of one file version and the defs they capture, asked about many blocks."""

    def __init__(self, index: ScopeIndex) -> None:
        assert index.tree is not None
        self.index = index
        self.resolver = ValueResolver(index)
        self.regions = Regions(index)
        self._parents = {id(child): parent for parent in ast.walk(index.tree)
                         for child in ast.iter_child_nodes(parent)}
        self.sites = self._find_sites()

    # -- questions about a block's lines -------------------------------------------------

    def sites_touching(self, start: int, end: int) -> list[Site]:
        return [s for s in self.sites if s.statement[0] <= end and start <= s.statement[1]]

    def sources_touching(self, start: int, end: int) -> list[tuple[Site, str, Source]]:
        return [(site, argument, source) for site in self.sites for argument, source in site.sources()
                if source.start <= end and start <= source.end
                and not (site.statement[0] <= source.start and source.end <= site.statement[1])]

    def region_at(self, line: int) -> list[tuple[Site, RegionDef]]:
        """The capturing sites whose region holds `line`, with the innermost region def holding it."""
        found = []
        for site, defs in self.captured:
            holding = [d for d in defs if d.scope.start <= line <= d.scope.end]
            if holding:
                found.append((site, max(holding, key=lambda d: d.scope.start)))
        return found

    def captured_calls(self, start: int, end: int) -> list[tuple[Site, int]]:
        """(site, line) for each call on lines start..end of what a capturing site returned."""
        found = []
        for site in self.sites:
            if not site.captures or not site.bound:
                continue
            for call in self._calls:
                if not (call.lineno <= end and start <= (call.end_lineno or call.lineno)):
                    continue
                if site.statement[0] <= call.lineno <= site.statement[1]:
                    continue
                spelt = ast.unparse(call.func)
                if any(spelt == name and _visible(scope, call, self._parents) for name, scope in site.bound):
                    found.append((site, call.lineno))
        return found

    # -- building ------------------------------------------------------------------------

    @cached_property
    def captured(self) -> list[tuple[Site, list[RegionDef]]]:
        """Each capturing site with the defs it traces in this file."""
        return [(site, self.regions.region(site.target_defs)) for site in self.sites if site.captures]

    @cached_property
    def _calls(self) -> list[ast.Call]:
        return [n for n in ast.walk(self.index.tree) if isinstance(n, ast.Call)]  # type: ignore[arg-type]

    def _find_sites(self) -> list[Site]:
        sites: list[Site] = []
        assert self.index.tree is not None
        for node in ast.walk(self.index.tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for decorator in node.decorator_list:
                    call = decorator if isinstance(decorator, ast.Call) else None
                    if ast.unparse(call.func if call is not None else decorator) == _COMPILE:
                        sites.append(self._site("decorator", decorator, call, node))
            elif isinstance(node, ast.Call) and ast.unparse(node.func) == _COMPILE:
                if any(node is d for d in self._decorators_of(node)):
                    continue
                sites.append(self._site("call", node, node, None))
        return sorted(sites, key=lambda s: s.line)

    def _decorators_of(self, node: ast.AST) -> list[ast.expr]:
        parent = self._parents.get(id(node))
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return parent.decorator_list
        return []

    def _site(self, form: str, node: ast.expr, call: ast.Call | None,
              decorated: ast.FunctionDef | ast.AsyncFunctionDef | None) -> Site:
        line = node.lineno
        where = self.resolver.where(line)
        if decorated is not None:
            where = _outer(where, decorated)
        statement = self._statement(node) if decorated is None else (node.lineno, node.end_lineno or node.lineno)
        target = call.args[0] if call is not None and call.args and decorated is None else None
        if call is not None and target is None and decorated is None:
            target = next((k.value for k in call.keywords if k.arg == "model"), None)
        caller = _qualname(self.index, where.function)
        defs = [decorated] if decorated is not None else self.regions.targets(target, where)
        name = _qualname(self.index, defs[0]) if defs else ast.unparse(target) if target is not None else None
        site = Site(form, line, statement, caller, where, target, defs, name,
                    self._bound(node) if decorated is None else [(decorated.name, None)])
        for keyword in call.keywords if call is not None else []:
            if keyword.arg is None:
                name = ast.unparse(keyword.value)
                spread = self.resolver.resolve(keyword.value, where)
                site.spread[name] = spread
                if spread.known and isinstance(spread.value, dict):
                    for key, value in spread.value.items():
                        if isinstance(key, str):
                            site.arguments.setdefault(key, Resolved(value, spread.origin, spread.overridable,
                                                                    spread.env_var, []))
            elif keyword.arg != "model":
                site.arguments[keyword.arg] = self.resolver.resolve(keyword.value, where)
        site.gates = [self.resolver.resolve(test, where) for test in self._gates(node, where)]
        return site

    def _statement(self, node: ast.AST) -> tuple[int, int]:
        current: ast.AST = node
        while not isinstance(current, ast.stmt):
            parent = self._parents.get(id(current))
            if parent is None:
                break
            current = parent
        return (getattr(current, "lineno", 1), getattr(current, "end_lineno", None) or getattr(current, "lineno", 1))

    def _bound(self, call: ast.Call) -> list[tuple[str, ast.AST | None]]:
        """Where the compiled result is stored: `step = torch.compile(...)`, `self.step = ...`."""
        parent = self._parents.get(id(call))
        if not isinstance(parent, (ast.Assign, ast.AnnAssign)):
            return []
        targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target]
        function = self.resolver.where(call.lineno).function
        bound: list[tuple[str, ast.AST | None]] = []
        for target in targets:
            if isinstance(target, ast.Name):
                declared_global = function is not None and any(
                    isinstance(n, ast.Global) and target.id in n.names for n in ast.walk(function))
                bound.append((target.id, None if declared_global or function is None else function))
            elif isinstance(target, ast.Attribute):
                bound.append((ast.unparse(target), None))
        return bound

    def _gates(self, node: ast.AST, where: Where) -> list[ast.expr]:
        tests: list[ast.expr] = []
        current: ast.AST = node
        while True:
            parent = self._parents.get(id(current))
            if parent is None or parent is where.function:
                return tests
            if isinstance(parent, (ast.If, ast.While)) and current is not parent.test:
                tests.append(parent.test)
            elif isinstance(parent, ast.IfExp) and current is not parent.test:
                tests.append(parent.test)
            current = parent


def _visible(scope: ast.AST | None, call: ast.Call, parents: dict[int, ast.AST]) -> bool:
    """Whether a call sits where a name bound in `scope` (None: module level) is the compiled one."""
    if scope is None:
        return True
    current: ast.AST | None = call
    while current is not None:
        if current is scope:
            return True
        current = parents.get(id(current))
    return False


def _outer(where: Where, decorated: ast.AST) -> Where:
    """The scope a decorated def sits in (its decorator runs there), not the def itself."""
    if where.function is decorated:
        return Where(where.enclosing[0] if where.enclosing else None, where.cls, where.enclosing[1:])
    return where


def _qualname(index: ScopeIndex, function: ast.AST | None) -> str:
    if function is None:
        return "module level"
    scope = next((s for s in index.scopes if s.node is function), None)
    return scope.qualname if scope is not None else getattr(function, "name", "module level")


def _static(value: Resolved | None, kind: type) -> object:
    if value is None or not value.known or value.overridable or not isinstance(value.value, kind):
        return None
    return value.value


def _option(options: Resolved | None) -> bool | None:
    if options is None or not options.known or not isinstance(options.value, dict):
        return None
    flag = options.value.get("triton.cudagraphs", None)
    return bool(flag) if flag is not None and flag is not UNKNOWN else None
