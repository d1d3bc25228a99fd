"""What a compiled function traces, as far as its own file shows: the defs a compile target reaches.

From the target (a def, a method, or the `forward` of a module class of the file) the region
takes in, a few calls deep:
 - module-level functions it calls by name, and defs nested in it;
 - methods of its own class it calls on `self`;
 - `forward` of the module classes of the file it calls: `self.attr(...)` or `self.attr[i](...)`
   for an attribute built from such a class, the loop variable over one
   (`for layer in self.layers`), a name built from one, or a parameter annotated with one;
 - methods of such modules it calls by name (`self.attn.rotate(...)`).
A class's `forward` may come from a base class of the same file.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from guard.cause._scope import Scope, ScopeIndex
from guard.cause._values import SELF_NAMES, Where

MAX_DEPTH = 6

FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef


@dataclass(frozen=True)
class RegionDef:
    scope: Scope
    chain: tuple[str, ...]  # qualified names from the compiled target down to this def


class Regions:
    """Resolves compile targets and walks the calls below them, for one file version."""

    def __init__(self, index: ScopeIndex) -> None:
        assert index.tree is not None
        self.index = index
        self.tree = index.tree
        self.scope_of = {id(s.node): s for s in index.scopes if s.node is not None}
        self.classes = {n.name: n for n in ast.walk(self.tree) if isinstance(n, ast.ClassDef)}
        self.functions = {n.name: n for n in self.tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        self.owner: dict[int, ast.ClassDef] = {
            id(item): cls for cls in self.classes.values() for item in cls.body
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))
        }

    # -- targets -----------------------------------------------------------------------

    def targets(self, expr: ast.expr | None, where: Where) -> list[FunctionNode]:
        """The defs a `torch.compile(expr)` compiles: a function, a method, or a module's forward."""
        if expr is None:
            return []
        if isinstance(expr, ast.Name):
            nested = self._nested(where.function, expr.id)
            if nested is not None:
                return [nested]
            if expr.id in self.functions:
                return [self.functions[expr.id]]
            return self.forwards(self._classes_of(expr, where))
        if isinstance(expr, ast.Attribute):
            if isinstance(expr.value, ast.Name) and expr.value.id in SELF_NAMES and where.cls is not None:
                method = find_method(where.cls, expr.attr, self.classes)
                if method is not None:
                    return [method]
                return self.forwards(self._classes_of(expr, where))
            # model.forward, self.model.forward: the method of the receiver's class
            return [m for cls in self._classes_of(expr.value, where)
                    if (m := find_method(cls, expr.attr, self.classes)) is not None]
        return self.forwards(self._classes_of(expr, where))

    # -- walking -----------------------------------------------------------------------

    def region(self, roots: list[FunctionNode]) -> list[RegionDef]:
        found: dict[int, RegionDef] = {}
        work: list[tuple[FunctionNode, tuple[str, ...]]] = []
        for root in roots:
            scope = self.scope_of.get(id(root))
            if scope is not None and id(root) not in found:
                found[id(root)] = RegionDef(scope, (scope.qualname,))
                work.append((root, (scope.qualname,)))
        while work:
            function, chain = work.pop(0)
            if len(chain) > MAX_DEPTH:
                continue
            for callee in self._callees(function):
                scope = self.scope_of.get(id(callee))
                if scope is None or id(callee) in found:
                    continue
                found[id(callee)] = RegionDef(scope, (*chain, scope.qualname))
                work.append((callee, (*chain, scope.qualname)))
        return list(found.values())

    def _callees(self, function: FunctionNode) -> list[FunctionNode]:
        cls = self.owner.get(id(function))
        where = Where(function, cls)
        loops = loop_sources(function)
        callees: list[FunctionNode] = []
        for node in ast.walk(function):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node is not function:
                callees.append(node)  # a nested def is traced where it is called; cheaply: always
                continue
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            if isinstance(func, ast.Name):
                if func.id in self.functions:
                    callees.append(self.functions[func.id])
                elif func.id in loops:
                    callees += self.forwards(self._classes_of(loops[func.id], where))
                elif func.id not in self.classes:
                    callees += self.forwards(self._classes_of(func, where))
            elif isinstance(func, ast.Attribute):
                receiver = func.value
                if isinstance(receiver, ast.Name) and receiver.id in SELF_NAMES and cls is not None:
                    method = find_method(cls, func.attr, self.classes)
                    callees += [method] if method is not None else self.forwards(self._classes_of(func, where))
                else:
                    holder = loops.get(receiver.id) if isinstance(receiver, ast.Name) else None
                    classes = self._classes_of(holder if holder is not None else receiver, where)
                    callees += [m for c in classes if (m := find_method(c, func.attr, self.classes)) is not None]
            elif isinstance(func, ast.Subscript):
                callees += self.forwards(self._classes_of(func.value, where))
        return callees

    # -- which classes of the file an expression holds -----------------------------------

    def built_from(self, expr: ast.expr, where: Where) -> tuple[list[str], list[str]]:
        """What `expr` holds, as names: the callables called in the values assigned to it
        (`Transformer`, `model_lib.build`), and the names in its parameter annotation."""
        assigned: list[ast.expr] = []
        annotations: list[ast.expr] = []
        if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id in SELF_NAMES:
            if where.cls is not None:
                assigned = [v for m in where.cls.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))
                            for v in _self_values(m, expr.attr)]
        elif isinstance(expr, ast.Name):
            if where.function is not None:
                annotation = _annotation(where.function, expr.id)
                annotations += [annotation] if annotation is not None else []
                assigned += _name_values(where.function, expr.id)
            assigned += _name_values(self.tree, expr.id, top_level=True)
        else:
            assigned = [expr]
        called = [ast.unparse(n.func) for v in assigned for n in ast.walk(v)
                  if isinstance(n, ast.Call) and isinstance(n.func, (ast.Name, ast.Attribute))]
        annotated: list[str] = []
        for annotation in annotations:
            for node in ast.walk(annotation):
                if isinstance(node, ast.Name):
                    annotated.append(node.id)
                elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                    annotated.append(node.value)  # a string annotation: `model: "Transformer"`
        return called, annotated

    def _classes_of(self, expr: ast.expr, where: Where, depth: int = 0) -> list[ast.ClassDef]:
        """Classes of this file whose instances `expr` holds (or, for a list of modules, contains)."""
        called, annotated = self.built_from(expr, where)
        found = [self.classes[n] for n in called if n in self.classes]
        for name in called:  # a module-level factory of the file: what it returns
            if name in self.functions and depth < MAX_DEPTH:
                found += self.returned(self.functions[name], depth + 1)
        found += [self.classes[n] for n in annotated if n in self.classes]
        return list({id(c): c for c in found}.values())

    def returned(self, function: FunctionNode, depth: int = 0) -> list[ast.ClassDef]:
        """Classes of the file whose instances `function` returns: `return Transformer(args)`, or
        a name bound to one, through method chains that return the module (`model.eval()`)."""
        if function.returns is not None:  # `def build_model(...) -> Transformer`
            annotated = [n.id for n in ast.walk(function.returns) if isinstance(n, ast.Name) and n.id in self.classes]
            if annotated:
                return [self.classes[n] for n in annotated]
        found: list[ast.ClassDef] = []
        for node in ast.walk(function):
            if isinstance(node, ast.Return) and node.value is not None:
                found += self._classes_of(_chain_root(node.value), Where(function, None), depth)
        return found

    def forwards(self, classes: list[ast.ClassDef]) -> list[FunctionNode]:
        return [m for c in classes if (m := find_method(c, "forward", self.classes) or find_method(c, "__call__",
                                                                                           self.classes))]

    def _nested(self, function: FunctionNode | None, name: str) -> FunctionNode | None:
        if function is None:
            return None
        return next((n for n in ast.walk(function) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                     and n is not function and n.name == name), None)


def find_method(cls: ast.ClassDef, name: str, classes: dict[str, ast.ClassDef], depth: int = 0) -> FunctionNode | None:
    for item in cls.body:
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name == name:
            return item
    if depth > 4:
        return None
    for base in cls.bases:
        base_name = base.id if isinstance(base, ast.Name) else None
        if base_name in classes and classes[base_name] is not cls:
            found = find_method(classes[base_name], name, classes, depth + 1)
            if found is not None:
                return found
    return None


def _self_values(function: FunctionNode, attr: str) -> list[ast.expr]:
    values = []
    for node in ast.walk(function):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, ast.AnnAssign) else []
        value = getattr(node, "value", None)
        for target in targets:
            if (isinstance(target, ast.Attribute) and target.attr == attr and isinstance(target.value, ast.Name)
                    and target.value.id in SELF_NAMES and value is not None):
                values.append(value)
    return values


def _name_values(scope: ast.AST, name: str, top_level: bool = False) -> list[ast.expr]:
    body = scope.body if top_level and isinstance(scope, ast.Module) else None
    nodes = body if body is not None else list(ast.walk(scope))
    values = []
    for node in nodes:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            values.append(node.value)
        elif (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == name
              and node.value is not None):
            values.append(node.value)
    return values


def _annotation(function: FunctionNode, name: str) -> ast.expr | None:
    args = function.args
    for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs]:
        if arg.arg == name:
            return arg.annotation
    return None


def loop_sources(function: FunctionNode) -> dict[str, ast.expr]:
    """Loop variable -> what it iterates: `for layer in self.layers`, `for i, layer in enumerate(...)`."""
    found: dict[str, ast.expr] = {}
    for node in ast.walk(function):
        if not isinstance(node, (ast.For, ast.AsyncFor)):
            continue
        iterable = node.iter
        target = node.target
        if (isinstance(iterable, ast.Call) and isinstance(iterable.func, ast.Name)
                and iterable.func.id in ("enumerate", "zip", "reversed") and iterable.args):
            if iterable.func.id == "enumerate" and isinstance(target, ast.Tuple) and len(target.elts) == 2:
                target = target.elts[1]
            iterable = iterable.args[0] if iterable.func.id != "zip" else iterable.args[0]
        if isinstance(target, ast.Name):
            found[target.id] = iterable
    return found


def _chain_root(expr: ast.expr) -> ast.expr:
    """`model.eval().requires_grad_(False)` -> `model`; `Transformer(args).to(device)` -> the call."""
    while isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute):
        expr = expr.func.value
    return expr
