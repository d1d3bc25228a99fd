"""The compiled workload as two files, the way gpt-fast lays out an engine: the model and what it
is built from in `model.py`, the compiled decode step in `workload.py`, which imports it from
beside itself (`from model import ...`, the harness puts a workload file's folder on sys.path).

Made from guard/workloads/compiled.py by cutting it where its workload part begins: the code
above goes to model.py as it is, the workload part to workload.py under the imports it needs,
each name of model.py it uses imported from there. The decode step is compiled with
fullgraph=True, so a graph break in the model needs the head to allow it.
"""

from __future__ import annotations

import ast

WORKLOAD_CUT = "# -- the workload ---"
FULLGRAPH_DEFAULT = "        fullgraph: bool = False,\n"
WHOLE_GRAPH = "        fullgraph: bool = True,\n"
MODEL_DOC = '''"""The model of the compiled decode workload: a Llama-like decoder, its weights seeded on the
CPU, and the checks and helpers the decode step in workload.py shares with it."""'''
WORKLOAD_DOC = '''"""The decode step, compiled with torch.compile (mode reduce-overhead captures it as CUDA graphs),
over the model of model.py: the workload `engine/workload.py:make`."""'''


def two_files(source: str) -> dict[str, str]:
    """{"model.py": ..., "workload.py": ...} from the one-file workload's source."""
    if WORKLOAD_CUT not in source or FULLGRAPH_DEFAULT not in source:
        raise ValueError("the compiled workload no longer has its workload part or fullgraph default "
                         "where validation/_two_file.py cuts it; update that module")
    cut = source.index(WORKLOAD_CUT)
    top, workload = source[:cut], source[cut:].replace(FULLGRAPH_DEFAULT, WHOLE_GRAPH, 1)
    tree = ast.parse(top)
    docstring = tree.body[0]
    assert isinstance(docstring, ast.Expr) and docstring.end_lineno is not None
    lines = top.split("\n")
    model = "\n".join([MODEL_DOC, *lines[docstring.end_lineno:]]).rstrip() + "\n"
    used = {n.id for n in ast.walk(ast.parse(workload)) if isinstance(n, ast.Name)}
    imports, defined = [], []
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            kept = [a for a in node.names if (a.asname or a.name).split(".")[0] in used]
            if isinstance(node, ast.ImportFrom) and node.module == "__future__":
                kept = list(node.names)
            if kept:
                node.names = kept
                imports.append(ast.unparse(node))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.append(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            defined += [t.id for t in targets if isinstance(t, ast.Name)]
    names = [n for n in defined if n in used]
    from_model = "from model import (\n" + "".join(f"    {n},\n" for n in names) + ")\n"
    future, rest = imports[:1], imports[1:]
    stdlib = [i for i in rest if "torch" not in i]
    torch_imports = [i for i in rest if "torch" in i]
    header = "\n".join([WORKLOAD_DOC, "", *future, "", *stdlib, "", *torch_imports, "", from_model, ""])
    return {"model.py": model, "workload.py": header + "\n" + workload}
