"""Which def/class a line of a Python file sits in, and which graph APIs those scopes use.

A def "uses" an API when it calls one (its body or decorators), not when it merely names
the type in an annotation: `self.graphs: list[CUDAGraph]` in __init__ captures nothing.
Files that do not parse fall back to looking back for `def`/`class` lines by indentation.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from guard.cause._patterns import code_text, find_apis

_DEF_LINE = re.compile(r"^(\s*)(?:async\s+def|def|class)\s+([A-Za-z_]\w*)")


@dataclass
class Scope:
    kind: str  # "def" or "class"
    name: str
    qualname: str
    start: int  # first line, decorators included
    end: int
    apis: list[str] = field(default_factory=list)  # APIs its name says, and for a def, those it calls
    node: ast.AST | None = None


class ScopeIndex:
    """Scopes of one version of one Python file."""

    def __init__(self, source: str, path: str) -> None:
        self.path = path
        # numbered as git numbers them: str.splitlines would also break at \x0c and friends
        self.lines = [line.removesuffix("\r") for line in source.split("\n")]
        self.tree: ast.Module | None
        try:
            self.tree = ast.parse(source)
        except (SyntaxError, ValueError):
            self.tree = None
        self.scopes = self._from_ast(self.tree) if self.tree is not None else self._from_indentation()

    def chain(self, line: int) -> list[Scope]:
        """The scopes holding `line`, outermost first."""
        return [s for s in self.scopes if s.start <= line <= s.end]

    def capture_defs(self) -> list[Scope]:
        return [s for s in self.scopes if s.kind == "def" and s.apis]

    # -- building -----------------------------------------------------------------------

    def _from_ast(self, tree: ast.Module) -> list[Scope]:
        scopes: list[Scope] = []

        def visit(node: ast.AST, prefix: str) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    qualname = f"{prefix}{child.name}"
                    starts = [child.lineno] + [d.lineno for d in child.decorator_list]
                    kind = "class" if isinstance(child, ast.ClassDef) else "def"
                    apis = [a.name for a in find_apis(child.name)]
                    if kind == "def":
                        apis += [a for a in self._called_apis(child) if a not in apis]
                    scopes.append(Scope(kind, child.name, qualname, min(starts),
                                        child.end_lineno or child.lineno, apis, child))
                    visit(child, qualname + ".")
                else:
                    visit(child, prefix)

        visit(tree, "")
        scopes.sort(key=lambda s: (s.start, -s.end))
        return scopes

    def _called_apis(self, node: ast.AST) -> list[str]:
        """APIs in the calls inside `node`, annotations left out. A torch.compile call is not one:
        whether it captures, and what it captures, is for _compile to say."""
        fragments: list[str] = []
        for sub in ast.walk(node):
            if isinstance(sub, ast.Call):
                fragments.append(self._segment(sub.func) + "()")
            elif isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                # a bare decorator such as @cuda_graph_runner is a call too
                fragments += [self._segment(d) for d in sub.decorator_list if not isinstance(d, ast.Call)]
        seen: list[str] = []
        for fragment in fragments:
            seen += [a.name for a in find_apis(fragment) if a.name not in seen]
        return seen

    def _segment(self, node: ast.AST) -> str:
        start, end = getattr(node, "lineno", 0), getattr(node, "end_lineno", 0)
        if not start or not end:
            return ""
        if start == end:
            # ast offsets count UTF-8 bytes, not characters
            raw = self.lines[start - 1].encode("utf-8")
            piece = raw[node.col_offset:node.end_col_offset]  # type: ignore[attr-defined]
            return piece.decode("utf-8", errors="replace")
        return " ".join(line.strip() for line in self.lines[start - 1:end])

    def _from_indentation(self) -> list[Scope]:
        """Scopes of a file that does not parse: a def/class runs until the next line indented no deeper."""
        scopes: list[Scope] = []
        stack: list[Scope] = []
        for number, line in enumerate(self.lines, start=1):
            match = _DEF_LINE.match(line)
            if match is None:
                continue
            indent = len(match[1].expandtabs())
            while stack and len(_indent(self.lines[stack[-1].start - 1])) >= indent:
                stack.pop()
            prefix = stack[-1].qualname + "." if stack else ""
            kind = "class" if line.lstrip().startswith("class") else "def"
            scope = Scope(kind, match[2], prefix + match[2], number, self._block_end(number, indent))
            body = self.lines[number - 1:scope.end]
            scope.apis = [a.name for a in find_apis(match[2])]
            if kind == "def":
                scope.apis += [a.name for a in find_apis(code_text(body, self.path)) if a.name not in scope.apis]
            scopes.append(scope)
            stack.append(scope)
        return scopes

    def _block_end(self, start: int, indent: int) -> int:
        end = start
        for number in range(start + 1, len(self.lines) + 1):
            text = self.lines[number - 1]
            if not text.strip() or text.lstrip().startswith("#"):
                continue
            if len(_indent(text)) <= indent:
                break
            end = number
        return end


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())].expandtabs()
