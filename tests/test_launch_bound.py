"""Launch-bound time: launch counts from traces, decode that fell out of its CUDA graphs, host
time per step, and GPU-timed passes whose host outran its hold."""

from __future__ import annotations

import gzip
import json
import statistics
from pathlib import Path

import pytest

from guard.compare import UNHELD_SHARE
from guard.measure import relative_change, spread
from guard.report import render_comment
from guard.trace import TraceSection, analyze, diff, read_trace
from guard.trace._analyze import GRAPH_LAUNCH_API, KERNEL_LAUNCH_API, launches_per_step
from tests.test_trace_analysis import annotated_trace
from tests.report_fixtures import committed, current_file, explained
from tests.rules import rule_at

REPO_ROOT = Path(__file__).resolve().parents[1]
FIXTURES = REPO_ROOT / "tests" / "fixtures" / "traces"
ONE_GRAPH = FIXTURES / "h200-harness-guard-step-one-graph.json.gz"
PIECEWISE = FIXTURES / "h200-harness-guard-step-piecewise.json.gz"
EXAMPLE = current_file(REPO_ROOT / "docs" / "examples" / "h200-demo" / "report.json")


def raw_launches(path: Path) -> tuple[float, float]:
    """Graph and kernel launches per step, counted from the trace's JSON by name alone."""
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    steps = sum(1 for e in events if e.get("name") == "guard.step" and e.get("ph") == "X"
                and e.get("cat") == "user_annotation")
    names = [e["name"] for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver")]
    graphs = sum(1 for n in names if n == "cudaGraphLaunch")
    kernels = sum(1 for n in names if n in ("cudaLaunchKernel", "cuLaunchKernel", "cuLaunchKernelEx",
                                            "cudaLaunchKernelExC"))
    return graphs / steps, kernels / steps


def test_launch_names_of_both_profilers_count() -> None:
    calls = {"cudaGraphLaunch": 1.0, "cudaGraphLaunch_v10000": 2.0, "cuGraphLaunch": 1.0,
             "cudaLaunchKernel": 3.0, "cuLaunchKernelEx": 4.0, "cudaLaunchKernel_v7000": 5.0,
             "cudaMemcpyAsync": 7.0, "cudaGraphInstantiate": 9.0}
    assert launches_per_step(calls, GRAPH_LAUNCH_API) == 4.0
    assert launches_per_step(calls, KERNEL_LAUNCH_API) == 12.0


@pytest.mark.parametrize("path", [ONE_GRAPH, PIECEWISE])
def test_h200_traces_give_the_launches_their_events_hold(path: Path) -> None:
    figures = analyze(read_trace(path))
    graphs, kernels = raw_launches(path)
    assert figures.graph_launches_per_step == pytest.approx(graphs)
    assert figures.kernel_launches_per_step == pytest.approx(kernels)


def test_a_head_that_launches_its_kernels_itself_fell_out_of_its_graphs() -> None:
    graphed = analyze(read_trace(ONE_GRAPH))
    eager = analyze(annotated_trace())  # every kernel its own cudaLaunchKernel, no graph
    assert graphed.graph_launches_per_step == 1 and eager.graph_launches_per_step == 0
    change = diff(graphed, eager).launches
    assert change is not None and change.fell_out_of_graphs is True
    assert change.kernel_launches_per_step.after == eager.kernel_launches_per_step
    # the other way round, and a head that splits its graph into more, did not
    assert diff(eager, graphed).launches.fell_out_of_graphs is False  # type: ignore[union-attr]
    piecewise = analyze(read_trace(PIECEWISE))
    assert diff(graphed, piecewise).launches.fell_out_of_graphs is False  # type: ignore[union-attr]


def test_the_title_says_decode_fell_out_of_its_graphs_even_when_it_passes() -> None:
    fell = diff(analyze(read_trace(ONE_GRAPH)), analyze(annotated_trace()))
    report = committed(EXAMPLE)
    batch = report.batch_sizes[0]
    passing = batch.model_copy(update={"verdict": "pass", "gpu_ms_verdict": "pass", "tok_per_s_verdict": "pass"})
    report = explained(report.model_copy(update={
        "verdict": "pass", "batch_sizes": [passing], "capture": None,
        "traces": [TraceSection(batch_size=1, profile_steps=8, arms=[], diff=fell)],
    }))
    assert report.explanation.headline.fell_out == [1]
    comment = render_comment(report)
    title = comment.splitlines()[1]
    launches = fell.launches
    assert launches is not None
    after, before = launches.kernel_launches_per_step.after, launches.kernel_launches_per_step.before
    assert (after, before) == (6, raw_launches(ONE_GRAPH)[1])  # 6 hand-made kernels; the fixture's own launches
    assert title.startswith("**No decode slowdown")
    assert title.endswith("; decode fell out of CUDA graphs at batch size 1**")
    assert (f"**Decode fell out of its CUDA graphs at batch size 1**: 0 of 1 graph launches per step left; "
            f"{after:.0f} kernel launches per step instead of {before:.0f}") in comment
    same = diff(analyze(read_trace(ONE_GRAPH)), analyze(read_trace(ONE_GRAPH)))
    kept = explained(report.model_copy(update={"traces": [TraceSection(batch_size=1, profile_steps=8, arms=[],
                                                                              diff=same)]}))
    assert "fell out" not in render_comment(kept)


def test_host_time_per_step_is_its_own_metric_with_an_interval() -> None:
    report = committed(EXAMPLE)
    batch = report.batch_sizes[0]
    base_host, head_host = [0.020, 0.021, 0.020], [1.9, 2.0, 2.1]
    arms = [a.model_copy(update={"host_ms_per_step": spread(v)})
            for a, v in zip(batch.arms, (base_host, head_host))]
    change = relative_change(base_host, head_host)
    report = report.model_copy(update={"batch_sizes": [batch.model_copy(update={
        "arms": arms, "host_ms_change": change})]})
    comment = render_comment(report)
    assert "| tokens per second | host ms per step |" in comment
    # at the level the batch size was decided at, as every interval of the comment, not the stored 95%
    level = 1 - 2 * batch.alpha_per_look
    assert level > 0.99
    shown = relative_change(base_host, head_host, level)
    assert shown.ci_low_pct < change.ci_low_pct and f"({change.interval()})" not in comment
    assert f"Host ms per step, head against base: {shown.pct:+.2f}% ({shown.interval()}) at batch size 1" in comment
    # each arm's geometric mean
    assert f"| {statistics.geometric_mean(base_host):.3f} |" in comment
    assert f"| {statistics.geometric_mean(head_host):.3f} |" in comment


def test_an_arm_whose_host_outran_its_hold_is_flagged() -> None:
    report = committed(EXAMPLE)
    batch = report.batch_sizes[0]
    steps = 100
    base, head = batch.arms[0], batch.arms[1]
    held = base.model_copy(update={"steps": steps, "unheld_steps": [0, 1, 0], "outran_hold": False})
    outran = head.model_copy(update={"steps": steps, "unheld_steps": [90, 96, 99], "outran_hold": True})
    assert outran.unheld_share == pytest.approx(285 / 300)
    one = report.model_copy(update={"batch_sizes": [batch.model_copy(update={"arms": [held, outran]})]})
    comment = render_comment(one)
    assert "base 0.3%, head 95% of the GPU-timed steps also timed the host's launch: the head arm was not" in comment
    base_outran = base.model_copy(update={"steps": steps, "unheld_steps": [50, 60, 70], "outran_hold": True})
    both = report.model_copy(update={"batch_sizes": [batch.model_copy(update={"arms": [base_outran, outran]})]})
    assert "also timed the host's launch, in both arms" in render_comment(both)
    neither = report.model_copy(update={"batch_sizes": [batch.model_copy(update={"arms": [held, held]})]})
    assert "also timed the host's launch" not in render_comment(neither)


def test_compare_decides_and_keeps_whether_an_arm_outran_its_hold() -> None:
    """Decided when compared, from the steps each process left unheld: more than 5% of them."""
    from guard.compare import compare
    from guard.measure import ArmMeasurement, BatchRun, RepeatResult

    def arm(name: str, unheld: list[int]) -> ArmMeasurement:
        runs = [RepeatResult(arm=name, repeat=i, environment={}, runs=[BatchRun(
            batch_size=1, steps=100, warmup_steps=0, timer="cuda_event", setup_s=0, wall_s=1, tok_per_s=100 + i,
            gpu_ms_per_step=1 + i / 100, step_ms=[1.0], tokens=[[1]], sha256="s", unheld_steps=u)])
            for i, u in enumerate(unheld)]
        return ArmMeasurement(arm=name, repeats=runs)

    found = compare({"base": arm("base", [5, 5, 5]), "head": arm("head", [5, 6, 5])}, "base", "head", [1], rule_at(1.0))
    base, head = found.batch_sizes[0].arms
    assert UNHELD_SHARE == 0.05
    assert (base.outran_hold, head.outran_hold) == (False, True)  # 15 of 300 is 5%; 16 is more


def test_a_report_written_before_the_decision_was_kept_gets_it_from_its_own_counts() -> None:
    """The H200 mode-default pair: base left 4, 5, 3 of 64 steps unheld (6.25%), head none."""
    path = REPO_ROOT / "docs" / "validation" / "h200-engines" / "pairs" / "compiled-mode-default" / "report.json"
    raw = json.loads(path.read_text())
    assert all("outran_hold" not in a for b in raw["batch_sizes"] for a in b["arms"])
    report = committed(path)  # schema 1, read as data
    base, head = report.batch_sizes[0].arms
    assert (base.unheld_steps, base.outran_hold, head.outran_hold) == ([4, 5, 3], True, False)
    assert "timed the host's launch: the base arm was not timed like the other" in render_comment(report)
