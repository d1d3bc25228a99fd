"""What dynamo compiled, per process and base against head: the real harness in a subprocess
on a workload whose compiled forward (in another module than the workload file) gains a
graph break in head; the guard's models, comparison, explanation and comment line."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from guard.compare import compiled_change
from guard.explain import Cause, compiled_cause
from guard.measure import ArmMeasurement, DynamoRecord, GraphBreak, RepeatResult
from guard.report import Report, render_comment
from guard.report._compiled_text import compiled_line
from tests.conftest import commit_all, git
from tests.report_fixtures import committed, explained

REPO_ROOT = Path(__file__).resolve().parents[1]
HARNESS = REPO_ROOT / "guard" / "harness" / "run.py"
DEMO = REPO_ROOT / "docs" / "examples" / "h200-demo-545b03b" / "report.json"
BREAK_CALL = "torch._dynamo.graph_break()"
BATCH_SIZES = [1, 2]

MODEL = textwrap.dedent("""\
    import torch


    class Tiny(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            torch.manual_seed(0)
            self.embed = torch.nn.Embedding(32, 16)
            self.proj = torch.nn.Linear(16, 32)

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            x = self.embed(ids)
            x = torch.tanh(x)
    {extra}        return self.proj(x)
    """)

WORKLOAD = textwrap.dedent("""\
    import torch

    from model import Tiny

    WORK = {work}


    class Workload:
        def __init__(self, compiled: bool, device: str, mode: str | None, fullgraph: bool) -> None:
            self.device = torch.device(device)
            self.model = Tiny().to(self.device)
            how = {{"mode": mode}} if mode else {{"backend": "eager"}}  # eager: no C compiler on a CPU
            how["fullgraph"] = fullgraph
            self.decode = torch.compile(self.model, **how) if compiled else self.model

        def setup(self, batch_size: int) -> None:
            self.ids = torch.arange(batch_size, device=self.device) % 32

        @torch.no_grad()
        def step(self) -> torch.Tensor:
            acc = 0
            for i in range(WORK):  # the host's work around the compiled call
                acc += i * i
            self.ids = self.decode(self.ids).argmax(-1)
            return self.ids


    def make(compiled: bool = True, device: str = "cpu", mode: str | None = None, fullgraph: bool = False) -> Workload:
        return Workload(compiled, device, mode, fullgraph)
    """)


def _sources(root: Path, breaks: int, then: str = "x = x + 1", work: int = 0) -> None:
    """model.py with `breaks` graph breaks in forward, each followed by `then`; wl.py compiles it."""
    (root / "model.py").write_text(MODEL.format(extra=f"        {BREAK_CALL}\n        {then}\n" * breaks))
    (root / "wl.py").write_text(WORKLOAD.format(work=work))


def _tree(root: Path, breaks: int) -> Path:
    root.mkdir()
    _sources(root, breaks)
    return root


def _run(tmp_path: Path, root: Path, arm: str, **options: Any) -> dict[str, Any]:
    spec = {"entry": "wl.py:make", "root": str(root), "options": options, "batch_sizes": BATCH_SIZES,
            "steps": 4, "warmup_steps": 3, "arm": arm, "repeat": 0}
    spec_path, out_path = tmp_path / f"{arm}.spec.json", tmp_path / f"{arm}.json"
    spec_path.write_text(json.dumps(spec))
    proc = subprocess.run([sys.executable, str(HARNESS), str(spec_path), str(out_path)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(out_path.read_text())


def _break_lines(source: str) -> list[int]:
    """The lines of `source` that call graph_break, counted from the source alone."""
    return [n for n, line in enumerate(source.splitlines(), 1) if BREAK_CALL in line]


@pytest.fixture(scope="module")
def arms(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("dynamo")
    base, head = _tree(tmp / "base", 0), _tree(tmp / "head", 2)
    return {"base": _run(tmp, base, "base"), "head": _run(tmp, head, "head"),
            "eager": _run(tmp, base, "eager", compiled=False), "head_source": (head / "model.py").read_text()}


@pytest.mark.slow
def test_the_harness_records_each_break_where_it_is_in_the_callee(arms: dict[str, Any]) -> None:
    lines = _break_lines(arms["head_source"])
    assert len(lines) == 2
    head, base = arms["head"]["dynamo"], arms["base"]["dynamo"]
    assert {(b["path"], b["line"], b["function"], b["in_tree"]) for b in head["breaks"]} == {
        ("model.py", n, "forward", True) for n in lines}
    assert all("graph_break" in b["reason"] and "\n" not in b["reason"] for b in head["breaks"])
    assert base["breaks"] == [] and base["break_count"] == 0
    # each break splits the compiled forward once more, once for each shape it is compiled for
    assert base["graphs"] == len(BATCH_SIZES)
    assert head["graphs"] == len(BATCH_SIZES) * (len(lines) + 1)
    assert head["break_count"] == sum(b["count"] for b in head["breaks"]) == len(BATCH_SIZES) * len(lines)
    assert base["recompiles"] >= len(BATCH_SIZES) - 1  # the second shape is a recompilation


@pytest.mark.gpu
def test_on_a_gpu_the_cudagraph_trees_record_graphs_and_the_breaks_are_named(tmp_path: Path) -> None:
    """mode reduce-overhead: inductor's CUDA graph trees record each compiled graph after its
    warmup; head's breaks are where its source has them, as on a CPU."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    base, head = _tree(tmp_path / "base", 0), _tree(tmp_path / "head", 2)
    found = {name: _run(tmp_path, root, name, device="cuda", mode="reduce-overhead")["dynamo"]
             for name, root in (("base", base), ("head", head))}
    lines = _break_lines((head / "model.py").read_text())
    assert {(b["path"], b["line"]) for b in found["head"]["breaks"]} == {("model.py", n) for n in lines}
    assert found["base"]["breaks"] == []
    assert found["base"]["cudagraphs_recorded"] >= 1
    assert found["head"]["cudagraphs_recorded"] >= found["base"]["cudagraphs_recorded"]
    assert found["head"]["graphs"] > found["base"]["graphs"]


@pytest.mark.slow
def test_a_fullgraph_compile_is_recorded_though_dynamo_counts_no_frames_for_it(tmp_path: Path) -> None:
    whole = _run(tmp_path, _tree(tmp_path / "whole", 0), "whole", fullgraph=True)["dynamo"]
    assert whole is not None  # dynamo's "frames" counters stay empty under fullgraph=True
    assert whole["graphs"] == len(BATCH_SIZES) and whole["break_count"] == 0 and whole["breaks"] == []


@pytest.mark.slow
def test_a_process_that_never_compiled_records_nothing(arms: dict[str, Any]) -> None:
    assert "dynamo" not in arms["eager"]
    assert RepeatResult.model_validate(arms["eager"]).dynamo is None


@pytest.mark.slow
def test_base_against_head_names_the_breaks_head_added(arms: dict[str, Any]) -> None:
    measured = {name: ArmMeasurement(arm=name, repeats=[RepeatResult.model_validate(arms[name])] * 2)
                for name in ("base", "head")}
    change = compiled_change(measured, "base", "head")
    assert change is not None and change.rose and change.more_graphs
    assert [(b.path, b.line) for b in change.breaks_added] == [("model.py", n) for n in _break_lines(
        arms["head_source"])]
    assert change.base is not None and change.head is not None and change.head.processes == 2
    line = compiled_line(change)
    assert line is not None
    first = _break_lines(arms["head_source"])[0]
    assert f"base {len(BATCH_SIZES)} graphs, no graph break" in line
    assert f"head {arms['head']['dynamo']['graphs']} graphs, 2 graph breaks, new at `model.py:{first}`" in line
    assert compiled_change({"base": measured["base"], "head": measured["base"]}, "base", "head").differs is False


def _record(path: str, reason: str, graphs: int = 3, function: str = "forward") -> DynamoRecord:
    return DynamoRecord(frames=2, graphs=graphs, break_count=1,
                        breaks=[GraphBreak(path=path, line=7, function=function, in_tree=True, reason=reason)])


def _measured(base: DynamoRecord | None, head: DynamoRecord) -> dict[str, ArmMeasurement]:
    def repeat(arm: str, record: DynamoRecord | None) -> RepeatResult:
        return RepeatResult(arm=arm, repeat=0, environment={}, runs=[], dynamo=record)
    return {"base": ArmMeasurement(arm="base", repeats=[repeat("base", base)]),
            "head": ArmMeasurement(arm="head", repeats=[repeat("head", head)])}


HOSTILE = "<img src=x onerror=alert(1)> [click](https://evil.example) @octocat #12 `code` *bold* | cell"


def test_a_hostile_reason_and_path_are_escaped_in_the_comment() -> None:
    report = committed(DEMO)
    change = compiled_change(_measured(None, _record("m`o<d>el.py", HOSTILE, function="f|n")), "base", "head")
    again = explained(report.model_copy(update={"compiled": change}))
    comment = render_comment(again)
    (line,) = [s for s in comment.splitlines() if s.startswith("Compiled by dynamo")]
    outside_code = re.sub(r"(`+)[^`].*?\1(?!`)", "", line)  # the path and function, in their code spans
    for raw in ("<img", "[click]", "*bold*", "| cell", "`code`"):
        assert not re.search(r"(?<!\\)" + re.escape(raw), outside_code), raw
    assert "@octocat" not in line and "#12" not in line  # no mention, no issue link
    assert "\\<img src=x onerror=alert(1)\\>" in line and "``m`o<d>el.py:7``" in line and "`f|n`" in line
    assert "base did not use torch.compile" in line


def test_the_breaks_account_for_idle_time_between_kernels_only() -> None:
    change = compiled_change(_measured(_record("model.py", "a", graphs=1).model_copy(update={"breaks": []}),
                                       _record("model.py", "Call to graph_break")), "base", "head")
    idle = Cause(batch_size=2, kind="idle_between_kernels", dominant=True)
    found = compiled_cause(change, [idle, Cause(batch_size=1, kind="slower_kernels", dominant=True)])
    assert found is not None and found.batch_sizes == [2] and found.graphs == (1, 3) and found.breaks_added == 1
    assert compiled_cause(change, [Cause(batch_size=1, kind="slower_kernels", dominant=True)]) is None
    same = compiled_change(_measured(_record("model.py", "x"), _record("model.py", "x")), "base", "head")
    assert compiled_cause(same, [idle]) is None


def test_the_report_keeps_the_comparison_and_reads_back_the_same(tmp_path: Path) -> None:
    report = committed(DEMO)
    assert "compiled" not in json.loads(report.model_dump_json())  # no key where nothing compiled
    change = compiled_change(_measured(_record("model.py", "x", graphs=1).model_copy(update={"breaks": []}),
                                       _record("model.py", "Call to graph_break")), "base", "head")
    again = explained(report.model_copy(update={"compiled": change}))
    assert again.explanation.compiled is not None and again.explanation.compiled.batch_sizes == [2]
    assert again.explanation.headline.graph_breaks is (again.explanation.headline.batch_size == 2)
    text = again.model_dump_json(indent=2)
    back = Report.model_validate_json(text)
    assert back == again and back.model_dump_json(indent=2) == text
    assert "More graphs per step account for the time batch size 2 lost" in render_comment(back)


CONFIG = """
[workload]
entry = "wl.py:make"
batch_sizes = [1]
steps = 12
warmup_steps = 2
# one timed pass, no timed warmup: what this test checks is not the figures' spread
tok_per_s_min_s = 0
warmup_max_s = 0
[build]
method = "none"
[measure]
repeats = 3
allow_few_repeats = true  # the CPU tests' few processes
max_rounds = 2  # the CPU tests' time: one confirmation round at most
"""


@pytest.mark.slow
def test_guard_run_names_the_break_head_added_in_the_callee(tmp_path: Path) -> None:
    """Head breaks the compiled forward in model.py, which the workload file calls, and does
    more host work per step: the comment's Cause section says where dynamo broke the graph."""
    repo = tmp_path / "engine"
    repo.mkdir()
    git(repo, "init", "--quiet", "--initial-branch=main")
    (repo / "guard.toml").write_text(CONFIG)
    _sources(repo, 0, work=2000)
    commit_all(repo, "base workload")
    git(repo, "checkout", "--quiet", "-b", "feature")
    _sources(repo, 1, then="pass", work=40000)
    commit_all(repo, "break the graph in forward")
    (line,) = _break_lines((repo / "model.py").read_text())
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "guard", "run", "--repo", str(repo), "--head", "feature",
                           "--out", str(out)], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 1, proc.stderr
    report = Report.model_validate_json((out / "report.json").read_text())
    assert report.verdict == "regression" and report.hash_match is True
    change = report.compiled
    assert change is not None and change.base is not None and change.head is not None
    # every process of each arm, a confirmation round's too
    assert (change.base.processes, change.head.processes) == (report.arm("base").repeats, report.arm("head").repeats)
    assert change.base.breaks == [] and [(b.path, b.line, b.function) for b in change.breaks_added] == [
        ("model.py", line, "forward")]
    assert change.head.graphs[0] == change.base.graphs[1] + 1  # the forward split in two
    for repeat in range(3):  # every process recorded it, after its warmup
        result = json.loads((out / "runs" / f"head-{repeat}.json").read_text())
        assert [(b["path"], b["line"]) for b in result["dynamo"]["breaks"]] == [("model.py", line)]
    comment = (out / "comment.md").read_text()
    assert f"new at `model.py:{line}` in `forward`" in comment.split("### Cause")[1]
