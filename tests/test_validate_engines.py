"""The two-file case of `python -m validation engines`: the compiled workload cut into engine/model.py and
engine/workload.py, its graph-break-callee head, and the criterion read from a report."""

from __future__ import annotations

import argparse
import ast
import os
from pathlib import Path

import pytest

from guard.calibrate import suggested_text
from guard.config import load_thresholds

from guard.cause import find_capture_changes
from guard.report import render_comment
from tests.conftest import commit_all, git
from tests.test_workloads import REPO_ROOT, TINY, run_harness
from validation._engines import CASES, EDITS, THRESHOLDS_FILE, Case, calibrate_case, expected, head_branch, make_repo
from tests.workload_sources import SLEEPY_WORKLOAD
from validation._older import read_any

COMPILED = REPO_ROOT / "guard" / "workloads" / "compiled.py"
GRAPH_BREAK_PAIR = REPO_ROOT / "docs" / "validation" / "h200-engines" / "pairs" / "compiled-graph-break" / "report.json"


def two_file_repo(tmp_path: Path) -> Path:
    args = argparse.Namespace(steps=8, warmup_steps=2, profile_steps=2, repeats=2)
    return make_repo(CASES["two-file"], tmp_path / "work", args)


@pytest.mark.slow
def test_the_two_files_import_what_they_use_and_decode_as_the_one_file_workload(tmp_path):
    repo = two_file_repo(tmp_path)
    model = ast.parse((repo / "engine" / "model.py").read_text())
    workload = ast.parse((repo / "engine" / "workload.py").read_text())
    [from_model] = [n for n in workload.body if isinstance(n, ast.ImportFrom) and n.module == "model"]
    defined = {n.name for n in model.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))} | {
        t.id for n in model.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    assert {a.name for a in from_model.names} <= defined and "build_model" in {a.name for a in from_model.names}
    assert "class CompiledDecode" not in (repo / "engine" / "model.py").read_text()
    assert "fullgraph: bool = True," in (repo / "engine" / "workload.py").read_text()

    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the two files stand alone
    rc, split, stderr = run_harness(tmp_path, "two", "engine/workload.py:make", TINY, root=repo, env=env)
    assert rc == 0, stderr
    rc, whole, stderr = run_harness(tmp_path, "one", "guard.workloads.compiled:make", TINY)
    assert rc == 0, stderr
    assert [r["tokens"] for r in split["runs"]] == [r["tokens"] for r in whole["runs"]]


def test_the_graph_break_callee_head_is_named_in_model_py_and_meets_its_criterion(tmp_path):
    repo = two_file_repo(tmp_path)
    case = CASES["two-file"]
    branch = head_branch(repo, case, "graph-break-callee")
    assert git(repo, "diff", "--name-only", "main", branch).split() == ["engine/model.py", "engine/workload.py"]
    assert EDITS["graph-break-callee"][1] == git(repo, "log", "-1", "--format=%s", branch)
    workload = git(repo, "show", f"{branch}:engine/workload.py")
    assert "fullgraph: bool = False," in workload and "fullgraph: bool = True," not in workload

    changes = find_capture_changes(repo, "main", branch, [])
    lines = git(repo, "show", f"{branch}:engine/model.py").split("\n")
    break_line = next(n for n, line in enumerate(lines, start=1) if "torch._dynamo.graph_break()" in line)
    [model] = [c for c in changes.files if c.path == "engine/model.py"]
    [split] = [s for h in model.hunks for s in h.splits]
    assert (split.line, split.function, split.reachable, split.site_path) == (
        break_line, "Transformer.forward", "traced", "engine/workload.py")
    assert split.site.target == "CompiledDecode._decode_one"

    # the criterion, on a regression's report with this capture change, and with the one-file pair's own
    report = read_any(GRAPH_BREAK_PAIR)
    assert report.verdict == "regression"
    met, criterion = expected("graph-break-callee", report.model_copy(update={"capture": changes}), None)
    assert met and "engine/model.py" in criterion
    assert not expected("graph-break-callee", report, None)[0]  # its capture change is in engine/compiled.py
    passed = report.model_copy(update={"capture": changes, "verdict": "pass"})
    assert not expected("graph-break-callee", passed, None)[0]

    # the comment's Cause section names the file and the line of the break
    comment = render_comment(report.model_copy(update={"capture": changes}))
    sentence = comment[comment.index("### Cause ("):].split("\n\n")[1]
    [hunk] = model.hunks  # the loop's header changed too: the place runs from it to the break
    assert hunk.range.end == break_line and lines[hunk.range.start - 1].lstrip().startswith("if index ==")
    assert sentence.startswith(f"`engine/model.py:{hunk.range.start}-{break_line}` (`Transformer.forward`) ")
    assert "traced by the `torch.compile` of `CompiledDecode._decode_one` in `engine/workload.py`" in sentence


def test_a_calibration_cut_by_the_budget_commits_nothing_and_keeps_its_progress(tmp_path):
    repo = two_file_repo(tmp_path)
    before = git(repo, "rev-parse", "main")
    args = argparse.Namespace(steps=8, warmup_steps=2, profile_steps=2, repeats=2, out=tmp_path / "out")
    line = calibrate_case(repo, CASES["two-file"], 5, args, timeout_s=1.0)
    assert line == "two-file: calibration cut by the budget after 1 s; the pairs run uncalibrated"
    assert git(repo, "rev-parse", "main") == before
    assert "thresholds_file" not in (repo / "guard.toml").read_text()
    kept = tmp_path / "out" / "calibration" / "two-file"
    assert "[measure]\nrepeats = 5\n" in (kept / "guard.toml").read_text()  # the calibration's own processes
    assert (kept / "progress.log").is_file() and not (kept / THRESHOLDS_FILE).exists()


@pytest.mark.slow
def test_a_calibrated_case_names_its_thresholds_in_main_for_every_pair_after_it(tmp_path):
    """`--calibrate N`: guard calibrate of main at N processes per side, its file committed to main
    and named in main's guard.toml (config comes from the base), so the pairs borrow its spreads."""
    case = Case("sleepy", "wl.py:make", "", None)
    args = argparse.Namespace(steps=96, warmup_steps=2, profile_steps=0, repeats=3, out=tmp_path / "out")
    repo = make_repo(case, tmp_path / "work", args)
    (repo / "wl.py").write_text(SLEEPY_WORKLOAD)
    commit_all(repo, "the workload")
    line = calibrate_case(repo, case, 5, args, timeout_s=600)
    written = load_thresholds(tmp_path / "out" / "calibration" / "sleepy" / THRESHOLDS_FILE)
    assert line == f"sleepy: thresholds {suggested_text(written)}", line
    config = git(repo, "show", "main:guard.toml")
    assert f'[measure]\nthresholds_file = "{THRESHOLDS_FILE}"\nrepeats = 3\n' in config
    kept = tmp_path / "out" / "calibration" / "sleepy" / THRESHOLDS_FILE
    assert git(repo, "show", f"main:{THRESHOLDS_FILE}") == kept.read_text().rstrip("\n")
    assert "[[spread]]" in kept.read_text()
    assert git(repo, "log", "-1", "--format=%s", "main") == "sleepy: thresholds calibrated at 5 processes per side"
    assert calibrate_case(repo, case, 5, args, timeout_s=600) == "sleepy: calibrated already"
    assert head_branch(repo, case, "aa") == "validate/aa"
    assert THRESHOLDS_FILE in git(repo, "ls-tree", "--name-only", "validate/aa")
