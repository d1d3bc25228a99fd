"""`workload.entry` checked against the base commit's tree before anything is built: the file
exists and defines the callable, or the message says what the file does define.

A file entry ('path/file.py:make') must be in the commit; a module entry ('pkg.module:make')
is looked for at pkg/module.py, pkg/module/__init__.py and under src/, and where none is in
the tree it is taken to be an installed package, imported as the arm runs (not checked here).
The file is parsed (`ast`), never run: its top-level functions, classes, assignments and
imports are what it defines. Where it could define more than that shows (a star import, a
module `__getattr__`), or the file is a symlink the arm's own check follows after the build,
nothing is said here.
"""

from __future__ import annotations

import ast
import posixpath

from guard._errors import ConfigError
from guard._git import read_git_bytes
from guard.config._paths import is_file_entry
from guard.config._sources import CommitFiles

MAX_ENTRY_BYTES = 4_000_000
MOST_NAMED = 12  # names a message lists


def check_entry_in_commit(entry: str, files: CommitFiles, fix: str) -> None:
    """Raise ConfigError where the commit lacks `entry`'s file or the file does not define its
    callable; `fix` says where the entry is set (the base commit's guard.toml, a --config)."""
    target, _, name = entry.rpartition(":")
    candidates = [target] if is_file_entry(target) else _module_paths(target)
    for path in candidates:
        try:
            source = files.read(path, "workload.entry", MAX_ENTRY_BYTES)
        except ConfigError:
            return  # a symlink or another kind of entry: the arm's check judges it once built
        if source is not None:
            break
    else:
        if is_file_entry(target):
            nearby = _python_files(files, posixpath.dirname(target))
            listed = f"; the Python files there: {_names(nearby)}" if nearby else "; that folder holds no Python file"
            raise ConfigError(f"workload.entry '{entry}': {files.shown(target)} does not exist{listed}. Fix "
                              f"workload.entry in {fix}")
        return
    defined = _defined(source, files.shown(path), entry, fix)
    if defined is not None and name not in defined[0] | defined[1]:
        callables, bound = sorted(defined[0]), sorted(n for n in defined[1] if not n.startswith("_"))
        what = (f"it defines {_names(callables)}" if callables else
                f"it defines no function or class; the names it imports or assigns: {_names(bound)}" if bound else
                "it defines no function or class")
        raise ConfigError(f"workload.entry '{entry}': {files.shown(path)} defines no '{name}'; {what}. Name one "
                          f"of them in workload.entry in {fix}, or define '{name}' in the file")


def _module_paths(module: str) -> list[str]:
    parts = module.replace(".", "/")
    return [f"{root}{parts}.py" for root in ("", "src/")] + [f"{root}{parts}/__init__.py" for root in ("", "src/")]


def _defined(source: bytes, shown: str, entry: str, fix: str) -> tuple[set[str], set[str]] | None:
    """(functions and classes, other names) the module defines at its top level; None where it
    could define more than its top level shows."""
    try:
        tree = ast.parse(source, filename=shown)
    except SyntaxError as exc:
        raise ConfigError(f"workload.entry '{entry}': {shown} is not valid Python (line {exc.lineno}: {exc.msg}); "
                          f"fix the file, or workload.entry in {fix}") from None
    callables: set[str] = set()
    others: set[str] = set()
    for node in _top_level(tree.body):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            callables.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            others |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            if any(alias.name == "*" for alias in node.names):
                return None
            others |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
    if "__getattr__" in callables:
        return None
    return callables, others


def _top_level(body: list[ast.stmt]) -> list[ast.stmt]:
    """The statements that run at import, with those inside top-level if/try blocks."""
    found = []
    for node in body:
        found.append(node)
        if isinstance(node, ast.If):
            found += _top_level(node.body) + _top_level(node.orelse)
        elif isinstance(node, ast.Try):
            found += _top_level(node.body) + _top_level(node.orelse) + _top_level(node.finalbody)
            for handler in node.handlers:
                found += _top_level(handler.body)
    return found


def _python_files(files: CommitFiles, folder: str) -> list[str]:
    listed = read_git_bytes(files.repo, "ls-tree", "--full-tree", "--name-only", "-z", files.sha, "--",
                            f"{folder}/" if folder else ".")
    if listed.returncode != 0:
        return []
    names = [n.decode("utf-8", "replace") for n in listed.stdout.split(b"\0") if n]
    return sorted(n for n in names if n.endswith(".py"))


def _names(names: list[str]) -> str:
    shown = ", ".join(f"'{n}'" for n in names[:MOST_NAMED])
    return shown + (f" and {len(names) - MOST_NAMED} more" if len(names) > MOST_NAMED else "")
