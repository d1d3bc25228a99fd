"""Trace readers against figures the tests compute on their own from the raw files.

Expected values come from the standard json module with every decimal kept as a Decimal,
so a timestamp like 1712195495519689.047 us is known to the nanosecond without floats.
"""

from __future__ import annotations

import gzip
import json
import shutil
import sqlite3
from collections import Counter
from decimal import Decimal
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from guard._errors import TraceError
from guard.trace import TraceWarning, _kineto, warning_text
from guard.trace._model import KERNEL, MEMCPY, MEMSET, Trace
from guard.trace._read import MAX_GPU_DURATION_NS, read_trace

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "traces"
PEER = Path(__file__).resolve().parents[2] / "shared" / "traces" / "peer"
H200_LAYER = FIXTURES / "h200-refengine-layer-graphs-bs1.json.gz"
H200_STEP = FIXTURES / "h200-refengine-step-graph-bs1.json.gz"
PEER_NS = PEER / "hta-ns-resolution-rank0.json.gz"
PEER_CONTROL = PEER / "hta-trace-diff-control.json.gz"
PEER_GRAPHS = PEER / "hta-trace-diff-test.json.gz"

needs_peer = pytest.mark.skipif(
    not PEER.is_dir(), reason=f"peer traces not present at {PEER} (a checkout without ../shared)"
)
# Recorded through the harness: each step in a `guard.step` record_function range
H200_GUARD_STEP = [FIXTURES / f"h200-harness-guard-step-{kind}.json.gz" for kind in ("one-graph", "piecewise")]

ALL_TRACES = [
    pytest.param(H200_LAYER, id="h200-layer-graphs"),
    pytest.param(H200_STEP, id="h200-step-graph"),
    *(
        pytest.param(path, id=path.name[:-8], marks=pytest.mark.skipif(not path.exists(), reason=f"{path} absent"))
        for path in H200_GUARD_STEP
    ),
    pytest.param(PEER_NS, id="peer-ns-resolution", marks=needs_peer),
    pytest.param(PEER_CONTROL, id="peer-trace-diff-control", marks=needs_peer),
    pytest.param(PEER_GRAPHS, id="peer-trace-diff-test", marks=needs_peer),
]

KIND_OF_CAT = {
    "kernel": KERNEL,
    "Kernel": KERNEL,
    "gpu_memcpy": MEMCPY,
    "Memcpy": MEMCPY,
    "gpu_memset": MEMSET,
    "Memset": MEMSET,
}
API_CATS = {"cuda_runtime", "Runtime", "cuda_driver", "Driver"}


def ns(us: Decimal | int) -> int:
    """Microseconds (as the json module gave them, exactly) -> integer nanoseconds."""
    value = Decimal(us) * 1000
    assert value == value.to_integral_value(), us
    return int(value)


# Keys the tests look at, at any depth: the rest is dropped while parsing to save memory
KEPT_KEYS = {"traceEvents", "ph", "cat", "name", "pid", "tid", "ts", "dur", "args", "stream", "device", "correlation"}


def raw_events(path: Path) -> list[dict]:
    """The file's complete ("X") events, with only the fields the tests look at."""
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    trace = json.loads(data, parse_float=Decimal, object_pairs_hook=lambda kv: {k: v for k, v in kv if k in KEPT_KEYS})
    return [e for e in trace["traceEvents"] if e.get("ph") == "X"]


@cache
def expected(path: Path) -> dict[str, Any]:
    """Rows each table must hold, and counts, computed from the raw events without the reader."""
    gpu, api, ranges = [], [], []
    events = raw_events(path)
    counts = {
        "cats": Counter(e.get("cat") for e in events),
        "step_marks": sum(1 for e in events if str(e.get("name")).startswith("ProfilerStep#")),
        "graph_launches": sum(1 for e in events if e.get("name") == "cudaGraphLaunch"),
    }
    for e in events:
        cat, args = e.get("cat"), e.get("args", {})
        start, end = ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])
        if cat in KIND_OF_CAT:
            stream, device = args.get("stream", e["tid"]), args.get("device", e["pid"])
            gpu.append((start, end, stream, device, args.get("correlation", -1), KIND_OF_CAT[cat], e["name"]))
        elif cat in API_CATS:
            api.append((start, end, e["tid"], args.get("correlation", -1), e["name"]))
        elif cat == "user_annotation" or (
            cat in ("cpu_op", "user_annotation") and e["name"].startswith("ProfilerStep#")
        ):
            ranges.append((start, end, e["tid"], e["name"]))
    return {"gpu": sorted(gpu), "api": sorted(api), "ranges": sorted(ranges)} | counts


@cache
def read(path: Path) -> Trace:
    return read_trace(path)


def rows(trace: Trace, table: str) -> list[tuple]:
    t = getattr(trace, table)
    names = [t.names[i] for i in t.name_id]
    if table == "gpu":
        cols = (t.start_ns, t.end_ns, t.stream, t.device, t.correlation, t.kind)
    elif table == "api":
        cols = (t.start_ns, t.end_ns, t.tid, t.correlation)
    else:
        cols = (t.start_ns, t.end_ns, t.tid)
    return sorted(zip(*(c.tolist() for c in cols), names))


# --- Kineto traces: every record, to the nanosecond ------------------------------------


@pytest.mark.parametrize("path", ALL_TRACES)
def test_counts_match_the_raw_file(path: Path) -> None:
    trace = read(path)
    cats = expected(path)["cats"]
    assert np.count_nonzero(trace.gpu.kind == KERNEL) == cats["kernel"] + cats["Kernel"] > 0
    assert np.count_nonzero(trace.gpu.kind == MEMCPY) == cats["gpu_memcpy"] + cats["Memcpy"]
    assert np.count_nonzero(trace.gpu.kind == MEMSET) == cats["gpu_memset"] + cats["Memset"]
    assert len(trace.api) == sum(cats[c] for c in API_CATS) > 0
    steps = expected(path)["step_marks"]
    assert sum(1 for i in trace.ranges.name_id if trace.ranges.names[i].startswith("ProfilerStep#")) == steps
    assert trace.format == "kineto" and trace.warnings == []


@pytest.mark.parametrize("path", ALL_TRACES)
def test_every_record_matches_to_the_nanosecond(path: Path) -> None:
    trace = read(path)
    want = expected(path)
    assert rows(trace, "gpu") == want["gpu"]
    assert rows(trace, "api") == want["api"]
    assert rows(trace, "ranges") == want["ranges"]


@pytest.mark.parametrize("path", ALL_TRACES)
def test_tables_are_sorted_int64_with_one_name_per_id(path: Path) -> None:
    trace = read(path)
    for table in (trace.gpu, trace.api, trace.ranges):
        assert table.start_ns.dtype == np.int64 and table.end_ns.dtype == np.int64
        assert np.all(np.diff(table.start_ns) >= 0)
        assert len(set(table.names)) == len(table.names)
        assert len(table) == 0 or table.name_id.max() < len(table.names)


def test_h200_trace_keeps_its_own_relative_clock() -> None:
    # First kernel in the raw text: "ts": 5080635016060.501, "dur": 3.393 (relative to baseTimeNanoseconds)
    trace = read(H200_LAYER)
    assert trace.gpu.start_ns[0] == 5_080_635_016_060_501
    assert trace.gpu.end_ns[0] - trace.gpu.start_ns[0] == 3_393
    assert trace.gpu.names[trace.gpu.name_id[0]].startswith(
        "void at::native::(anonymous namespace)::indexSelectSmallIndex"
    )


@pytest.mark.parametrize("path", H200_GUARD_STEP, ids=lambda p: p.name[:-8])
def test_record_function_ranges_are_read(path: Path) -> None:
    if not path.exists():
        pytest.skip(f"{path} absent")
    ranges = read(path).ranges
    assert [ranges.names[i] for i in ranges.name_id] == ["guard.step"] * 8
    assert np.all(ranges.end_ns > ranges.start_ns) and np.all(ranges.start_ns[1:] >= ranges.end_ns[:-1])


@needs_peer
def test_sub_microsecond_gap_on_absolute_timestamps_is_exact() -> None:
    """Kernel 135980 ends and kernel 136032 starts 736 ns later on the same stream; through
    float64 microseconds (1.7e15 us) the same gap comes out as 750 ns."""
    by_corr = {e["args"]["correlation"]: e for e in raw_events(PEER_NS) if e.get("cat") == "kernel"}
    first, second = by_corr[135980], by_corr[136032]
    assert (first["ts"], first["dur"], second["ts"]) == (
        Decimal("1712195495508487.739"),
        Decimal("2.528"),
        Decimal("1712195495508491.003"),
    )
    exact_gap_ns = ns(second["ts"]) - (ns(first["ts"]) + ns(first["dur"]))
    float_gap_ns = round((float(second["ts"]) - (float(first["ts"]) + float(first["dur"]))) * 1000)
    assert exact_gap_ns == 736 and float_gap_ns != exact_gap_ns

    gpu = read(PEER_NS).gpu
    (a,) = np.flatnonzero(gpu.correlation == 135980)
    (b,) = np.flatnonzero(gpu.correlation == 136032)
    assert gpu.stream[a] == gpu.stream[b]
    assert gpu.start_ns[a] == 1_712_195_495_508_487_739
    assert gpu.start_ns[b] - gpu.end_ns[a] == exact_gap_ns


@needs_peer
def test_cuda_graph_launches_are_api_calls_that_launch_kernels() -> None:
    trace = read(PEER_GRAPHS)
    launches = expected(PEER_GRAPHS)["graph_launches"]
    api_names = np.array(trace.api.names)[trace.api.name_id]
    assert launches > 0 and np.count_nonzero(api_names == "cudaGraphLaunch") == launches
    graph_corr = trace.api.correlation[api_names == "cudaGraphLaunch"]
    # A graph launch's correlation id is carried by every kernel of the graph it replays
    graph_kernels = np.isin(trace.gpu.correlation, graph_corr) & (trace.gpu.kind == KERNEL)
    assert np.count_nonzero(graph_kernels) > len(graph_corr)


def test_correlation_links_each_kernel_to_its_launching_call() -> None:
    trace = read(H200_LAYER)
    api_names = np.array(trace.api.names)[trace.api.name_id]
    launch_of = dict(zip(trace.api.correlation.tolist(), api_names.tolist()))
    kernels = trace.gpu.kind == KERNEL
    launched_by = Counter(launch_of.get(c, "(none)") for c in trace.gpu.correlation[kernels].tolist())
    # Every kernel of this trace runs inside a CUDA graph (22 launches per step, 16 steps)
    assert launched_by == {"cudaGraphLaunch": np.count_nonzero(kernels)}
    assert np.count_nonzero(api_names == "cudaGraphLaunch") == 22 * 16
    # and a launch starts before the kernels it launched
    start_of = dict(zip(trace.api.correlation.tolist(), trace.api.start_ns.tolist()))
    assert all(
        start_of[c] < s for c, s in zip(trace.gpu.correlation[kernels].tolist(), trace.gpu.start_ns[kernels].tolist())
    )


def test_reading_in_chunks_gives_the_same_tables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_kineto, "_CHUNK_BYTES", 4096)
    small_chunks = read_trace(H200_STEP)
    monkeypatch.setattr(_kineto, "_CHUNK_BYTES", 1 << 40)
    one_chunk = read_trace(H200_STEP)
    for table in ("gpu", "api", "ranges"):
        assert rows(small_chunks, table) == rows(one_chunk, table) == expected(H200_STEP)[table]


@pytest.mark.parametrize("max_wrong_cuts", [64, 1])
def test_event_gaps_inside_names_and_nested_lists_are_not_cut(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, max_wrong_cuts: int
) -> None:
    """`}, {"` in a list of objects looks like the gap between two events: a cut there must
    be noticed and the next gap taken. (`}, {` in a name must not be taken for a gap.)"""
    monkeypatch.setattr(_kineto, "_CHUNK_BYTES", 1)  # try to cut at every gap
    monkeypatch.setattr(_kineto, "_MAX_WRONG_CUTS", max_wrong_cuts)
    events = []
    for i in range(6):
        k = kernel(f"{100 + 10 * i}.125", "2.5", i)
        k["name"] = "void f<{lambda(int)#1}, {lambda(int)#2}>(int)"
        k["args"]["shapes"] = [{"dims": [1, 2]}, {"dims": [3]}]
        events += [
            k,
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaLaunchKernel",
                "pid": 1,
                "tid": 1,
                "ts": f"{99 + 10 * i}",
                "dur": "0.5",
                "args": {"correlation": i},
            },
        ]
    path = write_kineto(tmp_path / "trace.json", events)
    trace = read_trace(path)
    assert rows(trace, "gpu") == expected(path)["gpu"] and len(trace.gpu) == 6
    assert rows(trace, "api") == expected(path)["api"] and len(trace.api) == 6


def test_a_plain_file_is_read_through_its_map_with_the_same_tables(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The H200 fixture unzipped: the map, slice by slice with each slice's pages let go,
    gives the tables the whole-file read gives (and the raw file holds)."""
    plain = tmp_path / "trace.json"
    plain.write_bytes(gzip.decompress(H200_STEP.read_bytes()))
    monkeypatch.setattr(_kineto, "_CHUNK_BYTES", 64 << 10)  # many slices, many pages let go
    mapped = _kineto.read_kineto_mapped(plain, str(plain))
    assert mapped is not None
    whole = _kineto.read_kineto(plain.read_bytes(), str(plain))
    for table in ("gpu", "api", "ranges"):
        assert rows(mapped, table) == rows(whole, table)
    assert rows(read_trace(plain), "gpu") == expected(H200_STEP)["gpu"]


@pytest.mark.parametrize("tail", [
    ', "traceEvents": []}',  # a second key, which the whole-file decoder takes
    ', "more": [1, 2]}',  # a list after the events: the last `]` is not theirs
])
def test_a_file_whose_outline_does_not_hold_is_read_whole(tmp_path: Path, tail: str) -> None:
    events = [kernel("100.125", "2.5", 1)]
    path = write_kineto(tmp_path / "trace.json", events)
    path.write_text(path.read_text().rstrip().removesuffix("}") + tail)
    assert _kineto.read_kineto_mapped(path, str(path)) is None
    if '"traceEvents"' in tail:  # the last key wins, as in the whole-file read: no kernels
        with pytest.raises(TraceError, match="holds no GPU kernels"):
            read_trace(path)
    else:
        assert len(read_trace(path).gpu) == 1


# --- format detection by content ---------------------------------------------------------


def test_format_is_detected_by_content_not_name(tmp_path: Path) -> None:
    gz_as_sqlite = tmp_path / "trace.sqlite"
    shutil.copy(H200_STEP, gz_as_sqlite)
    plain_as_gz = tmp_path / "trace.json.gz"
    plain_as_gz.write_bytes(gzip.decompress(H200_STEP.read_bytes()))
    nsys_as_json = tmp_path / "trace.json"
    make_nsys(nsys_as_json)
    assert rows(read_trace(gz_as_sqlite), "gpu") == rows(read(H200_STEP), "gpu")
    assert rows(read_trace(plain_as_gz), "gpu") == rows(read(H200_STEP), "gpu")
    assert read_trace(nsys_as_json).format == "nsys-sqlite"


# --- Nsight Systems SQLite export ---------------------------------------------------------

PID, TID = 4242, 4250
GLOBAL_TID = (1 << 48) | (PID << 24) | TID  # how nsys serialises a thread


def make_nsys(path: Path, *, corrupt: bool = False, with_kernels: bool = True) -> None:
    """A small export with nsys's table and column names: two steps of two kernels."""
    con = sqlite3.connect(path)
    con.executescript(
        """
        CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL,
            deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, streamId INTEGER NOT NULL,
            correlationId INTEGER, globalPid INTEGER, demangledName INTEGER NOT NULL,
            shortName INTEGER NOT NULL, mangledName INTEGER, gridX INTEGER, blockX INTEGER);
        CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, end INTEGER NOT NULL,
            eventClass INTEGER NOT NULL, globalTid INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL,
            returnValue INTEGER NOT NULL, callchainId INTEGER);
        CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INTEGER NOT NULL, end INTEGER NOT NULL,
            deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, streamId INTEGER NOT NULL,
            correlationId INTEGER, globalPid INTEGER, bytes INTEGER NOT NULL, copyKind INTEGER NOT NULL);
        CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (start INTEGER NOT NULL, end INTEGER NOT NULL,
            deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, streamId INTEGER NOT NULL,
            correlationId INTEGER, globalPid INTEGER, value INTEGER NOT NULL, bytes INTEGER NOT NULL);
        CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL,
            rangeId INTEGER, category INTEGER, color INTEGER, text TEXT, globalTid INTEGER,
            endGlobalTid INTEGER, textId INTEGER, domainId INTEGER);
        """
    )
    strings = {
        1: "gemm_kernel(float*, int)",
        2: "gemm_kernel",
        3: "softmax_kernel",
        4: "softmax",
        5: "cudaLaunchKernel_v7000",
        6: "cudaMemcpyAsync_v3020",
        7: "decode_step",
    }
    con.executemany("INSERT INTO StringIds VALUES (?, ?)", strings.items())
    base = 1_700_000_000_123_456_789  # absolute ns: exact only as integers
    kernels = []
    for step in range(2):
        t = base + step * 100_000
        kernels += [
            (t + 5_000, t + 12_001, 0, 1, 7, 10 * step + 1, PID << 24, 1, 2, None, 1, 128),
            (t + 12_500, t + 13_250, 0, 1, 7, 10 * step + 2, PID << 24, 3, 4, None, 1, 128),
        ]
    if corrupt:
        kernels.append((base + 50_000, base + 40_000, 0, 1, 7, 99, PID << 24, 1, 2, None, 1, 1))  # end < start
        kernels.append((0, 0, 0, 1, 7, 98, PID << 24, 1, 2, None, 1, 1))  # not timed by CUPTI
    if with_kernels:
        con.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", kernels)
    calls = []
    for step in range(2):
        t = base + step * 100_000
        calls += [
            (t + 1_000, t + 3_000, 1, GLOBAL_TID, 10 * step + 1, 5, 0, None),
            (t + 3_500, t + 4_100, 1, GLOBAL_TID, 10 * step + 2, 5, 0, None),
            (t + 4_500, t + 20_000, 1, GLOBAL_TID, 10 * step + 3, 6, 0, None),
        ]
    con.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?,?,?,?,?,?,?,?)", calls)
    con.executemany(
        "INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES (?,?,?,?,?,?,?,?,?)",
        [
            (base + step * 100_000 + 14_000, base + step * 100_000 + 14_900, 0, 1, 7, 10 * step + 3, PID << 24, 8, 2)
            for step in range(2)
        ],
    )
    con.execute(
        "INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET VALUES (?,?,?,?,?,?,?,?,?)",
        (base + 4_000, base + 4_300, 0, 1, 7, 0, PID << 24, 0, 64),
    )
    con.executemany(
        "INSERT INTO NVTX_EVENTS VALUES (?,?,?,?,?,?,?,?,?,?,?)",
        [
            (base, base + 30_000, 59, None, None, None, "decode_step", GLOBAL_TID, None, None, 0),  # text inline
            (base + 100_000, base + 130_000, 59, None, None, None, None, GLOBAL_TID, None, 7, 0),  # text by id
            (base + 200_000, None, 34, None, None, None, "a mark, not a range", GLOBAL_TID, None, None, 0),
        ],
    )
    con.commit()
    con.close()


def test_nsys_sqlite_reader(tmp_path: Path) -> None:
    path = tmp_path / "report.sqlite"
    make_nsys(path)
    trace = read_trace(path)
    base = 1_700_000_000_123_456_789
    assert trace.format == "nsys-sqlite" and trace.warnings == []
    gpu = trace.gpu
    assert gpu.kind.tolist() == [MEMSET, KERNEL, KERNEL, MEMCPY, KERNEL, KERNEL, MEMCPY]
    assert gpu.start_ns.tolist() == [
        base + 4_000,
        base + 5_000,
        base + 12_500,
        base + 14_000,
        base + 105_000,
        base + 112_500,
        base + 114_000,
    ]
    assert (gpu.end_ns - gpu.start_ns).tolist() == [300, 7_001, 750, 900, 7_001, 750, 900]
    assert [gpu.names[i] for i in gpu.name_id] == [
        "Memset",
        "gemm_kernel(float*, int)",
        "softmax_kernel",
        "Memcpy DtoH",
        "gemm_kernel(float*, int)",
        "softmax_kernel",
        "Memcpy DtoH",
    ]
    assert set(gpu.stream.tolist()) == {7} and set(gpu.device.tolist()) == {0}
    api = trace.api
    assert [api.names[i] for i in api.name_id] == [
        "cudaLaunchKernel_v7000",
        "cudaLaunchKernel_v7000",
        "cudaMemcpyAsync_v3020",
    ] * 2
    assert set(api.tid.tolist()) == {TID}
    # correlation ids link each kernel and copy to the call that issued it
    call_of = dict(zip(api.correlation.tolist(), api.start_ns.tolist()))
    assert [call_of[c] - base for c in gpu.correlation[gpu.kind != MEMSET].tolist()] == [
        1_000,
        3_500,
        4_500,
        101_000,
        103_500,
        104_500,
    ]
    ranges = trace.ranges
    assert [ranges.names[i] for i in ranges.name_id] == ["decode_step", "decode_step"]
    assert ranges.start_ns.tolist() == [base, base + 100_000] and set(ranges.tid.tolist()) == {TID}


def test_nsys_corrupt_kernel_is_dropped_with_a_warning(tmp_path: Path) -> None:
    path = tmp_path / "report.sqlite"
    make_nsys(path, corrupt=True)
    trace = read_trace(path)
    assert np.count_nonzero(trace.gpu.kind == KERNEL) == 4
    assert not {98, 99} & set(trace.gpu.correlation.tolist())
    assert trace.warnings == [
        TraceWarning(kind="untimed_gpu_records", count=1),
        TraceWarning(kind="corrupt_records", count=1, table="gpu", why="end_before_start_or_too_long", limit_s=10),
    ]
    assert [warning_text(w) for w in trace.warnings] == [
        "1 GPU record without timestamps skipped (CUPTI could not time them)",
        "1 GPU record dropped as corrupt: end before start or longer than 10 s",
    ]


def test_nsys_without_kernels_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "report.sqlite"
    make_nsys(path, with_kernels=False)
    with pytest.raises(TraceError, match=r"report\.sqlite holds no GPU kernels.*ProfilerActivity\.CUDA"):
        read_trace(path)


def test_sqlite_that_is_not_an_nsys_export_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE notes (id INTEGER)")
    con.commit()
    con.close()
    with pytest.raises(TraceError, match=r"other\.db is an SQLite file without a CUPTI_ACTIVITY_KIND_KERNEL table"):
        read_trace(path)


# --- bad input -----------------------------------------------------------------------------


def kineto(events: list[dict]) -> bytes:
    return json.dumps({"schemaVersion": 1, "traceEvents": events}).encode()


def kernel(ts: str, dur: str, corr: int) -> dict:
    return {
        "ph": "X",
        "cat": "kernel",
        "name": "k",
        "pid": 0,
        "tid": 7,
        "ts": ts,
        "dur": dur,
        "args": {"device": 0, "stream": 7, "correlation": corr},
    }


def write_kineto(path: Path, events: list[dict]) -> Path:
    # ts and dur as written in a Kineto file: bare numbers, spelled exactly
    text = kineto(events).decode()
    for e in events:
        for key in ("ts", "dur"):
            if isinstance(e.get(key), str):
                text = text.replace(f'"{key}": "{e[key]}"', f'"{key}": {e[key]}', 1)
    path.write_text(text)
    return path


def test_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "trace.json"
    path.write_bytes(b"")
    with pytest.raises(TraceError, match=r"trace\.json is empty; .*record it again"):
        read_trace(path)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match=r"nope\.json does not exist"):
        read_trace(tmp_path / "nope.json")


def test_gzip_of_several_members(tmp_path: Path) -> None:
    """Concatenated gzip files are one valid gzip file; the trailer then holds only the last
    member's size, so the reader cannot size its buffer from it."""
    text = gzip.decompress(H200_STEP.read_bytes())
    path = tmp_path / "trace.json.gz"
    path.write_bytes(gzip.compress(text[: len(text) // 3]) + gzip.compress(text[len(text) // 3 :]))
    assert rows(read_trace(path), "gpu") == expected(H200_STEP)["gpu"]


def test_truncated_gzip(tmp_path: Path) -> None:
    path = tmp_path / "trace.json.gz"
    data = H200_STEP.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(
        TraceError, match=r"trace\.json\.gz is a truncated or corrupt gzip file.*export the trace again"
    ):
        read_trace(path)


def test_truncated_json(tmp_path: Path) -> None:
    path = tmp_path / "trace.json"
    data = gzip.decompress(H200_STEP.read_bytes())
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(TraceError, match=r"trace\.json is not valid JSON .*truncated"):
        read_trace(path)


@pytest.mark.parametrize("content", [b'{"schemaVersion": 1, "events": []}', b"[1, 2, 3]"])
def test_json_that_is_not_a_trace(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "data.json"
    path.write_bytes(content)
    with pytest.raises(TraceError, match=r"data\.json is JSON but not a profiler trace .*traceEvents"):
        read_trace(path)


def test_not_json_at_all(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("hello")
    with pytest.raises(TraceError, match=r"notes\.txt is not a trace: not JSON, gzip or SQLite"):
        read_trace(path)


def test_trace_without_gpu_kernels(tmp_path: Path) -> None:
    path = write_kineto(
        tmp_path / "cpu-only.json",
        [
            {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": "10.5", "dur": "3.25"},
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaMalloc",
                "pid": 1,
                "tid": 1,
                "ts": "11",
                "dur": "1",
                "args": {"correlation": 1},
            },
        ],
    )
    with pytest.raises(TraceError, match=r"cpu-only\.json holds no GPU kernels; record it with GPU activity on"):
        read_trace(path)


def test_corrupt_gpu_records_are_dropped_and_counted(tmp_path: Path) -> None:
    huge_us = str(MAX_GPU_DURATION_NS // 1000 + 1)
    path = write_kineto(
        tmp_path / "trace.json",
        [
            kernel("1712195495519689.047", "2.001", 1),
            kernel("1712195495519692.048", "-5", 2),  # end before start
            kernel("1712195495519693.000", huge_us, 3),  # a 10 s kernel: a missed completion
            kernel("1712195495519690.000", "0.5", 4),
        ],
    )
    trace = read_trace(path)
    assert trace.gpu.correlation.tolist() == [1, 4]
    assert trace.gpu.start_ns.tolist() == [1_712_195_495_519_689_047, 1_712_195_495_519_690_000]
    assert trace.gpu.end_ns.tolist() == [1_712_195_495_519_691_048, 1_712_195_495_519_690_500]
    assert [(w.kind, w.count, w.table) for w in trace.warnings] == [("corrupt_records", 2, "gpu")]
    assert [warning_text(w) for w in trace.warnings] == [
        "2 GPU records dropped as corrupt: end before start or longer than 10 s"]


def test_all_kernels_corrupt_says_so(tmp_path: Path) -> None:
    path = write_kineto(tmp_path / "trace.json", [kernel("100", "-1", 1)])
    with pytest.raises(TraceError, match=r"holds no GPU kernels \(1 GPU record was dropped as corrupt\)"):
        read_trace(path)


def test_odd_number_spellings_are_still_exact(tmp_path: Path) -> None:
    path = write_kineto(
        tmp_path / "trace.json",
        [
            kernel("1.5e3", "2E-3", 1),  # exponents: valid JSON, not Kineto's own spelling
            kernel("2000.0004", "0.0015", 2),  # finer than a ns: rounded half to even
        ],
    )
    gpu = read_trace(path).gpu
    assert gpu.start_ns.tolist() == [1_500_000, 2_000_000]
    assert (gpu.end_ns - gpu.start_ns).tolist() == [2, 2]


def test_event_with_an_unexpected_field_type_is_read_leniently(tmp_path: Path) -> None:
    odd = {
        "ph": "X",
        "cat": "cpu_op",
        "name": "x",
        "pid": 1,
        "tid": 1.5,
        "ts": "1",
        "dur": "1",
        "args": {"stream": "s"},
    }
    path = write_kineto(tmp_path / "trace.json", [odd, kernel("10", "1", 7)])
    gpu = read_trace(path).gpu
    assert gpu.correlation.tolist() == [7] and gpu.stream.tolist() == [7]


def test_non_numeric_timestamp_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"traceEvents": [kernel("x", "1", 1) | {"ts": "12"}]}))
    with pytest.raises(TraceError, match=r"trace\.json: a timestamp or duration is not a number"):
        read_trace(path)
