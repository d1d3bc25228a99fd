"""Steps, figures and diffs of profiler traces.

Small traces are built here with every figure worked out by hand; the two H200 fixtures
are checked against figures computed in this file by plain Python loops over their raw
JSON events, in exact decimal microseconds, independent of the code under test.
"""

from __future__ import annotations

import gzip
import json
import math
import statistics
import subprocess
import sys
from collections import Counter, defaultdict
from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest

from guard._errors import TraceError
from guard.trace import (
    KERNEL,
    MEMCPY,
    MEMSET,
    ApiTable,
    GpuTable,
    RangeTable,
    Trace,
    TraceFigures,
    TraceWarning,
    analyze,
    diff,
    figures_text,
    read_trace,
)

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures" / "traces"
STEP_GRAPH = FIXTURES / "h200-refengine-step-graph-bs1.json.gz"
LAYER_GRAPHS = FIXTURES / "h200-refengine-layer-graphs-bs1.json.gz"


# -- building small traces ---------------------------------------------------------------


def make_trace(
    gpu: list[tuple[int, int, int, int, int, str]],
    api: list[tuple[int, int, int, str]] = (),
    ranges: list[tuple[int, int, str]] = (),
) -> Trace:
    """gpu rows: (start_ns, end_ns, stream, correlation, kind, name); api rows:
    (start_ns, end_ns, correlation, name); ranges: (start_ns, end_ns, name)."""

    def ids(names: list[str]) -> tuple[np.ndarray, list[str]]:
        distinct = sorted(set(names))
        return np.array([distinct.index(n) for n in names], dtype=np.int32), distinct

    gpu = sorted(gpu, key=lambda row: row[0])
    api = sorted(api, key=lambda row: row[0])
    ranges = sorted(ranges, key=lambda row: row[0])
    col = lambda rows, i: np.array([row[i] for row in rows], dtype=np.int64)  # noqa: E731
    gpu_names = ids([row[5] for row in gpu])
    api_names = ids([row[3] for row in api])
    range_names = ids([row[2] for row in ranges])
    return Trace(
        gpu=GpuTable(
            start_ns=col(gpu, 0),
            end_ns=col(gpu, 1),
            stream=col(gpu, 2),
            device=np.zeros(len(gpu), dtype=np.int64),
            correlation=col(gpu, 3),
            kind=np.array([row[4] for row in gpu], dtype=np.int8),
            name_id=gpu_names[0],
            names=gpu_names[1],
        ),
        api=ApiTable(
            start_ns=col(api, 0),
            end_ns=col(api, 1),
            tid=np.ones(len(api), dtype=np.int64),
            correlation=col(api, 2),
            name_id=api_names[0],
            names=api_names[1],
        ),
        ranges=RangeTable(
            start_ns=col(ranges, 0),
            end_ns=col(ranges, 1),
            tid=np.ones(len(ranges), dtype=np.int64),
            name_id=range_names[0],
            names=range_names[1],
        ),
        source="hand-made",
        format="test",
    )


def launched(kernels: list[tuple[int, int, int, str]], first_host_ns: int, first_correlation: int
             ) -> tuple[list[tuple], list[tuple]]:
    """Kernels (start, end, stream, name), each launched by its own cudaLaunchKernel 1 ns
    long, 10 ns apart on the host from first_host_ns."""
    gpu, api = [], []
    for i, (start, end, stream, name) in enumerate(kernels):
        correlation = first_correlation + i
        gpu.append((start, end, stream, correlation, KERNEL, name))
        api.append((first_host_ns + 10 * i, first_host_ns + 10 * i + 1, correlation, "cudaLaunchKernel"))
    return gpu, api


# -- steps by annotation, and every figure by hand ----------------------------------------

# Stream ids are chosen so that the ranking (kernels per step) differs from id order.
S1, S2, S3 = 30, 10, 20
STEP0 = [  # host window 0-100
    (100, 200, S1, "a"),
    (150, 300, S2, "e"),  # overlaps stream S1 on the GPU: counts once in the union
    (250, 400, S1, "b"),  # gap 50 after a
    (320, 330, S2, "f"),  # gap 20 after e
    (380, 500, S1, "c"),  # starts before b ends: an overlap within S1, not a gap
    (600, 650, S1, "d"),  # gap 100: after the latest end of a, b, c (500), not after c's start
    (700, 720, S3, "g"),  # S3 has one kernel per step: no gaps
]
STEP1 = [  # host window 1000-1100, GPU times shifted by 10 000
    (10_100, 10_200, S1, "a"),
    (10_150, 10_300, S2, "e"),
    (10_260, 10_400, S1, "b"),  # gap 60
    (10_340, 10_350, S2, "f"),  # gap 40
    (10_500, 10_510, S3, "g"),
]


def annotated_trace() -> Trace:
    gpu0, api0 = launched(STEP0, first_host_ns=1, first_correlation=1)
    gpu1, api1 = launched(STEP1, first_host_ns=1001, first_correlation=101)
    gpu = gpu0 + gpu1 + [
        (520, 530, 99, 50, MEMCPY, "Memcpy DtoH"),  # launched inside step 0's window
        (5_000, 5_010, 99, 51, MEMSET, "Memset"),  # launched at host 500: in no step
        (560, 570, S3, -1, KERNEL, "x"),  # no correlation: no launching call, no step
    ]
    api = api0 + api1 + [
        (80, 90, 50, "cudaMemcpyAsync"),
        (500, 510, 51, "cudaMemsetAsync"),
        (2_000, 2_100, -1, "cudaDeviceSynchronize"),
    ]
    ranges = [
        (0, 100, "guard.step"),
        (1_000, 1_100, "guard.step"),
        (0, 5_000, "ProfilerStep#3"),  # would make one step: guard.step wins
    ]
    return make_trace(gpu, api, ranges)


def test_annotation_steps_and_step_figures() -> None:
    figures = analyze(annotated_trace())
    assert figures.steps == 2
    assert figures.steps_rule == "annotation"
    assert figures.launches_per_step is None
    assert figures.per_step.kernels == [7, 5]
    assert figures.kernels_per_step == 6.0
    assert figures.per_step.memcpys == [1, 0]
    assert figures.memcpys_per_step == 0.5
    assert figures.memsets_per_step == 0.0
    assert figures.dropped_activities == 2  # the memset outside every step, the unlinked kernel
    assert TraceWarning(kind="unlinked_activities", count=1) in figures.warnings  # the kernel of no call

    # The copy is step 0's GPU work too, not idle time. busy: sum of durations, the copy's 10
    # with them; union: merged [100,500] + [520,530] + [600,650] + [700,720]; span 100-720
    assert figures.per_step.busy_ms == pytest.approx([610e-6, 410e-6], rel=1e-12)
    assert figures.per_step.union_ms == pytest.approx([480e-6, 310e-6], rel=1e-12)
    assert figures.per_step.span_ms == pytest.approx([620e-6, 410e-6], rel=1e-12)
    assert figures.per_step.idle_ms == pytest.approx([140e-6, 100e-6], rel=1e-12)
    assert figures.busy_ms_per_step == pytest.approx(510e-6, rel=1e-12)
    assert figures.union_ms_per_step == pytest.approx(395e-6, rel=1e-12)
    assert figures.span_ms_per_step == pytest.approx(515e-6, rel=1e-12)
    assert figures.idle_ms_per_step == pytest.approx(120e-6, rel=1e-12)
    assert figures.p90.idle_ms_per_step == pytest.approx(136e-6, rel=1e-12)  # 100 + 0.9 * 40
    assert {k.name: k.kernels_per_step for k in figures.kernels}["Memcpy DtoH"] == 0.5

    assert figures.api_calls_per_step == {"cudaLaunchKernel": 6.0, "cudaMemcpyAsync": 0.5}


def test_annotation_stream_gaps_overlaps_and_ranking() -> None:
    figures = analyze(annotated_trace())
    s1, s2, s3, copies = figures.streams
    assert [s.stream for s in figures.streams] == [S1, S2, S3, 99]  # 3, 2, 1 kernels and 0.5 copies per step
    assert copies.kernels_per_step == 0.5 and copies.median_gap_us is None

    assert s1.kernels_per_step == 3.0
    # S1's gaps over both steps: 50, 100 (step 0), 60 (step 1); the overlap is apart
    assert s1.median_gap_us == pytest.approx(0.060, rel=1e-12)
    assert s1.p90_gap_us == pytest.approx(0.092, rel=1e-12)  # 60 + 0.8 * 40 ns
    assert s1.mean_gap_us == pytest.approx(0.070, rel=1e-12)
    assert s1.max_gap_us == pytest.approx(0.100, rel=1e-12)
    assert s1.overlaps_per_step == 0.5

    assert s2.kernels_per_step == 2.0
    assert s2.median_gap_us == pytest.approx(0.030, rel=1e-12)  # gaps 20, 40
    assert s2.p90_gap_us == pytest.approx(0.038, rel=1e-12)
    assert s2.mean_gap_us == pytest.approx(0.030, rel=1e-12)
    assert s2.overlaps_per_step == 0.0

    assert s3.kernels_per_step == 1.0
    assert (s3.median_gap_us, s3.p90_gap_us, s3.mean_gap_us, s3.max_gap_us) == (None, None, None, None)

    # All streams pooled: 50, 100, 20 | 60, 40
    gaps = figures.gaps
    assert gaps.gaps_per_step == 2.5
    assert gaps.median_gap_us == pytest.approx(0.050, rel=1e-12)
    assert gaps.p90_gap_us == pytest.approx(0.084, rel=1e-12)
    assert gaps.mean_gap_us == pytest.approx(0.054, rel=1e-12)
    assert gaps.max_gap_us == pytest.approx(0.100, rel=1e-12)
    assert figures.per_step.gap_ms == pytest.approx([170e-6, 100e-6], rel=1e-12)
    # The largest 1% of 3 and of 2 gaps is one gap each: 100 and 60
    assert figures.per_step.largest_1pct_gaps_ms == pytest.approx([100e-6, 60e-6], rel=1e-12)
    assert gaps.largest_1pct_gaps_ms_per_step == pytest.approx(80e-6, rel=1e-12)
    assert gaps.overlaps_per_step == 0.5


def test_sub_microsecond_gaps_are_not_rounded() -> None:
    gpu, api = launched([(0, 1_000, 7, "k"), (1_003, 2_000, 7, "k"), (2_190, 3_000, 7, "k")], 0, 1)
    figures = analyze(make_trace(gpu, api, [(0, 100, "guard.step")]))
    assert figures.streams[0].median_gap_us == pytest.approx(0.0965, rel=1e-12)  # (3 + 190) / 2 ns
    assert figures.streams[0].max_gap_us == pytest.approx(0.190, rel=1e-12)


def test_streams_with_equal_counts_rank_by_first_appearance() -> None:
    gpu, api = launched([(10, 20, 5, "k"), (0, 5, 9, "k"), (30, 40, 5, "k"), (25, 28, 9, "k")], 0, 1)
    figures = analyze(make_trace(gpu, api, [(0, 100, "ProfilerStep#7")]))
    assert [s.stream for s in figures.streams] == [9, 5]


def test_profiler_step_ranges_are_used_without_guard_step() -> None:
    gpu0, api0 = launched(STEP0, 1, 1)
    gpu1, api1 = launched(STEP1, 1001, 101)
    ranges = [(0, 100, "ProfilerStep#4"), (1_000, 1_100, "ProfilerStep#5"), (0, 5_000, "other")]
    figures = analyze(make_trace(gpu0 + gpu1, api0 + api1, ranges))
    assert figures.steps_rule == "annotation"
    assert figures.per_step.kernels == [7, 5]


def test_a_step_without_kernels_is_left_out() -> None:
    gpu0, api0 = launched(STEP0, 1, 1)
    gpu1, api1 = launched(STEP1, 1001, 101)
    ranges = [(0, 100, "guard.step"), (500, 600, "guard.step"), (1_000, 1_100, "guard.step")]
    trace = make_trace(gpu0 + gpu1, api0 + api1, ranges)
    figures = analyze(trace)
    assert figures.steps == 2
    assert figures.per_step.kernels == [7, 5]
    assert TraceWarning(kind="empty_steps", count=1, steps=3) in figures.warnings
    assert TraceWarning(kind="steps_ignored", steps=5, count=3) in analyze(trace, steps=5).warnings
    assert "1 of 3 steps hold no kernel" in figures_text(figures)  # the words, made for the terminal


# -- steps by graph launch ----------------------------------------------------------------


def graph_trace() -> Trace:
    """Four graph launches at host 0, 100, 200, 300 (10 ns each), two kernels each; an eager
    kernel launched at host 50, between the first two; a copy launched at host 400."""
    gpu, api = [], []
    for launch in range(4):
        correlation = launch + 1
        api.append((launch * 100, launch * 100 + 10, correlation, "cudaGraphLaunch"))
        base = 1_000 + launch * 1_000
        gpu.append((base, base + 100, 7, correlation, KERNEL, "g1"))
        gpu.append((base + 130, base + 200, 7, correlation, KERNEL, "g2"))
    api += [(50, 55, 10, "cudaLaunchKernel"), (400, 410, 11, "cudaMemcpyAsync"), (60, 61, -1, "cudaStreamIsCapturing")]
    gpu += [(1_500, 1_540, 8, 10, KERNEL, "eager"), (5_000, 5_010, 7, 11, MEMCPY, "Memcpy DtoH")]
    return make_trace(gpu, api)


def test_one_step_per_graph_launch() -> None:
    figures = analyze(graph_trace())
    assert figures.steps_rule == "graph_launch"
    assert figures.steps == 4
    assert figures.launches_per_step == 1
    assert figures.per_step.kernels == [2, 2, 2, 2]
    assert figures.dropped_activities == 2  # the eager kernel and the copy: outside every launch
    assert figures.api_calls_per_step == {"cudaGraphLaunch": 1.0}
    assert figures.streams[0].median_gap_us == pytest.approx(0.030, rel=1e-12)
    assert figures.per_step.span_ms == pytest.approx([200e-6] * 4, rel=1e-12)


def test_steps_group_consecutive_graph_launches() -> None:
    figures = analyze(graph_trace(), steps=2)
    assert figures.steps == 2
    assert figures.launches_per_step == 2
    # Step 0's window is host 0-110: it holds the eager kernel launched at 50
    assert figures.per_step.kernels == [5, 4]
    assert figures.kernels_per_step == 4.5
    assert figures.dropped_activities == 1
    assert figures.api_calls_per_step == {"cudaGraphLaunch": 2.0, "cudaLaunchKernel": 0.5, "cudaStreamIsCapturing": 0.5}
    # Step 0 runs on the GPU from 1000 to 2200: kernels of 100, 70, 40 (eager), 100 and 70 ns
    assert figures.per_step.span_ms == pytest.approx([1_200e-6, 1_200e-6], rel=1e-12)
    assert figures.per_step.union_ms == pytest.approx([380e-6, 340e-6], rel=1e-12)


def test_steps_that_do_not_divide_the_launches_is_an_error() -> None:
    with pytest.raises(TraceError, match="4 cudaGraphLaunch calls.*--steps 3"):
        analyze(graph_trace(), steps=3)


def test_uneven_graph_launch_steps_warn_to_pass_steps() -> None:
    gpu, api = [], []
    for launch, kernels in enumerate((1, 3)):
        api.append((launch * 100, launch * 100 + 10, launch + 1, "cudaGraphLaunch"))
        gpu += [(1_000 * (launch + 1) + 50 * k, 1_000 * (launch + 1) + 50 * k + 10, 7, launch + 1, KERNEL, "k")
                for k in range(kernels)]
    figures = analyze(make_trace(gpu, api))
    assert TraceWarning(kind="uneven_graph_steps", kernels_min=1, kernels_max=3) in figures.warnings
    assert "steps of 1 to 3 kernels: if a decode step launches several graphs, pass --steps N" in (
        figures_text(figures))


# -- steps by count -----------------------------------------------------------------------


def counted_trace() -> Trace:
    kernels = [(i * 100, i * 100 + 40, 7, "k") for i in range(6)]
    gpu, api = launched(kernels, first_host_ns=0, first_correlation=1)
    gpu.append((150, 160, 7, 99, MEMCPY, "Memcpy"))  # after step 0's GPU window, 0-140: in no step
    gpu.append((240, 250, 7, 98, MEMCPY, "Memcpy"))  # inside step 1's GPU window, 200-340
    api.append((25, 26, -1, "cudaStreamIsCapturing"))
    return make_trace(gpu, api)


def test_steps_by_count() -> None:
    figures = analyze(counted_trace(), steps=3)
    assert figures.steps_rule == "count"
    assert figures.per_step.kernels == [2, 2, 2]
    assert figures.per_step.memcpys == [0, 1, 0]
    assert figures.dropped_activities == 1
    assert figures.per_step.span_ms == pytest.approx([140e-6] * 3, rel=1e-12)
    assert figures.per_step.idle_ms == pytest.approx([60e-6, 50e-6, 60e-6], rel=1e-12)  # step 1's copy is work
    # Host windows run from the first to the last launching call: 0-11, 20-31, 40-51
    assert figures.api_calls_per_step == {"cudaLaunchKernel": 2.0, "cudaStreamIsCapturing": 1 / 3}


def test_steps_by_count_that_do_not_divide_warn() -> None:
    figures = analyze(counted_trace(), steps=4)
    assert figures.per_step.kernels == [2, 1, 2, 1]
    assert TraceWarning(kind="uneven_split", count=6, steps=4) in figures.warnings


def test_no_step_rule_applies_asks_for_steps() -> None:
    with pytest.raises(TraceError, match="pass --steps N"):
        analyze(counted_trace())
    with pytest.raises(TraceError, match="more than the 6 kernels"):
        analyze(counted_trace(), steps=7)
    with pytest.raises(TraceError, match="at least 1"):
        analyze(counted_trace(), steps=0)


# -- the H200 fixtures, against figures computed here from the raw events ------------------


def raw_events(path: Path) -> list[dict]:
    with gzip.open(path, "rt") as f:
        return json.load(f, parse_float=Decimal)["traceEvents"]


def to_ns(microseconds: Decimal | int) -> int:
    return int(Decimal(microseconds) * 1000)


def percentile(values: list[int], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default), written out."""
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def expected_fixture(path: Path, launches_per_step: int | None) -> dict:
    """Figures with steps found as the guard documents them. With `launches_per_step`: a
    graph's kernels carry its launch's correlation id, and every `launches_per_step`
    consecutive launches are one step, from the first launch's start to the last one's end.
    Without: a step is a `guard.step` host range, and holds what the calls that start
    inside it launched. A step's work is its kernels, copies and memsets; kernels are counted
    apart."""
    events = raw_events(path)
    calls = sorted((e for e in events if e.get("cat") == "cuda_runtime"), key=lambda e: e["ts"])
    if launches_per_step is None:
        ranges = sorted((e for e in events if e.get("cat") == "user_annotation" and e["name"] == "guard.step"),
                        key=lambda e: e["ts"])
        windows = [(to_ns(e["ts"]), to_ns(e["ts"]) + to_ns(e["dur"])) for e in ranges]
    else:
        launches = [e for e in calls if e["name"] == "cudaGraphLaunch"]
        windows = []
        for first in range(0, len(launches), launches_per_step):
            last = launches[first + launches_per_step - 1]
            windows.append((to_ns(launches[first]["ts"]), to_ns(last["ts"]) + to_ns(last["dur"])))
    step_of_correlation = {}
    for e in calls:
        for step, (lo, hi) in enumerate(windows):
            if lo <= to_ns(e["ts"]) <= hi:
                step_of_correlation[e["args"]["correlation"]] = step
    steps = len(windows)

    kernels_by_step = defaultdict(list)  # every activity of the step: kernels, copies, memsets
    kernel_count = Counter()
    memcpys = 0
    names_per_step = Counter()
    for e in events:
        step = step_of_correlation.get(e.get("args", {}).get("correlation"))
        if e.get("cat") not in ("kernel", "gpu_memcpy", "gpu_memset") or step is None:
            continue
        memcpys += e["cat"] == "gpu_memcpy"
        kernel_count[step] += e["cat"] == "kernel"
        start = to_ns(e["ts"])
        kernels_by_step[step].append((start, start + to_ns(e["dur"]), e["args"]["stream"]))
        names_per_step[e["name"]] += 1

    busy, union, span, gap_sums, tails = [], [], [], [], []
    stream_gaps = defaultdict(list)
    stream_kernels = Counter()
    stream_first = {}
    all_gaps = []
    for step in range(steps):
        kernels = sorted(kernels_by_step[step])
        busy.append(sum(end - start for start, end, _ in kernels))
        covered, reach = 0, None
        for start, end, _ in kernels:
            if reach is None or start > reach:
                covered += end - start
                reach = end
            elif end > reach:
                covered += end - reach
                reach = end
        union.append(covered)
        span.append(max(end for _, end, _ in kernels) - kernels[0][0])
        step_gaps = []
        latest_end = {}
        for start, end, stream in kernels:
            stream_kernels[stream] += 1
            stream_first.setdefault(stream, start)
            if stream in latest_end:
                gap = start - latest_end[stream]
                if gap >= 0:
                    stream_gaps[stream].append(gap)
                    step_gaps.append(gap)
            latest_end[stream] = max(latest_end.get(stream, end), end)
        all_gaps += step_gaps
        gap_sums.append(sum(step_gaps))
        tails.append(sum(sorted(step_gaps, reverse=True)[: math.ceil(len(step_gaps) / 100)]))

    api_calls = Counter(e["name"] for e in calls if e["args"]["correlation"] in step_of_correlation)

    ranked = sorted(stream_kernels, key=lambda s: (-stream_kernels[s], stream_first[s]))
    return {
        "steps": steps,
        "kernels_per_step": [kernel_count[s] for s in range(steps)],
        "memcpys_per_step": memcpys / steps,
        "busy_ms": [b / 1e6 for b in busy],
        "union_ms": [u / 1e6 for u in union],
        "span_ms": [s / 1e6 for s in span],
        "idle_ms": [(s - u) / 1e6 for s, u in zip(span, union)],
        "largest_1pct_gaps_ms": statistics.median(tails) / 1e6,
        "gap_ms": statistics.median(gap_sums) / 1e6,
        "streams": [
            {
                "stream": s,
                "kernels_per_step": stream_kernels[s] / steps,
                "median_gap_us": statistics.median(stream_gaps[s]) / 1000,
                "p90_gap_us": percentile(stream_gaps[s], 90) / 1000,
                "mean_gap_us": statistics.fmean(stream_gaps[s]) / 1000,
            }
            for s in ranked
        ],
        "median_gap_us": statistics.median(all_gaps) / 1000,
        "mean_gap_us": statistics.fmean(all_gaps) / 1000,
        "p90_gap_us": percentile(all_gaps, 90) / 1000,
        "max_gap_us": max(all_gaps) / 1000,
        "api_calls_per_step": {name: count / steps for name, count in api_calls.items()},
        "names_per_step": {name: count / steps for name, count in names_per_step.items()},
    }


@pytest.fixture(scope="module")
def step_graph() -> tuple[TraceFigures, dict]:
    return analyze(read_trace(STEP_GRAPH)), expected_fixture(STEP_GRAPH, launches_per_step=1)


@pytest.fixture(scope="module")
def layer_graphs() -> tuple[TraceFigures, dict]:
    return analyze(read_trace(LAYER_GRAPHS), steps=16), expected_fixture(LAYER_GRAPHS, launches_per_step=22)


def check_against_expected(figures: TraceFigures, expected: dict) -> None:
    assert figures.steps == expected["steps"]
    assert figures.per_step.kernels == expected["kernels_per_step"]
    assert figures.memcpys_per_step == expected["memcpys_per_step"]
    for series in ("busy_ms", "union_ms", "span_ms", "idle_ms"):
        assert getattr(figures.per_step, series) == pytest.approx(expected[series], rel=1e-9), series
        assert getattr(figures, f"{series}_per_step") == pytest.approx(statistics.median(expected[series]), rel=1e-9)
    assert [s.stream for s in figures.streams] == [s["stream"] for s in expected["streams"]]
    for got, want in zip(figures.streams, expected["streams"]):
        assert got.kernels_per_step == want["kernels_per_step"]
        for key in ("median_gap_us", "p90_gap_us", "mean_gap_us"):
            assert getattr(got, key) == pytest.approx(want[key], rel=1e-9), (got.stream, key)
    for key in ("median_gap_us", "mean_gap_us", "p90_gap_us", "max_gap_us"):
        assert getattr(figures.gaps, key) == pytest.approx(expected[key], rel=1e-9), key
    assert figures.gaps.gap_ms_per_step == pytest.approx(expected["gap_ms"], rel=1e-9)
    assert figures.gaps.largest_1pct_gaps_ms_per_step == pytest.approx(expected["largest_1pct_gaps_ms"], rel=1e-9)
    assert figures.api_calls_per_step == expected["api_calls_per_step"]
    assert {k.name: k.kernels_per_step for k in figures.kernels} == expected["names_per_step"]


def test_step_graph_fixture(step_graph: tuple[TraceFigures, dict]) -> None:
    figures, expected = step_graph
    check_against_expected(figures, expected)
    assert figures.steps == 16
    assert figures.steps_rule == "graph_launch"
    assert figures.kernels_per_step == 934
    assert figures.api_calls_per_step == {"cudaGraphLaunch": 1.0}
    assert len(figures.streams) == 21
    assert figures.dropped_activities == 16  # the token copy after each graph, launched after it


def test_layer_graphs_fixture_with_steps(layer_graphs: tuple[TraceFigures, dict]) -> None:
    figures, expected = layer_graphs
    check_against_expected(figures, expected)
    assert figures.steps == 16
    assert figures.launches_per_step == 22
    assert figures.kernels_per_step == 1073
    assert figures.api_calls_per_step["cudaGraphLaunch"] == 22.0


@pytest.mark.parametrize("name, launches", [("one-graph", 1), ("piecewise", 4)])
def test_harness_guard_step_fixtures(name: str, launches: int) -> None:
    """Traces written by the harness's own profile_batch on an H200: eight steps, each in a
    guard.step range. Piecewise: four graphs per step with an eager kernel after each."""
    path = FIXTURES / f"h200-harness-guard-step-{name}.json.gz"
    figures, expected = analyze(read_trace(path)), expected_fixture(path, launches_per_step=None)
    check_against_expected(figures, expected)
    assert figures.steps_rule == "annotation"
    assert figures.steps == 8
    assert figures.api_calls_per_step["cudaGraphLaunch"] == launches
    assert figures.dropped_activities == 0


def test_layer_graphs_fixture_without_steps_counts_every_launch() -> None:
    figures = analyze(read_trace(LAYER_GRAPHS))
    assert figures.steps == 352
    assert figures.kernels_per_step == pytest.approx(1073 / 22)
    assert "uneven_graph_steps" in [w.kind for w in figures.warnings]


# -- diff ---------------------------------------------------------------------------------


def steady_trace(gap_ns: int, side_stream: int, durations_ns: dict[str, int], steps: int = 4,
                 names: dict[str, str] | None = None, swap_first: tuple[str, int] | None = None,
                 split_gap_ns: int = 0) -> Trace:
    """Per step: 11 kernels on stream 3, `gap_ns` apart, and one on `side_stream` that runs
    beside the first, so that all idle time is in stream 3's gaps. `names` renames kernels;
    `swap_first` (name, duration) replaces each step's first kernel; `split_gap_ns` more
    after the sixth, as at the boundary of a step split into two graphs."""
    gpu, api, ranges = [], [], []
    correlation = 0
    for step in range(steps):
        host_ns = step * 1_000
        ranges.append((host_ns, host_ns + 500, "guard.step"))
        t = 100_000 * step
        for i in range(12):
            name = ("slow", "steady", "grain")[i % 3] if i < 11 else "side"
            stream = 3 if i < 11 else side_stream
            duration = durations_ns[name]
            correlation += 1
            start = t if i < 11 else 100_000 * step + 100
            shown = (names or {}).get(name, name)
            if swap_first is not None and i == 0:
                shown, duration = swap_first
            gpu.append((start, start + duration, stream, correlation, KERNEL, shown))
            api.append((host_ns + 10 * i, host_ns + 10 * i + 5, correlation, "cudaLaunchKernel"))
            t = start + duration + gap_ns + (split_gap_ns if i == 5 else 0)
    return make_trace(gpu, api, ranges)


BASE_DURATIONS = {"slow": 1_000, "steady": 1_000, "grain": 1_000, "side": 500}
HEAD_DURATIONS = {"slow": 1_200, "steady": 1_040, "grain": 1_000, "side": 500}


def test_diff_of_widened_gaps() -> None:
    base = analyze(steady_trace(200, side_stream=40, durations_ns=BASE_DURATIONS))
    head = analyze(steady_trace(500, side_stream=12, durations_ns=HEAD_DURATIONS))
    result = diff(base, head)
    assert result.kernel_counts_identical
    assert result.api_calls_identical
    assert result.api_calls_changed == {}
    assert result.kernels_per_step.before == result.kernels_per_step.after == 12
    assert result.gaps.median_gap_us.before == pytest.approx(0.2)
    assert result.gaps.median_gap_us.after == pytest.approx(0.5)
    # Streams pair by rank, not by id: 3 with 3, then 40 with 12
    assert [(s.base_stream, s.head_stream) for s in result.streams] == [(3, 3), (40, 12)]
    assert (result.base_streams, result.head_streams) == (2, 2)
    assert result.streams[0].median_gap_us.delta == pytest.approx(0.3)
    assert result.streams[1].median_gap_us.before is None  # one kernel per step
    # 'slow' grew 20% and 0.2 us; 'steady' only 4%
    assert [k.name for k in result.kernels_slower] == ["slow"]
    assert result.kernels_added == result.kernels_removed == []
    # 10 gaps of +0.3 us and 4 'slow' kernels of +0.2 us per step
    assert result.idle_ms_per_step.delta == pytest.approx(10 * 0.3e-3)
    assert result.busy_ms_per_step_from_durations == pytest.approx(4 * 0.2e-3 + 4 * 0.04e-3)
    assert result.busy_ms_per_step_from_counts == pytest.approx(0.0, abs=1e-15)
    # 0.3 us wider gaps, 12 kernels per step
    assert result.gap_ms_per_step_by_median == pytest.approx(0.3 * 12 / 1000)
    assert result.gap_ms_per_step_by_mean == pytest.approx(0.3 * 12 / 1000)
    assert (result.streams_gaps_same_way, result.streams_with_gaps) == (1, 1)  # the side stream has no gap


def test_a_kernel_swapped_for_a_slower_variant_of_itself_is_a_slower_kernel() -> None:
    # As on the H200 when one layer's KV cache grew: softmax_warp_forward<..., 10, ...> became
    # <..., 11, ...>, the same count per step, each one slower.
    variant = "void (anonymous namespace)::softmax_warp_forward<float, float, float, {}, false>(float*, int)"
    base = analyze(steady_trace(200, side_stream=40, durations_ns=BASE_DURATIONS,
                                names={"slow": variant.format(10)}))
    head = analyze(steady_trace(200, side_stream=40, durations_ns=HEAD_DURATIONS,
                                names={"slow": variant.format(11)}))
    result = diff(base, head)
    assert not result.kernel_counts_identical  # the names differ ...
    assert result.kernels_added == result.kernels_removed == []  # ... but nothing came or went
    [swapped] = result.kernels_replaced
    assert swapped.name == "softmax_warp_forward"
    assert swapped.kernels_per_step.before == swapped.kernels_per_step.after == 4
    assert swapped.mean_duration_us.before == pytest.approx(1.0)
    assert swapped.mean_duration_us.after == pytest.approx(1.2)
    assert [k.name for k in result.kernels_slower] == ["softmax_warp_forward"]
    assert result.busy_ms_per_step_from_counts == pytest.approx(0.0, abs=1e-15)
    assert result.busy_ms_per_step_from_durations == pytest.approx(4 * 0.2e-3 + 4 * 0.04e-3)

    # As on the H200, only some of a family's kernels move: 1 of 4 per step here
    head_partial = analyze(steady_trace(200, side_stream=40, durations_ns=BASE_DURATIONS,
                                        names={"slow": variant.format(10)}, swap_first=(variant.format(11), 2_000)))
    result = diff(base, head_partial)
    [swapped] = result.kernels_replaced
    assert swapped.kernels_per_step.after == 1
    assert swapped.mean_duration_us.before == pytest.approx(1.0)
    assert swapped.mean_duration_us.after == pytest.approx(2.0)
    assert result.kernels_added == result.kernels_removed == []
    assert result.busy_ms_per_step_from_counts == pytest.approx(0.0, abs=1e-15)
    assert result.busy_ms_per_step_from_durations == pytest.approx(1e-3)  # one kernel, 1 us longer

    # A new kernel of another family stays a kernel added, even with the count unchanged
    other = analyze(steady_trace(200, side_stream=40, durations_ns=HEAD_DURATIONS,
                                 names={"slow": "void attention_kernel<11>(float*)"}))
    result = diff(base, other)
    assert result.kernels_replaced == []
    assert [k.name for k in result.kernels_added] == ["void attention_kernel<11>(float*)"]
    assert result.busy_ms_per_step_from_counts == pytest.approx(4 * 0.2e-3)


def test_gap_arithmetic_when_only_one_gap_per_step_widens() -> None:
    base = analyze(steady_trace(200, side_stream=40, durations_ns=BASE_DURATIONS))
    head = analyze(steady_trace(200, side_stream=40, durations_ns=BASE_DURATIONS, split_gap_ns=6_000))
    result = diff(base, head)
    assert result.gaps.median_gap_us.delta == 0
    assert result.idle_ms_per_step.delta == pytest.approx(6e-3)
    # 10 gaps per step, one of them 6 us wider: the mean gap grows 0.6 us, times 12 kernels
    assert result.gap_ms_per_step_by_median == 0
    assert result.gap_ms_per_step_by_mean == pytest.approx(0.6 * 12 / 1000)


def test_diff_without_wider_gaps_states_no_arithmetic() -> None:
    base = analyze(steady_trace(500, side_stream=40, durations_ns=BASE_DURATIONS))
    head = analyze(steady_trace(200, side_stream=12, durations_ns=BASE_DURATIONS))
    result = diff(base, head)
    assert result.gap_ms_per_step_by_median is None and result.gap_ms_per_step_by_mean is None
    assert result.kernels_slower == result.kernels_faster == []


def test_diff_of_step_graph_and_layer_graphs(step_graph: tuple[TraceFigures, dict],
                                              layer_graphs: tuple[TraceFigures, dict]) -> None:
    (base, base_expected), (head, head_expected) = step_graph, layer_graphs
    result = diff(base, head)
    assert not result.kernel_counts_identical
    assert (result.kernels_per_step.before, result.kernels_per_step.after) == (934, 1073)
    assert not result.api_calls_identical
    launches = result.api_calls_changed["cudaGraphLaunch"]
    assert (launches.before, launches.after) == (1, 22)

    before, after = base_expected["names_per_step"], head_expected["names_per_step"]
    assert {k.name for k in result.kernels_added} == {n for n in after if after[n] > before.get(n, 0)}
    assert {k.name for k in result.kernels_removed} == {n for n in before if before[n] > after.get(n, 0)}
    assert result.busy_ms_per_step_from_counts + result.busy_ms_per_step_from_durations == pytest.approx(
        sum(k.busy_ms_per_step for k in head.kernels) - sum(k.busy_ms_per_step for k in base.kernels)
    )

    pairs = [(s.base_stream, s.head_stream) for s in result.streams]
    assert pairs == [(b["stream"], h["stream"]) for b, h in zip(base_expected["streams"], head_expected["streams"])]
    assert pairs[0] == (7, 7)

    # issue-775's sum, from the figures computed here: gap change times kernels per step
    by_median = (head_expected["median_gap_us"] - base_expected["median_gap_us"]) * 1073 / 1000
    by_mean = (head_expected["mean_gap_us"] - base_expected["mean_gap_us"]) * 1073 / 1000
    assert result.gap_ms_per_step_by_median == pytest.approx(by_median, rel=0.05)
    assert result.gap_ms_per_step_by_mean == pytest.approx(by_mean, rel=0.05)


# -- command line -------------------------------------------------------------------------


def guard(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "guard", *map(str, args)], cwd=REPO, capture_output=True, text=True, timeout=120
    )


def test_cli_analyze_json(step_graph: tuple[TraceFigures, dict]) -> None:
    _, expected = step_graph
    proc = guard("analyze", STEP_GRAPH, "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["steps"] == 16
    assert out["kernels_per_step"] == 934
    assert out["api_calls_per_step"] == {"cudaGraphLaunch": 1.0}
    for key in ("busy_ms_per_step", "union_ms_per_step", "span_ms_per_step", "idle_ms_per_step"):
        assert out[key] == pytest.approx(statistics.median(expected[key.replace("_per_step", "")]), rel=1e-9)
    streams = out["streams"]
    assert [s["stream"] for s in streams] == [s["stream"] for s in expected["streams"]]
    assert streams[0]["median_gap_us"] == pytest.approx(expected["streams"][0]["median_gap_us"], rel=1e-9)
    assert streams[0]["p90_gap_us"] == pytest.approx(expected["streams"][0]["p90_gap_us"], rel=1e-9)


def test_cli_analyze_table() -> None:
    proc = guard("analyze", LAYER_GRAPHS, "--steps", "16")
    assert proc.returncode == 0, proc.stderr
    assert "16 steps by rule 'graph_launch', 22 graph launches per step" in proc.stdout
    assert "kernels per step 1073" in proc.stdout


def test_cli_diff_json() -> None:
    proc = guard("diff", STEP_GRAPH, LAYER_GRAPHS, "--steps", "16", "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert (out["kernels_per_step"]["before"], out["kernels_per_step"]["after"]) == (934, 1073)
    assert out["api_calls_changed"]["cudaGraphLaunch"]["after"] == 22


def assert_one_line_error(proc: subprocess.CompletedProcess[str], *fragments: str) -> None:
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("guard: error: "), proc.stderr
    for fragment in fragments:
        assert fragment in lines[0]


def test_cli_empty_file_is_one_line_error(tmp_path: Path) -> None:
    empty = tmp_path / "empty.json"
    empty.write_bytes(b"")
    assert_one_line_error(guard("analyze", empty, "--json"), "empty")


def test_cli_steps_that_do_not_fit_are_one_line_error() -> None:
    assert_one_line_error(guard("analyze", LAYER_GRAPHS, "--steps", "15"), "--steps 15")


def test_cli_trace_without_step_markers_needs_steps(tmp_path: Path) -> None:
    events = []
    for i in range(4):
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                       "ts": 10.0 * i, "dur": 1.0, "args": {"correlation": i + 1}})
        events.append({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 100.0 + 10 * i,
                       "dur": 2.5, "args": {"device": 0, "stream": 7, "correlation": i + 1}})
    trace = tmp_path / "eager.json"
    trace.write_text(json.dumps({"traceEvents": events}))
    assert_one_line_error(guard("analyze", trace), "pass --steps N")
    proc = guard("analyze", trace, "--steps", "2", "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert (out["steps"], out["steps_rule"], out["kernels_per_step"]) == (2, "count", 2)
    assert out["streams"][0]["median_gap_us"] == pytest.approx(7.5)
