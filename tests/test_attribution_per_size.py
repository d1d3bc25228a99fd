"""Attribution holds per batch size (issue 36, item 6): a head that adds one small op per layer
at every batch size is said to add work at every size. At batch size 1 a tensor with a leading
dimension of 1 is contiguous, so PyTorch copies it with a device-to-device memcpy (inside a CUDA
graph, a memcpy node: no API call of its own); at batch size 2 the same line launches a copy
kernel. The step's copies are its GPU work as its kernels are, counted and timed in the same
step windows, so the copy's time is not idle time between kernels."""

from __future__ import annotations

import pytest

from guard.report import SCHEMA_VERSION, Report, render_comment
from guard.trace import KERNEL, MEMCPY, ArmTraces, Trace, TraceSection, analyze, diff
from tests.report_fixtures import committed, explained
from tests.test_comment_shape import H200_DEMO
from tests.test_trace_analysis import make_trace

LAYERS, STEPS = 4, 4
MM_NS, ACT_NS = 5_000, 1_000
DEBUG_NS = 300  # the debug op: small beside the gaps, so idle time dominates the change
GRAPH_GAP_NS, EAGER_GAP_NS = 1_000, 2_000  # between consecutive activities of a replay; of eager launches
COPY_KERNEL = "void at::native::elementwise_kernel<128, 2, at::native::direct_copy_kernel_cuda>(int)"
DTOD = "Memcpy DtoD (Device -> Device)"


def decode_trace(graph: bool, debug: bool) -> Trace:
    """STEPS steps, each in a guard.step range, of LAYERS layers: a matmul and an activation
    kernel, and with `debug` one more op after them. Replayed (`graph`): one cudaGraphLaunch per
    step whose correlation id every activity carries, and the debug op is a memcpy node, as at
    batch size 1. Eager: every kernel its own cudaLaunchKernel, the debug op a copy kernel, as
    at batch size 2."""
    gpu, api, ranges = [], [], []
    correlation = 0
    for step in range(STEPS):
        host_ns, gpu_ns = step * 100_000, step * 100_000 + 50_000
        ranges.append((host_ns, host_ns + 40_000, "guard.step"))
        if graph:
            correlation += 1
            api.append((host_ns + 10, host_ns + 20, correlation, "cudaGraphLaunch"))
        ops = [("mm", KERNEL, MM_NS), ("act", KERNEL, ACT_NS)]
        if debug:
            ops.append((DTOD, MEMCPY, DEBUG_NS) if graph else (COPY_KERNEL, KERNEL, DEBUG_NS))
        for _ in range(LAYERS):
            for name, kind, duration_ns in ops:
                if not graph:
                    correlation += 1
                    call_ns = host_ns + 100 + 50 * len(api)
                    api.append((call_ns, call_ns + 10, correlation, "cudaLaunchKernel"))
                gpu.append((gpu_ns, gpu_ns + duration_ns, 7, correlation, kind, name))
                gpu_ns += duration_ns + (GRAPH_GAP_NS if graph else EAGER_GAP_NS)
    return make_trace(gpu, api, ranges)


def test_a_copy_in_a_graph_replay_is_work_of_its_step_not_idle_time() -> None:
    base, head = analyze(decode_trace(graph=True, debug=False)), analyze(decode_trace(graph=True, debug=True))
    assert (base.kernels_per_step, head.kernels_per_step) == (2 * LAYERS, 2 * LAYERS)
    assert (base.memcpys_per_step, head.memcpys_per_step) == (0, LAYERS)
    change = diff(base, head)
    assert change.api_calls_identical  # one graph launch per step on both sides
    assert not change.kernel_counts_identical  # the copies are counted, by name, in the step's windows
    assert [k.name for k in change.kernels_added] == [DTOD]
    assert change.memcpys_per_step is not None and change.memcpys_per_step.delta == LAYERS
    # each step's copies are busy time; only the gap each adds is idle
    assert change.busy_ms_per_step.delta == pytest.approx(LAYERS * DEBUG_NS / 1e6, rel=1e-9)
    assert change.busy_ms_per_step_from_counts == pytest.approx(LAYERS * DEBUG_NS / 1e6, rel=1e-9)
    assert change.idle_ms_per_step.delta == pytest.approx(LAYERS * GRAPH_GAP_NS / 1e6, rel=1e-9)
    assert change.span_ms_per_step.delta == pytest.approx(LAYERS * (DEBUG_NS + GRAPH_GAP_NS) / 1e6, rel=1e-9)


def _with_traces(report: Report, graph_at: dict[int, bool]) -> Report:
    """`report` with each batch size's profiled pass one of decode_trace's, base without the
    debug op and head with it, replayed or eager as `graph_at` says."""
    sections = []
    for size, graph in graph_at.items():
        base, head = analyze(decode_trace(graph, debug=False)), analyze(decode_trace(graph, debug=True))
        sections.append(TraceSection(batch_size=size, profile_steps=STEPS, diff=diff(base, head), arms=[
            ArmTraces(arm=report.base, traces=[], figures=base), ArmTraces(arm=report.head, traces=[], figures=head)]))
    return explained(report.model_copy(update={"schema_version": SCHEMA_VERSION, "traces": sections}))


def test_work_added_at_every_batch_size_is_said_at_every_batch_size() -> None:
    demo = committed(H200_DEMO / "report.json")
    assert [(b.batch_size, b.verdict) for b in demo.batch_sizes] == [(1, "regression"), (2, "regression")]
    report = _with_traces(demo, {1: True, 2: False})
    causes = {c.batch_size: c for c in report.explanation.causes}
    # the gaps each op brings carry most of the extra time at both sizes, yet the ops are named
    assert causes[1].kind == causes[2].kind == "idle_between_kernels"
    assert not causes[1].only_idle
    assert causes[1].memcpys_per_step is not None and (causes[1].memcpys_per_step.before,
                                                       causes[1].memcpys_per_step.after) == (0, LAYERS)
    assert causes[1].kernels_per_step is None  # its kernels are the same
    assert causes[2].kernels_per_step is not None and (causes[2].kernels_per_step.before,
                                                       causes[2].kernels_per_step.after) == (2 * LAYERS, 3 * LAYERS)
    comment = render_comment(report)
    split = {size: causes[size].split for size in (1, 2)}
    assert split[1] is not None and split[2] is not None
    assert (f"At batch size 1, most of the extra time is idle time between kernels (profiled: "
            f"{split[1].idle_share:.0%} idle between kernels, {split[1].counts_share:.0%} work added (0 -> 4 copies), "
            "0% longer kernels).") in comment
    assert (f"At batch size 2, most of the extra time is idle time between kernels (profiled: "
            f"{split[2].idle_share:.0%} idle between kernels, {split[2].counts_share:.0%} kernels added (8 -> 12), "
            "0% longer kernels).") in comment
    assert "- Kernels per step: 8 in both; copies per step: 0 -> 4; API calls are identical." in comment
    assert "Kernel counts and API calls are identical" not in comment
    # the replayed graph's nodes changed: what was captured changed
    assert report.explanation.capture_unchanged is False


def test_a_report_of_schema_8_is_held_to_what_its_stage_said() -> None:
    """Before schema 10 a cause counted kernels for kernels_added alone: a schema 8 report read
    back is explained so, and holds up."""
    report = _with_traces(committed(H200_DEMO / "report.json"), {1: True, 2: False})
    older = explained(report.model_copy(update={"schema_version": 8}))
    assert all(c.kernels_per_step is None and c.memcpys_per_step is None for c in older.explanation.causes)
    assert render_comment(older).split("### Cause")[0].count("kernels added or removed") == 2
