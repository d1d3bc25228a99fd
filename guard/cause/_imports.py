"""Which names of one Python file stand for another module of the same commit: its imports of it.

A dotted module name stands for the file `a/b.py` or the package `a/b/__init__.py`, found
from the repository root, beside the importing file (a script's folder is on sys.path), or,
for a name of two parts or more, under any folder (`src/a/b.py`); a relative import counts
from the importing file's package. The import statements are read wherever they are, in a
def or at module level.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import PurePosixPath


@dataclass(frozen=True)
class ModuleImport:
    """One import statement of the module: the spellings it binds to the module and to its names."""

    line: int
    modules: tuple[str, ...] = ()  # spellings of the module itself: "model", "engine.model", "m"
    names: dict[str, str] = field(default_factory=dict)  # local name -> the module's own name
    star: bool = False  # `from module import *`


def module_stem(path: str) -> str:
    """`engine/model.py` -> `engine/model`; `engine/model/__init__.py` -> `engine/model`."""
    pure = PurePosixPath(path)
    return str(pure.parent) if pure.name == "__init__.py" else str(pure.with_suffix(""))


def imports_of(tree: ast.Module, importer: str, target: str) -> list[ModuleImport]:
    """The import statements of `tree` (the file `importer`) that bind the module at `target`."""
    stem = module_stem(target)
    here = PurePosixPath(importer).parent
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules = []
            for alias in node.names:
                parts = alias.name.split(".")
                if alias.asname is not None:
                    if _names(stem, here, alias.name):
                        modules.append(alias.asname)
                else:  # `import a.b.c` binds `a`; each prefix that is the module is spelt as written
                    modules += [".".join(parts[:n]) for n in range(1, len(parts) + 1)
                                if _names(stem, here, ".".join(parts[:n]))]
            if modules:
                found.append(ModuleImport(node.lineno, modules=tuple(modules)))
        elif isinstance(node, ast.ImportFrom):
            base = _relative_base(here, node.level)
            own = node.module is not None and _names(stem, here, node.module, base)
            modules, names, star = [], {}, False
            for alias in node.names:
                if alias.name == "*":
                    star = star or own
                elif own:
                    names[alias.asname or alias.name] = alias.name
                elif _names(stem, here, f"{node.module}.{alias.name}" if node.module else alias.name, base):
                    modules.append(alias.asname or alias.name)  # `from engine import model`
            if modules or names or star:
                found.append(ModuleImport(node.lineno, tuple(modules), names, star))
    return sorted(found, key=lambda i: i.line)


def _relative_base(here: PurePosixPath, level: int) -> PurePosixPath | None:
    if level == 0:
        return None
    base = here
    for _ in range(level - 1):
        base = base.parent
    return base


def _names(stem: str, here: PurePosixPath, dotted: str, base: PurePosixPath | None = None) -> bool:
    """Whether the module spelt `dotted` is the file whose stem is `stem`."""
    relative = dotted.replace(".", "/")
    if base is not None:
        return _join(base, relative) == stem
    if stem == relative or stem == _join(here, relative):
        return True
    return "/" in relative and stem.endswith("/" + relative)


def _join(folder: PurePosixPath, relative: str) -> str:
    return relative if str(folder) in ("", ".") else f"{folder}/{relative}"
