"""Which def/class a line of a Python file sits in, and which graph APIs those scopes use.

A def "uses" an API when it calls one (its body or decorators), not when it merely names
the type in an annotation: `self.graphs: list[CUDAGraph]` in __init__ captures nothing.
A def that only calls defs named for CUDA graphs (`self.capture_cudagraph()`) uses them at
those calls: its anchors are the statements making them and the if/for/while headers
around them, so the rest of a long `__init__` or `main` is not capture code.
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
    # API -> the line spans where it counts, for APIs the def has only by calling defs named for graphs
    anchors: dict[str, list[tuple[int, int]]] = field(default_factory=dict)

    def apis_at(self, lines: range) -> list[str]:
        """The APIs that make a change on `lines` a change to capture code."""
        return [a for a in self.apis
                if a not in self.anchors or any(s <= n <= e for n in lines for s, e in self.anchors[a])]


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
                    anchors: dict[str, list[tuple[int, int]]] = {}
                    if kind == "def":
                        called, anchors = self._called_apis(child, parents)
                        anchors = {a: spans for a, spans in anchors.items() if a not in apis}
                        apis += [a for a in called if a not in apis]
                    scopes.append(Scope(kind, child.name, qualname, min(starts),
                                        child.end_lineno or child.lineno, apis, child, anchors))
                    visit(child, qualname + ".")
                else:
                    visit(child, prefix)

        parents = {id(child): parent for parent in ast.walk(tree) for child in ast.iter_child_nodes(parent)}
        visit(tree, "")
        scopes.sort(key=lambda s: (s.start, -s.end))
        return scopes

    def _called_apis(self, node: ast.AST, parents: dict[int, ast.AST]
                     ) -> tuple[list[str], dict[str, list[tuple[int, int]]]]:
        """APIs in the calls inside `node`, annotations left out, and the anchors of those it only
        calls by a graph-ish name. A torch.compile call is not one: whether it captures, and
        what it captures, is for _compile to say."""
        fragments: list[tuple[str, ast.AST]] = []
        for sub in ast.walk(node):
            if isinstance(sub, ast.Call):
                fragments.append((self._segment(sub.func) + "()", sub))
            elif isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                # a bare decorator such as @cuda_graph_runner is a call too
                fragments += [(self._segment(d), d) for d in sub.decorator_list if not isinstance(d, ast.Call)]
        seen: list[str] = []
        anchors: dict[str, list[tuple[int, int]]] = {}
        primitive: set[str] = set()
        for fragment, where in fragments:
            for api in find_apis(fragment):
                if api.name not in seen:
                    seen.append(api.name)
                if api.name_only:
                    anchors.setdefault(api.name, []).extend(_anchor_spans(where, node, parents))
                else:
                    primitive.add(api.name)
        return seen, {a: spans for a, spans in anchors.items() if a not in primitive}

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


def _anchor_spans(call: ast.AST, function: ast.AST, parents: dict[int, ast.AST]) -> list[tuple[int, int]]:
    """The statement holding `call`, and the headers of the if/for/while blocks around it in `function`."""
    spans: list[tuple[int, int]] = []
    current: ast.AST = call
    while current is not function:
        parent = parents.get(id(current))
        if parent is None:
            break
        if isinstance(current, ast.stmt) and not spans:
            spans.append((current.lineno, current.end_lineno or current.lineno))
        if isinstance(parent, (ast.If, ast.While)) and current is not parent.test:
            spans.append((parent.test.lineno, parent.test.end_lineno or parent.test.lineno))
        elif isinstance(parent, (ast.For, ast.AsyncFor)) and current is not parent.iter:
            spans.append((parent.lineno, parent.iter.end_lineno or parent.iter.lineno))
        current = parent
    return spans


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())].expandtabs()
