"""Where a value in one Python file comes from: its value where the file fixes it, and the lines that make it.

`ValueResolver.resolve(expr)` follows an expression back through what the same file says about it:
 - a literal is itself;
 - a name is what its function assigns it, the default of the parameter it is, or what the
   module assigns it;
 - `self.x` is what any method of the class assigns it, or its class-level default;
 - `obj.x` is the default of a field `x` of a class in the file (a config object, a
   dataclass) together with what its constructor calls pass as `x=`, or the default of an
   argparse option `--x`;
 - `os.environ.get("X", d)` and `os.getenv("X", d)` are `d`, unless the environment says otherwise;
 - `a or b`, `a and b` and `a if c else b` are worked out as Python would, where their parts are known.
Every statement passed on the way is a `Source`: changing it changes the value. A value that
an environment variable, a caller, a command line or a config can change is `overridable`.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Literal

from guard.cause._scope import ScopeIndex

ValueOrigin = Literal["literal", "constant", "environment", "parameter", "attribute", "config", "argument", "unknown"]

SELF_NAMES = ("self", "cls")
_MAX_DEPTH = 8


class _Unknown:
    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN = _Unknown()


@dataclass(frozen=True)
class Source:
    """A statement whose value flows into the expression: a changed line here changes it."""

    name: str  # as the statement names it: COMPILE_MODE, self.mode, mode= (a default), Config.mode, --mode
    start: int
    end: int
    via: str | None = None  # the self attribute the value reaches the expression through, if any
    text: str = ""  # the value as written, to tell a changed value from one that shares its line


@dataclass
class Resolved:
    value: object  # UNKNOWN when the file does not fix it
    origin: ValueOrigin
    overridable: bool = False
    env_var: str | None = None
    sources: list[Source] = field(default_factory=list)

    @property
    def known(self) -> bool:
        return self.value is not UNKNOWN


@dataclass(frozen=True)
class Where:
    """The function and class an expression is evaluated in (None: module level)."""

    function: ast.FunctionDef | ast.AsyncFunctionDef | None
    cls: ast.ClassDef | None
    enclosing: tuple[ast.FunctionDef | ast.AsyncFunctionDef, ...] = ()  # outer functions, innermost first


MODULE = Where(None, None)


class ValueResolver:
    """Resolves expressions of one file version; what it learns of the file is computed once."""

    def __init__(self, index: ScopeIndex) -> None:
        assert index.tree is not None
        self.index = index
        self.tree = index.tree
        self.classes: dict[str, ast.ClassDef] = {}
        for node in ast.walk(self.tree):
            if isinstance(node, ast.ClassDef):
                self.classes.setdefault(node.name, node)
        self._module_assigns = _assignments(self.tree.body, descend_defs=False)

    # -- where an expression sits ------------------------------------------------------

    def where(self, line: int) -> Where:
        chain = self.index.chain(line)
        defs = [i for i, s in enumerate(chain) if s.kind == "def" and s.node is not None]
        if not defs:
            return MODULE
        innermost = defs[-1]
        cls = chain[innermost - 1].node if innermost > 0 and chain[innermost - 1].kind == "class" else None
        functions = [chain[i].node for i in defs]
        return Where(functions[-1], cls, tuple(reversed(functions[:-1])))  # type: ignore[arg-type]

    # -- resolving ---------------------------------------------------------------------

    def resolve(self, expr: ast.expr | None, where: Where, via: str | None = None,
                seen: frozenset[str] = frozenset()) -> Resolved:
        if expr is None:
            return Resolved(None, "literal")
        if len(seen) > _MAX_DEPTH:
            return Resolved(UNKNOWN, "unknown")
        if isinstance(expr, ast.Constant):
            return Resolved(expr.value, "literal")
        if isinstance(expr, ast.Name):
            return self._name(expr.id, expr.lineno, where, via, seen)
        if isinstance(expr, ast.Attribute):
            if isinstance(expr.value, ast.Name) and expr.value.id in SELF_NAMES:
                return self._self_attribute(expr.attr, where, via, seen)
            return self._field(expr, where, via, seen)
        if isinstance(expr, ast.Call):
            env = _environment_default(expr)
            if env is not None:
                var, default = env
                inner = self.resolve(default, where, via, seen)
                return Resolved(inner.value, "environment", True, var, inner.sources)
            return self._opaque(expr, where, via, seen)
        if isinstance(expr, ast.BoolOp):
            return self._bool_op(expr, where, via, seen)
        if isinstance(expr, ast.IfExp):
            test = self.resolve(expr.test, where, via, seen)
            branches = [self.resolve(e, where, via, seen) for e in (expr.body, expr.orelse)]
            if test.known:
                chosen = branches[0] if test.value else branches[1]
                return _with_sources(chosen, test.sources + branches[0].sources + branches[1].sources)
            combined = _combine(branches)
            return _with_sources(combined, test.sources + combined.sources, overridable=test.overridable)
        if isinstance(expr, ast.Dict):
            return self._dict(expr, where, via, seen)
        return self._opaque(expr, where, via, seen)

    def _name(self, name: str, line: int, where: Where, via: str | None, seen: frozenset[str]) -> Resolved:
        key = f"name:{name}@{id(where.function)}"
        if key in seen:
            return Resolved(UNKNOWN, "unknown")
        seen = seen | {key}
        for function in (where.function, *where.enclosing):
            if function is None or name in _globals(function):
                break
            results = [self._assigned(name, stmt, value, Where(function, where.cls, where.enclosing), via, seen)
                       for stmt, value in _assignments(function.body).get(name, [])]
            parameter = _parameter(function, name)
            if parameter is not None:
                results.append(self._default(name, parameter[1], via, seen))
            if results:
                return _combine(results)
        results = [self._assigned(name, stmt, value, MODULE, via, seen, constant=True)
                   for stmt, value in self._module_assigns.get(name, [])]
        return _combine(results) if results else Resolved(UNKNOWN, "unknown")

    def _assigned(self, name: str, stmt: ast.stmt, value: ast.expr | None, where: Where, via: str | None,
                  seen: frozenset[str], constant: bool = False) -> Resolved:
        inner = self.resolve(value, where, via, seen) if value is not None else Resolved(UNKNOWN, "unknown")
        origin = inner.origin
        if constant and origin == "literal":
            origin = "constant"
        own = Source(name, stmt.lineno, stmt.end_lineno or stmt.lineno, via, ast.unparse(stmt))
        return Resolved(inner.value, origin, inner.overridable, inner.env_var, [own, *inner.sources])

    def _default(self, name: str, default: ast.expr | None, via: str | None, seen: frozenset[str]) -> Resolved:
        if default is None:
            return Resolved(UNKNOWN, "parameter", True)
        inner = self.resolve(default, MODULE, via, seen)
        own = Source(f"{name}=", default.lineno, default.end_lineno or default.lineno, via, ast.unparse(default))
        return Resolved(inner.value, "parameter", True, inner.env_var, [own, *inner.sources])

    def _self_attribute(self, attr: str, where: Where, via: str | None, seen: frozenset[str]) -> Resolved:
        cls = where.cls
        key = f"self:{attr}@{id(cls)}"
        if cls is None or key in seen:
            return Resolved(UNKNOWN, "attribute")
        seen = seen | {key}
        via = via or f"self.{attr}"
        results: list[Resolved] = []
        for method in cls.body:
            if not isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for stmt, value in _self_assignments(method).get(attr, []):
                if _is_compile_call(value):
                    continue  # `self.model = torch.compile(self.model)` wraps the value, it does not make it
                results.append(self._assigned(f"self.{attr}", stmt, value, Where(method, cls), via, seen))
        for stmt, value in _assignments(cls.body, descend_defs=False).get(attr, []):
            results.append(self._assigned(f"{cls.name}.{attr}", stmt, value, MODULE, via, seen))
        if not results:
            return Resolved(UNKNOWN, "attribute")
        combined = _combine(results)
        if combined.origin == "literal":
            combined.origin = "attribute"
        return combined

    def _field(self, expr: ast.Attribute, where: Where, via: str | None, seen: frozenset[str]) -> Resolved:
        """`obj.x` for an object the file does not type: a field `x` of its classes, or an argparse option."""
        attr = expr.attr
        key = f"field:{attr}"
        if key in seen:
            return Resolved(UNKNOWN, "unknown")
        seen = seen | {key}
        results: list[Resolved] = []
        for cls in self.classes.values():
            for stmt, value in _assignments(cls.body, descend_defs=False).get(attr, []):
                inner = self.resolve(value, MODULE, via, seen)
                own = Source(f"{cls.name}.{attr}", stmt.lineno, stmt.end_lineno or stmt.lineno, via,
                             ast.unparse(stmt))
                results.append(Resolved(inner.value, "config", True, inner.env_var, [own, *inner.sources]))
                results += self._constructor_keywords(cls.name, attr, via, seen)
        for call, default in _argparse_options(self.tree).get(attr, []):
            inner = self.resolve(default, MODULE, via, seen) if default is not None else Resolved(None, "literal")
            flag = f"--{attr.replace('_', '-')}"
            own = Source(flag, call.lineno, call.end_lineno or call.lineno, via, ast.unparse(call))
            results.append(Resolved(inner.value, "argument", True, inner.env_var, [own, *inner.sources]))
        if not results:
            # the object itself may come from this file: its own sources still decide the field
            base = self._opaque(expr.value, where, via, seen)
            return Resolved(UNKNOWN, "config" if base.sources else "unknown", True, base.env_var, base.sources)
        return _combine(results)

    def _constructor_keywords(self, cls_name: str, attr: str, via: str | None,
                              seen: frozenset[str]) -> list[Resolved]:
        found = []
        for node in ast.walk(self.tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == cls_name):
                for keyword in node.keywords:
                    if keyword.arg == attr:
                        inner = self.resolve(keyword.value, self.where(node.lineno), via, seen)
                        own = Source(f"{cls_name}({attr}=)", keyword.value.lineno,
                                     keyword.value.end_lineno or keyword.value.lineno, via, ast.unparse(keyword.value))
                        found.append(Resolved(inner.value, "config", True, inner.env_var, [own, *inner.sources]))
        return found

    def _bool_op(self, expr: ast.BoolOp, where: Where, via: str | None, seen: frozenset[str]) -> Resolved:
        parts = [self.resolve(v, where, via, seen) for v in expr.values]
        sources = [s for p in parts for s in p.sources]
        overridable = any(p.overridable for p in parts)
        env_var = next((p.env_var for p in parts if p.env_var), None)
        is_or = isinstance(expr.op, ast.Or)
        for part in parts:
            if not part.known:
                # `mode or DEFAULT` with a mode that callers may pass: DEFAULT is what the file says
                if part.origin == "parameter" and part is not parts[-1]:
                    continue
                return Resolved(UNKNOWN, "unknown", overridable, env_var, sources)
            if bool(part.value) == is_or:
                return Resolved(part.value, part.origin, overridable, part.env_var or env_var, sources)
        last = parts[-1]
        return Resolved(last.value, last.origin, overridable, last.env_var or env_var, sources)

    def _dict(self, expr: ast.Dict, where: Where, via: str | None, seen: frozenset[str]) -> Resolved:
        value: dict[object, object] | _Unknown = {}
        sources: list[Source] = []
        overridable = False
        for key, item in zip(expr.keys, expr.values):
            resolved = self.resolve(item, where, via, seen)
            sources += resolved.sources
            overridable = overridable or resolved.overridable
            if key is None or not isinstance(key, ast.Constant) or not isinstance(value, dict):
                value = UNKNOWN  # `**other` or a computed key
                continue
            value[key.value] = resolved.value
        return Resolved(value, "literal", overridable, None, sources)

    def _opaque(self, expr: ast.AST, where: Where, via: str | None, seen: frozenset[str]) -> Resolved:
        """An expression the resolver does not evaluate: unknown, but what it reads still flows in."""
        sources: list[Source] = []
        overridable = False
        env_var = None
        for sub in _reads(expr):
            resolved = self.resolve(sub, where, via, seen)
            sources += resolved.sources
            overridable = overridable or resolved.overridable
            env_var = env_var or resolved.env_var
        return Resolved(UNKNOWN, "unknown", overridable, env_var, sources)


# -- helpers over the syntax tree ---------------------------------------------------------


def _reads(expr: ast.AST) -> list[ast.expr]:
    """The outermost names and attribute chains an expression reads (not the functions it calls)."""
    found: list[ast.expr] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.Call):
            if isinstance(node.func, ast.Attribute):
                visit(node.func.value)  # `cfg.get_mode()` reads cfg
            for arg in [*node.args, *(k.value for k in node.keywords)]:
                visit(arg)
            return
        if isinstance(node, (ast.Name, ast.Attribute)) and isinstance(getattr(node, "ctx", None), ast.Load):
            found.append(node)  # type: ignore[arg-type]
            return
        if isinstance(node, (ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(expr)
    return found


def _assignments(body: list[ast.stmt], descend_defs: bool = False) -> dict[str, list[tuple[ast.stmt, ast.expr | None]]]:
    """name -> (statement, value) for each plain-name assignment in `body`, nested blocks included
    but not nested defs or classes. A value of None: assigned by something not an expression (a loop)."""
    found: dict[str, list[tuple[ast.stmt, ast.expr | None]]] = {}

    def add(name: str, stmt: ast.stmt, value: ast.expr | None) -> None:
        found.setdefault(name, []).append((stmt, value))

    def visit(stmts: list[ast.stmt]) -> None:
        for stmt in stmts:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and not descend_defs:
                continue
            if isinstance(stmt, ast.Assign):
                for target in stmt.targets:
                    if isinstance(target, ast.Name):
                        add(target.id, stmt, stmt.value)
                    elif isinstance(target, (ast.Tuple, ast.List)):
                        for element in target.elts:
                            if isinstance(element, ast.Name):
                                add(element.id, stmt, None)
            elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
                add(stmt.target.id, stmt, stmt.value)
            elif isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name):
                add(stmt.target.id, stmt, None)
            elif isinstance(stmt, (ast.For, ast.AsyncFor)):
                for node in ast.walk(stmt.target):
                    if isinstance(node, ast.Name):
                        add(node.id, stmt, None)
            for name in ("body", "orelse", "finalbody"):
                visit(getattr(stmt, name, []) or [])
            for handler in getattr(stmt, "handlers", []) or []:
                visit(handler.body)
            for case in getattr(stmt, "cases", []) or []:
                visit(case.body)

    visit(body)
    return found


def _self_assignments(function: ast.AST) -> dict[str, list[tuple[ast.stmt, ast.expr | None]]]:
    found: dict[str, list[tuple[ast.stmt, ast.expr | None]]] = {}
    for node in ast.walk(function):
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign):
            targets, value = [node.target], node.value
        elif isinstance(node, ast.AugAssign):
            targets, value = [node.target], None
        else:
            continue
        for target in targets:
            if (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
                    and target.value.id in SELF_NAMES):
                found.setdefault(target.attr, []).append((node, value))
    return found


def _globals(function: ast.AST) -> set[str]:
    return {name for node in ast.walk(function) if isinstance(node, ast.Global) for name in node.names}


def _parameter(function: ast.FunctionDef | ast.AsyncFunctionDef, name: str) -> tuple[ast.arg, ast.expr | None] | None:
    args = function.args
    positional = [*args.posonlyargs, *args.args]
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    pairs = list(zip(positional, defaults)) + list(zip(args.kwonlyargs, args.kw_defaults))
    return next(((arg, default) for arg, default in pairs if arg.arg == name), None)


def _environment_default(call: ast.Call) -> tuple[str | None, ast.expr | None] | None:
    """(variable, default) of `os.environ.get("X", d)` or `os.getenv("X", d)`; None for other calls."""
    func = ast.unparse(call.func)
    if func not in ("os.environ.get", "environ.get", "os.getenv", "getenv"):
        return None
    var = call.args[0].value if call.args and isinstance(call.args[0], ast.Constant) else None
    default = call.args[1] if len(call.args) > 1 else next((k.value for k in call.keywords if k.arg == "default"),
                                                            None)
    return (str(var) if var is not None else None), default


def _argparse_options(tree: ast.Module) -> dict[str, list[tuple[ast.Call, ast.expr | None]]]:
    """dest -> (add_argument call, default) for `parser.add_argument("--x-y", default=...)`."""
    found: dict[str, list[tuple[ast.Call, ast.expr | None]]] = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "add_argument"):
            continue
        flags = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        dest = next((k.value.value for k in node.keywords if k.arg == "dest" and isinstance(k.value, ast.Constant)),
                    None)
        long = next((f for f in flags if f.startswith("--")), None)
        name = dest or (long[2:].replace("-", "_") if long else None)
        if name:
            default = next((k.value for k in node.keywords if k.arg == "default"), None)
            found.setdefault(str(name), []).append((node, default))
    return found


def _is_compile_call(value: ast.expr | None) -> bool:
    return isinstance(value, ast.Call) and ast.unparse(value.func) == "torch.compile"


def _combine(results: list[Resolved]) -> Resolved:
    sources = [s for r in results for s in r.sources]
    overridable = any(r.overridable for r in results)
    env_var = next((r.env_var for r in results if r.env_var), None)
    values = [r.value for r in results]
    origins = {r.origin for r in results}
    origin: ValueOrigin = results[0].origin if len(origins) == 1 else "unknown"
    if all(v is not UNKNOWN for v in values) and all(v == values[0] for v in values[1:]):
        return Resolved(values[0], origin, overridable, env_var, sources)
    return Resolved(UNKNOWN, origin if len(results) == 1 else "unknown", overridable, env_var, sources)


def _with_sources(result: Resolved, sources: list[Source], overridable: bool = False) -> Resolved:
    return Resolved(result.value, result.origin, result.overridable or overridable, result.env_var,
                    list(dict.fromkeys(sources)))
