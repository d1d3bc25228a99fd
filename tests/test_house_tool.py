"""tools/dev/house.py: the review's figures, found in a tiny package whose answers are known by construction."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "tools" / "dev" / "house.py"
LONG_BODY = 40  # statements in the long function: its lines are these and its `def`

PACKAGE = {
    "__init__.py": "from guard.a import A_NAME\n__all__ = ['A_NAME']\n",
    # a <-> b at the top: a cycle
    "a.py": "from guard.b import B_NAME\nA_NAME = 1\n\n\ndef long_one():\n"
    + "".join(f"    x{i} = {i}\n" for i in range(LONG_BODY)),
    "b.py": "from guard import a\nB_NAME = 2\n_PRIVATE = 3\n",
    # c -> d lazily, d -> c at the top: moved up, c's import would close a cycle
    "c.py": "C_NAME = 1\n\n\ndef later():\n    from guard.d import D_NAME\n    return D_NAME\n",
    "d.py": "from guard.c import C_NAME\nD_NAME = C_NAME\n",
    # e -> f only for type checkers, f -> e at the top: no cycle at run time
    "e.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from guard.f import F\n",
    "f.py": "import guard.e\nF = int\n",
    "report/__init__.py": "",
    "report/_words.py": "from guard.report._schema import Report\n\n\n"
    "def takes(report: Report) -> str:\n    return ''\n\n\ndef takes_less(reports: list[str]) -> str:\n    return ''\n",
    "report/_schema.py": "class Report:\n    pass\n",
}


def house(tree: Path) -> dict:
    proc = subprocess.run([sys.executable, str(SCRIPT), str(tree), "--json"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def plant(tmp_path: Path) -> Path:
    for name, text in PACKAGE.items():
        path = tmp_path / "guard" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def test_the_top_level_cycle_is_found_and_the_type_checking_one_is_not(tmp_path: Path) -> None:
    assert house(plant(tmp_path))["cycles"] == [["guard.a", "guard.b"]]


def test_a_lazy_import_that_would_close_a_cycle_is_named_with_its_cycle(tmp_path: Path) -> None:
    dodges = house(plant(tmp_path))["lazy_dodges"]
    assert dodges == [{"importer": "guard.c", "function": "later", "line": 5, "imports": "guard.d",
                       "cycle": ["guard.c", "guard.d", "guard.c"]}]


def test_the_longest_function_comes_first_with_its_lines(tmp_path: Path) -> None:
    longest = house(plant(tmp_path))["longest_functions"][0]
    assert longest == {"lines": LONG_BODY + 1, "function": "guard.a:long_one"}


def test_lines_public_names_and_render_functions_taking_report(tmp_path: Path) -> None:
    figures = house(plant(tmp_path))
    texts = PACKAGE.values()
    assert figures["lines"]["physical"] == sum(len(t.splitlines()) for t in texts)
    assert figures["lines"]["code"] == sum(1 for t in texts for line in t.splitlines() if line.strip())
    # A_NAME long_one B_NAME C_NAME later D_NAME F takes takes_less Report; __init__ exports A_NAME
    assert figures["public_names"] == {"defined": 10, "package_faces": 1}
    assert figures["render_takes_report"] == ["guard.report._words:takes"]
    assert "skipped" in figures["walk"] and "skipped" in figures["docs_words"]
