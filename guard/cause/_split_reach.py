"""Whether a graph split changed in one module is traced by a capturing torch.compile of another
file of the same commit.

A split (a graph break, a disabled or disallowed function, see _patterns.REGION_PATTERNS) in a
module changes capture when code compiled elsewhere runs it. The files that import the module
are found at the commit (see _imports); for each capturing site of such a file (see _compile),
the calls of the defs it traces (see _region) that enter the module are followed: a function
or class imported from it, an attribute of the module, or an object built from one of those
(`self.model = build_model(...)` then `self.model(...)`, a parameter annotated with an imported
class, a loop over such modules). From where a call enters, the module's own defs are walked as
_region walks a file. A split in a def that walk reaches is "traced"; otherwise, while a file
with a capturing site imports the module, directly or through other modules, it is "possibly"
traced, with the reason (_models.PossibleReason); a module no such file imports is not reached.
Importers are found by a line holding both the module's name and "import", so an import that
names the module only on a later line (`from engine import (` then `model,`) is not seen.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from guard import _git
from guard.cause._compile import CompileView, Site
from guard.cause._imports import ModuleImport, imports_of, module_stem
from guard.cause._models import GraphSplit, PossibleReason
from guard.cause._region import FunctionNode, RegionDef, Regions, find_method, loop_sources
from guard.cause._scope import ScopeIndex
from guard.cause._values import SELF_NAMES, Where

MAX_HOPS = 3  # modules between the compiling file and the changed one, for a possible reach
_COMPILED = "<compiled>"  # the method of an entry that torch.compile compiles: a function, or a class's forward


class _Sources:
    """The Python files of one commit, each read and parsed once (not config's CommitFiles:
    these are read as source to parse, without its size limits or refusals)."""

    def __init__(self, repo: Path, sha: str) -> None:
        self.repo, self.sha = repo, sha
        self._sources: dict[str, str | None] = {}
        self._trees: dict[str, ast.Module | None] = {}
        self._indexes: dict[str, ScopeIndex | None] = {}
        self._views: dict[str, CompileView | None] = {}
        self._importing: dict[str, list[str]] = {}

    def source(self, path: str) -> str | None:
        if path not in self._sources:
            self._sources[path] = _git.file_at(self.repo, self.sha, path)
        return self._sources[path]

    def tree(self, path: str) -> ast.Module | None:
        """The file parsed, without the scope index (which most importers never need)."""
        if path not in self._trees:
            source = self.source(path)
            try:
                self._trees[path] = ast.parse(source) if source is not None else None
            except (SyntaxError, ValueError):
                self._trees[path] = None
        return self._trees[path]

    def index(self, path: str) -> ScopeIndex | None:
        if path not in self._indexes:
            source = self.source(path)
            self._indexes[path] = ScopeIndex(source, path) if source is not None else None
        return self._indexes[path]

    def view(self, path: str) -> CompileView | None:
        """The file's compile sites, when it parses and has a capturing one."""
        if path not in self._views:
            source = self.source(path)
            index = self.index(path) if source is not None and "torch.compile" in source else None
            view = CompileView(index) if index is not None and index.tree is not None else None
            self._views[path] = view if view is not None and view.captured else None
        return self._views[path]

    def importing(self, word: str) -> list[str]:
        """The Python files with a line that holds both `word` and "import"."""
        if word not in self._importing:
            proc = _git.run_git(self.repo, "grep", "-l", "-z", "-F", "-e", word, "--and", "-e", "import", self.sha,
                                "--", "*.py", "*.pyi")
            prefix = f"{self.sha}:"
            self._importing[word] = [p.removeprefix(prefix) for p in proc.stdout.split("\0") if p] \
                if proc.returncode == 0 else []
        return self._importing[word]


@dataclass(frozen=True)
class _Entry:
    """A call of compiled code into the module: `name` itself (method None), what torch.compile
    compiles (method _COMPILED: a function, or a class's forward), or `method` of an instance of
    `name` (a class, or what a factory function returns)."""

    name: str
    method: str | None
    line: int
    chain: tuple[str, ...]  # defs from the compiled target down to the call, in the files before


@dataclass(frozen=True)
class _Importer:
    path: str
    imports: list[ModuleImport]  # its import statements of the module it was found for


@dataclass(frozen=True)
class _Traced:
    entry: _Entry  # where the compiled code left the compiling file
    held: RegionDef  # the def of the changed module holding the line
    chain: tuple[str, ...]  # defs after the compiling file, down to `held`


class ImportedSplits:
    """Answers, for the changed lines of one commit, which capturing site of another file reaches them."""

    def __init__(self, repo: Path, sha: str) -> None:
        self.files = _Sources(repo, sha)
        self._importers: dict[str, list[_Importer]] = {}
        self._walkers: dict[str, Regions | None] = {}

    def split(self, path: str, line: int, api: str, side: str) -> GraphSplit | None:
        index = self.files.index(path)
        if index is None:
            return None
        defs = [s for s in index.chain(line) if s.kind == "def"]
        function = defs[-1].qualname if defs else None
        routes = self.routes(path)
        if not routes:
            return None
        common = {"api": api, "side": side, "line": line, "function": function}
        entered = False
        for route in routes:
            view = self.files.view(route[0].path)
            assert view is not None
            for site, region in view.captured:
                traced, calls = self._follow(route, path, site, view, region, line)
                entered = entered or (calls and len(route) == 1)
                if traced is not None:
                    return GraphSplit(**common, site_path=route[0].path, site=site.model(),  # type: ignore[arg-type]
                                      import_line=route[0].imports[0].line, through=[i.path for i in route[1:]],
                                      reachable="traced", compiled_chain=list(traced.entry.chain),
                                      call_line=traced.entry.line, chain=list(traced.chain))
        route = routes[0]
        view = self.files.view(route[0].path)
        assert view is not None
        reason: PossibleReason = ("imported-indirectly" if len(route) > 1 else "module-level" if function is None
                                  else "entered-elsewhere" if entered else "imported-not-called")
        return GraphSplit(**common, site_path=route[0].path, site=view.captured[0][0].model(),  # type: ignore[arg-type]
                          import_line=route[0].imports[0].line, through=[i.path for i in route[1:]],
                          reachable="possibly", reason=reason)

    def routes(self, path: str) -> list[list[_Importer]]:
        """The import routes from a file with a capturing site to the module, shortest first: each
        the files in order from the compiling one, with their import of the next (the last's: of it)."""
        found: list[list[_Importer]] = []
        seen = {path}
        frontier: list[list[_Importer]] = [[]]
        for _ in range(MAX_HOPS + 1):
            next_frontier = []
            for route in frontier:
                module = route[0].path if route else path
                for importer in self.importers(module):
                    if importer.path in seen:
                        continue
                    seen.add(importer.path)
                    longer = [importer, *route]
                    if self.files.view(importer.path) is not None:
                        found.append(longer)
                    next_frontier.append(longer)
            frontier = next_frontier
        return found

    def importers(self, path: str) -> list[_Importer]:
        """The other Python files of the commit that import the module at `path`."""
        if path not in self._importers:
            word = PurePosixPath(module_stem(path)).name
            found = []
            for other in self.files.importing(word):
                tree = self.files.tree(other) if other != path else None
                if tree is None:
                    continue
                imports = imports_of(tree, other, path)
                if imports:
                    found.append(_Importer(other, imports))
            self._importers[path] = found
        return self._importers[path]

    # -- following the calls -------------------------------------------------------------

    def _follow(self, route: list[_Importer], path: str, site: Site, view: CompileView, region: list[RegionDef],
                line: int) -> tuple[_Traced | None, bool]:
        """From a capturing site along one import route into the module: the def holding `line`
        if the calls reach it, and whether any call of the compiled code entered the route's first module."""
        modules = [i.path for i in route[1:]] + [path]
        entries = self._entries(view.regions, region, route[0].imports, modules[0], site)
        # each def reached in the current module: the call that left the compiling file, the def,
        # and the defs walked from that call down to it
        reached = [_Traced(entry, held, held.chain) for entry in entries for held in self._walk(modules[0], entry)]
        for step, module in enumerate(modules[1:], start=1):
            walker = self._regions(modules[step - 1])
            assert walker is not None  # it holds reached defs, so it parses
            reached = [_Traced(was.entry, held, was.chain + held.chain) for was in reached
                       for entry in self._entries(walker, [was.held], route[step].imports, module)
                       for held in self._walk(module, entry)]
        holding = [t for t in reached if t.held.scope.start <= line <= t.held.scope.end]
        traced = max(holding, key=lambda t: t.held.scope.start) if holding else None  # the innermost def
        return traced, bool(entries)

    def _entries(self, walker: Regions, region: list[RegionDef], imports: list[ModuleImport], path: str,
                 site: Site | None = None) -> list[_Entry]:
        """The calls from `region` (defs of `walker`'s file), and from what `site` compiles, into
        the module at `path` that `imports` bring in."""
        bound = _Bound(imports, self._module_names(path))
        found: list[_Entry] = []
        if site is not None and not site.target_defs and site.target_expr is not None:
            found += [_Entry(name, method, site.line, ()) for name, method in
                      _callee(site.target_expr, site.where, walker, bound, target=True)]
        for held in region:
            node = held.scope.node
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            where = Where(node, walker.owner.get(id(node)))
            loops = loop_sources(node)
            for call in ast.walk(node):
                if isinstance(call, ast.Call):
                    found += [_Entry(name, method, call.lineno, held.chain) for name, method in
                              _callee(call.func, where, walker, bound, loops=loops)]
        return found

    def _walk(self, path: str, entry: _Entry) -> list[RegionDef]:
        """The module's defs a call into it reaches."""
        regions = self._regions(path)
        roots = _roots(regions, entry) if regions is not None else []
        return regions.region(roots) if regions is not None and roots else []

    def _regions(self, path: str) -> Regions | None:
        if path not in self._walkers:
            index = self.files.index(path)
            self._walkers[path] = Regions(index) if index is not None and index.tree is not None else None
        return self._walkers[path]

    def _module_names(self, path: str) -> frozenset[str]:
        """Top-level defs and classes of the module: what `from module import *` binds."""
        index = self.files.index(path)
        if index is None or index.tree is None:
            return frozenset()
        return frozenset(n.name for n in index.tree.body
                         if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)))


class _Bound:
    """The importing file's spellings of the module and of its names."""

    def __init__(self, imports: list[ModuleImport], star_names: frozenset[str]) -> None:
        self.modules = {m for i in imports for m in i.modules}
        self.names = {local: own for i in imports for local, own in i.names.items()}
        if any(i.star for i in imports):
            self.names.update({n: n for n in star_names if n not in self.names})

    def own(self, spelt: str) -> str | None:
        """The module's name that `spelt` (`build_model`, `model_lib.Transformer`) stands for."""
        if spelt in self.names:
            return self.names[spelt]
        head, _, attr = spelt.rpartition(".")
        return attr if head in self.modules and attr else None


def _callee(func: ast.expr, where: Where, regions: Regions, bound: _Bound, target: bool = False,
            loops: dict[str, ast.expr] | None = None) -> list[tuple[str, str | None]]:
    """(name, method) for each way the callable `func` (or, `target`, what torch.compile compiles)
    is the module's: the name itself, or `method` of an instance built from the name."""
    own = bound.own(ast.unparse(func)) if isinstance(func, (ast.Name, ast.Attribute)) else None
    if own is not None:
        return [(own, _COMPILED if target else None)]
    holder: ast.expr
    method: str = "forward"
    if isinstance(func, ast.Name):
        holder = (loops or {}).get(func.id, func)
    elif isinstance(func, ast.Attribute):
        receiver = func.value
        if isinstance(receiver, ast.Name) and receiver.id in SELF_NAMES:
            if where.cls is not None and find_method(where.cls, func.attr, regions.classes) is not None:
                return []  # a method of the compiling file's own class: _region follows it
            holder = func
        else:
            holder = (loops or {}).get(receiver.id, receiver) if isinstance(receiver, ast.Name) else receiver
            method = func.attr
    elif isinstance(func, ast.Subscript):
        holder = func.value
    else:
        holder = func  # `torch.compile(Transformer(args))`, `make()(x)`: what the call returns
    called, annotated = regions.built_from(holder, where)
    return [(name, method) for spelt in dict.fromkeys([*called, *annotated]) if (name := bound.own(spelt))]


def _roots(regions: Regions, entry: _Entry) -> list[FunctionNode]:
    """The module's defs where an entry's call lands."""
    functions, classes = regions.functions, regions.classes
    if entry.method is None or (entry.method == _COMPILED and entry.name in functions):
        return [functions[entry.name]] if entry.name in functions else []
    if entry.name in classes:
        built = [classes[entry.name]]
    elif entry.name in functions:
        built = regions.returned(functions[entry.name])  # a factory: what it returns
    else:
        return []
    if entry.method in ("forward", _COMPILED):
        return regions.forwards(built)
    return [m for cls in built if (m := find_method(cls, entry.method, classes)) is not None]
