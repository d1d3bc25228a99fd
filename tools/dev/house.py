"""The shape of the house: figures an architecture review of guard/ asks for, counted the same way each time.

Run: `python3 tools/dev/house.py [TREE] [--json] [--python PY] [--report PATH]`; TREE defaults to the
repository this file sits in. Standard library only; it reads files, and runs only `duplicates` (when on
PATH) and, for the walk, guard's own `render_comment` in a child interpreter.

The figures, each over TREE/guard/*.py:
- lines: physical lines of the files, and code lines (neither blank nor only a `#` comment; docstrings
  count as code).
- cycles: strongly connected components (two or more modules) of the module graph made of the imports
  that run when a module is imported: module-level and class-level statements, `if`/`try` blocks
  included, `if TYPE_CHECKING:` blocks excluded. `from P import n` is an arrow to P.n where that is a
  module, else to P; an arrow to a package is to its `__init__`, and a module's arrow to a package above
  it is not drawn (Python runs those first, whatever is imported).
- lazy dodges: imports inside a function body which, moved to the top, would close a cycle: the module
  they import reaches the importing module by top-level arrows (the path is listed).
- longest functions: the 10 longest `def`s (nested ones too), in lines from `def` to the last line.
- public names: module-level names bound by `def`, `class` or assignment whose name does not start with
  `_`, in every module; and separately the names the package `__init__` files export (`__all__` where it
  is a literal list, else every public name bound there, imports included).
- render functions taking Report: functions in the render layer (guard/report/, modules named *_text.py
  and modules whose name holds `render`) with a parameter annotated with `Report` (the name, not the
  names it is part of).
- walk: `render_comment` (found by its `def`) called once to warm up and then once under
  `sys.setprofile` on a committed report.json (the first `git ls-files` lists, or --report), loaded with
  guard's `read_report` (found by its `def`). A stay is a call of a named function defined in guard/
  (comprehensions, lambdas and module bodies are not stays; a generator counts once); a room is a module
  of guard that a stay is in; a return is a stay that enters a room already visited from another room;
  the depth is the most guard frames on the stack at once (render_comment is 1).
- duplicates: the pairs `duplicates --repo TREE/guard` counts in its first line.
- docs words: whitespace-separated words of each Markdown page mkdocs.yml's `nav` lists; their total and
  the longest page.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

PACKAGE = "guard"
LONGEST = 10


@dataclass
class Module:
    name: str
    path: Path
    tree: ast.Module
    is_package: bool


@dataclass
class Imports:
    top: dict[str, set[str]] = field(default_factory=dict)
    # (importer, function, line, imported)
    lazy: list[tuple[str, str, int, str]] = field(default_factory=list)


def load_modules(tree: Path) -> dict[str, Module]:
    modules = {}
    for path in sorted((tree / PACKAGE).rglob("*.py")):
        parts = path.relative_to(tree).with_suffix("").parts
        is_package = parts[-1] == "__init__"
        name = ".".join(parts[:-1] if is_package else parts)
        modules[name] = Module(name, path, ast.parse(path.read_bytes(), str(path)), is_package)
    return modules


def count_lines(modules: dict[str, Module]) -> dict[str, int]:
    physical = code = 0
    for module in modules.values():
        lines = module.path.read_text(encoding="utf-8").splitlines()
        physical += len(lines)
        code += sum(1 for line in lines if line.strip() and not line.strip().startswith("#"))
    return {"physical": physical, "code": code}


def _targets(node: ast.Import | ast.ImportFrom, module: Module, known: dict[str, Module]) -> Iterator[str]:
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.name in known:
                yield alias.name
        return
    if node.level:
        base = module.name.split(".")
        if not module.is_package:
            base = base[:-1]
        base = base[: len(base) - (node.level - 1)]
        source = ".".join(base + ([node.module] if node.module else []))
    else:
        source = node.module or ""
    for alias in node.names:
        if f"{source}.{alias.name}" in known:
            yield f"{source}.{alias.name}"
        elif source in known:
            yield source


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def collect_imports(modules: dict[str, Module]) -> Imports:
    found = Imports()

    def visit(node: ast.AST, module: Module, function: str | None) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import | ast.ImportFrom):
                for target in _targets(child, module, modules):
                    if target == module.name or module.name.startswith(target + "."):
                        continue  # itself, or a package above it: run first in any case
                    if function is None:
                        found.top[module.name].add(target)
                    else:
                        found.lazy.append((module.name, function, child.lineno, target))
            elif isinstance(child, ast.If) and function is None and _is_type_checking(child):
                for other in child.orelse:
                    visit(ast.Module(body=[other], type_ignores=[]), module, function)
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                visit(child, module, f"{function}.{child.name}" if function else child.name)
            else:
                visit(child, module, function)

    for module in modules.values():
        found.top[module.name] = set()
        visit(module.tree, module, None)
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of two or more modules, each sorted, largest first."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                connect(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(graph) + 100))
    for node in sorted(graph):
        if node not in index:
            connect(node)
    return sorted(found, key=lambda c: (-len(c), c))


def path_between(graph: dict[str, set[str]], start: str, goal: str) -> list[str] | None:
    """The shortest chain of arrows start -> ... -> goal, or None where there is none."""
    before: dict[str, str | None] = {start: None}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for nxt in sorted(graph.get(node, ())):
                if nxt not in before:
                    before[nxt] = node
                    following.append(nxt)
        frontier = following
        if goal in before:
            chain: list[str] = []
            step: str | None = goal
            while step is not None:
                chain.append(step)
                step = before[step]
            return chain[::-1]
    return None


def lazy_dodges(found: Imports) -> list[dict[str, object]]:
    dodges = []
    for importer, function, line, target in found.lazy:
        chain = path_between(found.top, target, importer)
        if chain is not None:
            cycle = [importer, *chain]
            dodges.append({"importer": importer, "function": function, "line": line, "imports": target, "cycle": cycle})
    return dodges


def functions(modules: dict[str, Module]) -> Iterator[tuple[Module, str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    def walk(node: ast.AST, module: Module, prefix: str) -> Iterator[tuple[Module, str, ast.AST]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                qualname = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    yield module, qualname, child
                yield from walk(child, module, qualname + ".")
            else:
                yield from walk(child, module, prefix)

    for module in modules.values():
        yield from walk(module.tree, module, "")  # type: ignore[misc]


def longest_functions(modules: dict[str, Module]) -> list[dict[str, object]]:
    sized = [
        {"lines": node.end_lineno - node.lineno + 1, "function": f"{module.name}:{qualname}"}
        for module, qualname, node in functions(modules)
    ]
    return sorted(sized, key=lambda f: (-f["lines"], f["function"]))[:LONGEST]


def _bound_names(target: ast.AST) -> Iterator[str]:
    if isinstance(target, ast.Name):
        yield target.id
    elif isinstance(target, ast.Tuple | ast.List):
        for element in target.elts:
            yield from _bound_names(element)


def _module_level(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The statements that run at module level: into if/try/with blocks, not into defs and classes."""
    for statement in body:
        yield statement
        if isinstance(statement, ast.If | ast.Try | ast.With):
            for block in ("body", "orelse", "finalbody"):
                yield from _module_level(getattr(statement, block, []))
            for handler in getattr(statement, "handlers", []):
                yield from _module_level(handler.body)


def defined_names(module: Module, with_imports: bool = False) -> set[str]:
    names: set[str] = set()
    for statement in _module_level(module.tree.body):
        if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(statement.name)
        elif isinstance(statement, ast.Assign):
            for target in statement.targets:
                names.update(_bound_names(target))
        elif isinstance(statement, ast.AnnAssign | ast.AugAssign):
            names.update(_bound_names(statement.target))
        elif with_imports and isinstance(statement, ast.Import | ast.ImportFrom):
            names.update((a.asname or a.name).split(".")[0] for a in statement.names if a.name != "*")
    return {name for name in names if not name.startswith("_")}


def exported_names(module: Module) -> set[str]:
    for statement in _module_level(module.tree.body):
        if isinstance(statement, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in statement.targets
        ):
            try:
                return set(ast.literal_eval(statement.value))
            except ValueError:
                break
    return defined_names(module, with_imports=True)


def public_names(modules: dict[str, Module]) -> dict[str, int]:
    return {
        "defined": sum(len(defined_names(m)) for m in modules.values()),
        "package_faces": sum(len(exported_names(m)) for m in modules.values() if m.is_package),
    }


def is_render_module(name: str) -> bool:
    leaf = name.rsplit(".", 1)[-1]
    return name.startswith(f"{PACKAGE}.report.") or name == f"{PACKAGE}.report" or leaf.endswith("_text") or (
        "render" in leaf
    )


def _names_report(annotation: ast.AST | None) -> bool:
    if annotation is None:
        return False
    for node in ast.walk(annotation):
        if isinstance(node, ast.Name) and node.id == "Report":
            return True
        if isinstance(node, ast.Attribute) and node.attr == "Report":
            return True
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if re.search(r"(?<![\w.])Report\b(?!\w)|\.Report\b", node.value):
                return True
    return False


def report_takers(modules: dict[str, Module]) -> list[str]:
    takers = []
    for module, qualname, node in functions(modules):
        if not is_render_module(module.name):
            continue
        args = node.args
        every = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
        if any(arg is not None and _names_report(arg.annotation) for arg in every):
            takers.append(f"{module.name}:{qualname}")
    return sorted(takers)


def _defining(modules: dict[str, Module], function: str) -> str | None:
    """The module whose top level defines `function`, preferring a private one (where it lives)."""
    holders = [
        m.name
        for m in modules.values()
        if any(isinstance(s, ast.FunctionDef) and s.name == function for s in m.tree.body)
    ]
    return min(holders, key=lambda n: (n.count("."), n)) if holders else None


_WALKER = r"""
import importlib, json, sys
from pathlib import Path
tree, report_path, render_module, read_module = sys.argv[1:5]
sys.path.insert(0, tree)
root = str(Path(tree, "guard").resolve()) + "/"
render = importlib.import_module(render_module).render_comment
report = importlib.import_module(read_module).read_report(Path(report_path))
render(report)  # warm: imports and caches are not part of the walk
seen, rooms, order = {}, [], []
deepest = 0
def room(frame):
    file = frame.f_code.co_filename
    if not file.startswith(root) or frame.f_code.co_name.startswith("<"):
        return None
    rel = Path(file[len(root):]).with_suffix("").parts
    return ".".join(("guard",) + (rel[:-1] if rel[-1] == "__init__" else rel))
def profile(frame, event, arg):
    global deepest
    if event != "call" or id(frame) in seen:
        return
    name = room(frame)
    if name is None:
        return
    seen[id(frame)] = frame
    order.append(name)
    depth, up = 0, frame
    while up is not None:
        depth += room(up) is not None
        up = up.f_back
    deepest = max(deepest, depth)
sys.setprofile(profile)
render(report)
sys.setprofile(None)
returns, visited = 0, set()
for before, here in zip([None] + order, order):
    returns += here != before and here in visited
    visited.add(here)
print(json.dumps({"report": report_path, "stays": len(order), "rooms": len(set(order)),
                  "returns": returns, "deepest": deepest}))
"""


def _committed_reports(tree: Path) -> list[str]:
    try:
        listed = subprocess.run(
            ["git", "-C", str(tree), "ls-files", "*report.json"], capture_output=True, text=True, check=True
        ).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        listed = [str(p.relative_to(tree)) for p in tree.rglob("report.json")]
    return sorted(p for p in listed if Path(p).name == "report.json")


def walk_render(tree: Path, modules: dict[str, Module], python: str, report: str | None) -> dict[str, object]:
    render_module = _defining(modules, "render_comment")
    read_module = _defining(modules, "read_report")
    reports = [report] if report else _committed_reports(tree)
    if render_module is None or read_module is None or not reports:
        return {"skipped": "no render_comment, read_report or committed report.json in the tree"}
    path = str((tree / reports[0]).resolve())
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run(
        [python, "-c", _WALKER, str(tree.resolve()), path, render_module, read_module],
        capture_output=True, text=True, env=env, cwd=tree,
    )
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return {"skipped": f"{python} could not render: {last}"}
    walked = json.loads(proc.stdout)
    walked["report"] = reports[0]
    return walked


def duplicate_pairs(tree: Path) -> dict[str, object]:
    if shutil.which("duplicates") is None:
        return {"skipped": "duplicates is not on PATH"}
    proc = subprocess.run(
        ["duplicates", "--repo", str(tree / PACKAGE), "--most", "1", "--seconds", "120"],
        capture_output=True, text=True,
    )
    first = (proc.stdout.splitlines() or [""])[0]
    counted = re.match(r"(\d+) pairs?\b", first)
    incomplete = [line for line in proc.stdout.splitlines() if line.startswith("incomplete:")]
    if counted is None and not first.startswith("no duplicates"):
        return {"skipped": f"duplicates said: {first or proc.stderr.strip()}"}
    return {"pairs": int(counted.group(1)) if counted else 0, "incomplete": incomplete}


def nav_pages(mkdocs: Path) -> list[str]:
    """The .md pages under mkdocs.yml's `nav:` key (its block, read as lines: no YAML library)."""
    pages, inside = [], False
    for line in mkdocs.read_text(encoding="utf-8").splitlines():
        if re.match(r"nav\s*:", line):
            inside = True
            continue
        if inside and line.strip() and not line[0].isspace() and not line.lstrip().startswith("#"):
            break
        page = re.search(r"([\w./-]+\.md)\s*[\"']?\s*$", line) if inside else None
        if page:
            pages.append(page.group(1))
    return pages


def docs_words(tree: Path) -> dict[str, object]:
    mkdocs = tree / "mkdocs.yml"
    if not mkdocs.is_file():
        return {"skipped": "no mkdocs.yml"}
    docs_dir = re.search(r"^docs_dir\s*:\s*(\S+)", mkdocs.read_text(encoding="utf-8"), re.M)
    root = tree / (docs_dir.group(1) if docs_dir else "docs")
    words = {
        page: len((root / page).read_text(encoding="utf-8").split()) if (root / page).is_file() else 0
        for page in nav_pages(mkdocs)
    }
    longest = max(words, key=words.__getitem__) if words else None
    return {"pages": len(words), "total": sum(words.values()), "longest": longest,
            "longest_words": words.get(longest, 0), "per_page": words}


def measure(tree: Path, python: str, report: str | None) -> dict[str, object]:
    modules = load_modules(tree)
    found = collect_imports(modules)
    return {
        "tree": str(tree),
        "lines": count_lines(modules),
        "cycles": cycles(found.top),
        "lazy_dodges": lazy_dodges(found),
        "longest_functions": longest_functions(modules),
        "public_names": public_names(modules),
        "render_takes_report": report_takers(modules),
        "walk": walk_render(tree, modules, python, report),
        "duplicates": duplicate_pairs(tree),
        "docs_words": docs_words(tree),
    }


def table(figures: dict[str, object]) -> str:
    lines, dup, walk, docs = figures["lines"], figures["duplicates"], figures["walk"], figures["docs_words"]
    out = [
        f"house of {figures['tree']}",
        f"lines in {PACKAGE}/          {lines['physical']} physical, {lines['code']} code",
        f"import cycles           {len(figures['cycles'])}",
        *(f"  cycle: {' '.join(c)}" for c in figures["cycles"]),
        f"lazy imports dodging    {len(figures['lazy_dodges'])}",
        *(
            f"  {d['importer']}:{d['function']} line {d['line']} imports {d['imports']}: {' -> '.join(d['cycle'])}"
            for d in figures["lazy_dodges"]
        ),
        "longest functions",
        *(f"  {f['lines']:5d}  {f['function']}" for f in figures["longest_functions"]),
        f"public names            {figures['public_names']['defined']} defined,"
        f" {figures['public_names']['package_faces']} on package faces",
        f"render fns take Report  {len(figures['render_takes_report'])}",
        "walk of render_comment  "
        + (walk["skipped"] if "skipped" in walk else
           f"{walk['stays']} stays, {walk['returns']} returns, {walk['rooms']} rooms,"
           f" depth {walk['deepest']} ({walk['report']})"),
        "duplicates pairs        "
        + (dup["skipped"] if "skipped" in dup else f"{dup['pairs']} {' '.join(dup['incomplete'])}".rstrip()),
        "docs nav words          "
        + (docs["skipped"] if "skipped" in docs else
           f"{docs['total']} in {docs['pages']} pages; longest {docs['longest']} ({docs['longest_words']})"),
    ]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tree", nargs="?", type=Path, default=Path(__file__).resolve().parents[2])
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--python", help="the interpreter that renders for the walk (default: TREE/.venv's, else this)")
    parser.add_argument("--report", help="the report.json to walk, relative to TREE (default: the first committed)")
    args = parser.parse_args(argv)
    tree = args.tree.resolve()
    if not (tree / PACKAGE).is_dir():
        print(f"house.py: {tree} has no {PACKAGE}/ folder; name the repository's root", file=sys.stderr)
        return 2
    venv = tree / ".venv" / "bin" / "python"
    python = args.python or (str(venv) if venv.exists() else sys.executable)
    figures = measure(tree, python, args.report)
    print(json.dumps(figures, indent=2) if args.json else table(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
