"""Traces of several ranks: communication apart from compute, overlap, the wait for the slowest
rank, and the diff of two arms' ranks with its findings.

The synthetic traces are Kineto files (gzipped, as torch.profiler writes them) built here from
kernels whose times are chosen so that every figure is known by construction; each rank has its
own clock, as processes do, so a figure that compared timestamps across ranks would be wrong.
The last test runs two real gloo ranks on the CPU under torch.profiler.
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from guard._errors import TraceError
from guard.report._rank_trace_text import rank_bullets, rank_table
from guard.trace import (
    CommunicationNotOverlapped,
    RankHeldBack,
    RankTraces,
    analyze_ranks,
    diff_ranks,
    is_communication_host_op,
    is_communication_kernel,
    read_trace,
)
from tests.test_trace_readers import kernel, write_kineto

STEPS = 4
PERIOD_NS = 1_000_000  # a step every ms on the host
GPU_LAG_NS = 200_000  # a step's kernels start 0.2 ms after its range opens
# Two processes' clocks: far apart, and neither a round number
CLOCK_NS = {0: 5_316_062_452_130_448, 1: 1_790_857_026_500_123}

GEMM = "nvjet_tst_192x192_64x3_1x2_h_bz_coopB_NNN"
ADD = ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, "
       "std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul>)")
ALL_REDUCE = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
COMPUTE_STREAM, COMM_STREAM = 7, 20

# Each step's kernels: (name, start us, duration us, stream), from the step's first kernel.
# The all-reduce runs on its own stream inside the GEMM: all 60 us of it overlapped.
OVERLAPPED = [(GEMM, 0, 100, COMPUTE_STREAM), (ALL_REDUCE, 20, 60, COMM_STREAM), (ADD, 105, 35, COMPUTE_STREAM)]
# The same kernels, the all-reduce after the compute: 60 us exposed
SERIAL = [(GEMM, 0, 100, COMPUTE_STREAM), (ADD, 105, 35, COMPUTE_STREAM), (ALL_REDUCE, 140, 60, COMM_STREAM)]
# Rank 1's GEMM 50 us longer: rank 0's all-reduce waits those 50 us for it
HELD_RANK0 = [(GEMM, 0, 100, COMPUTE_STREAM), (ADD, 105, 35, COMPUTE_STREAM), (ALL_REDUCE, 140, 110, COMM_STREAM)]
HELD_RANK1 = [(GEMM, 0, 150, COMPUTE_STREAM), (ADD, 155, 35, COMPUTE_STREAM), (ALL_REDUCE, 190, 60, COMM_STREAM)]


def us_text(ns: int) -> str:
    """Nanoseconds as Kineto's decimal microseconds, exactly."""
    return f"{ns // 1000}.{ns % 1000:03d}"


def rank_trace(path: Path, kernels: list[tuple[str, int, int, int]], clock_ns: int, steps: int = STEPS) -> Path:
    """A rank's Kineto trace, gzipped: `steps` ProfilerStep#N ranges, each holding one
    cudaLaunchKernel per kernel and the kernels they launch."""
    events: list[dict] = []
    correlation = 1
    for s in range(steps):
        step_ns = clock_ns + s * PERIOD_NS
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{s + 1}", "pid": 11, "tid": 11,
                       "ts": us_text(step_ns), "dur": us_text(PERIOD_NS - 10_000)})
        for i, (name, start_us, duration_us, stream) in enumerate(kernels):
            events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 11, "tid": 11,
                           "ts": us_text(step_ns + 1_000 * (i + 1)), "dur": "0.500",
                           "args": {"correlation": correlation}})
            gpu = kernel(us_text(step_ns + GPU_LAG_NS + 1_000 * start_us), us_text(1_000 * duration_us), correlation)
            events.append(gpu | {"name": name, "tid": stream,
                                 "args": {"device": 0, "stream": stream, "correlation": correlation}})
            correlation += 1
    plain = write_kineto(path.with_suffix(""), events)
    path.write_bytes(gzip.compress(plain.read_bytes()))
    plain.unlink()
    return path


def pass_of(tmp_path: Path, name: str, by_rank: dict[int, list], steps: int = STEPS, shift_ns: int = 0
            ) -> RankTraces:
    traces = {rank: rank_trace(tmp_path / f"{name}-rank{rank}.trace.json.gz", kernels, CLOCK_NS[rank] + shift_ns,
                               steps)
              for rank, kernels in by_rank.items()}
    return analyze_ranks(traces, STEPS)


# -- the classifier, on names from real traces ---------------------------------------------

# As profiler and Nsight tables of vLLM, SGLang and DeepEP runs print them
COMMUNICATION_KERNELS = [
    "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
    "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)",
    "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)",
    "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)",
    "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
    "void vllm::cross_device_reduce_1stage<__nv_bfloat16, 2>(vllm::RankData*, vllm::RankSignals, vllm::Signal*, "
    "__nv_bfloat16*, int, int)",
    "void deep_ep::intranode::notify_dispatch<8>(int const*, int*, int const*, int*, int, int, int, bool const*, "
    "int*, int*, int, int, void**, int**, int)",
    "void deep_ep::intranode::cached_notify_combine<8>(void**, int*, int, int, int, int**, int)",
    # PyTorch's symmetric-memory all-reduce, as its source declares it (in an anonymous namespace)
    "void (anonymous namespace)::one_shot_all_reduce_kernel<c10::BFloat16, 16, 2>(c10::BFloat16**, c10::BFloat16*, "
    "c10::BFloat16*, unsigned long, unsigned long, unsigned int**, unsigned long, unsigned long)",
]
COMPUTE_KERNELS = [
    "nvjet_tst_192x192_64x3_1x2_h_bz_coopB_NNN",
    "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4>"
    "(cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4::Params)",
    "triton_red_fused__to_copy_add_copy__fused_add_rms_norm_moe_forward_shared_3",
    "fused_moe_kernel",
    "void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)"
    "::{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::{lambda(c10::BFloat16)#1}>",
    "std::enable_if<!(false), void>::type internal::gemvx::kernel<int, int, __nv_bfloat16, __nv_bfloat16>",
    "void at::native::(anonymous namespace)::CatArrayBatchedCopy<at::native::(anonymous namespace)::OpaqueType<2u>>",
    "flash_fwd_kernel",
]


@pytest.mark.parametrize("name", COMMUNICATION_KERNELS)
def test_collective_kernels_are_communication(name: str) -> None:
    assert is_communication_kernel(name)


@pytest.mark.parametrize("name", COMPUTE_KERNELS)
def test_other_kernels_are_compute(name: str) -> None:
    assert not is_communication_kernel(name)


def test_host_ops_of_a_collective_are_communication() -> None:
    for name in ("gloo:all_reduce", "gloo:all_to_all", "c10d::allreduce_", "c10d::alltoall_",
                 "_c10d_functional::all_reduce", "_c10d_functional::wait_tensor", "record_param_comms",
                 "nccl:all_reduce"):
        assert is_communication_host_op(name), name
    for name in ("aten::mm", "aten::matmul", "ProfilerStep#3", "guard.step", "aten::copy_", "cudaLaunchKernel"):
        assert not is_communication_host_op(name), name


# -- one pass: overlap, exposed communication, gaps -----------------------------------------


def test_overlapped_communication_per_rank_and_step(tmp_path: Path) -> None:
    ranks = pass_of(tmp_path, "overlapped", {0: OVERLAPPED, 1: OVERLAPPED})
    assert ranks.steps == STEPS and [r.rank for r in ranks.ranks] == [0, 1]
    for r in ranks.ranks:
        assert r.activities == "gpu_kernels" and r.steps_rule == "annotation"
        assert r.communication_per_step == {ALL_REDUCE: 1.0}
        assert r.activities_per_step == 3.0
        # compute: [0,100) and [105,140); the all-reduce [20,80) lies inside the GEMM
        assert r.per_step.compute_ms == pytest.approx([0.135] * STEPS, rel=1e-12)
        assert r.per_step.communication_ms == pytest.approx([0.060] * STEPS, rel=1e-12)
        assert r.per_step.overlap_ms == pytest.approx([0.060] * STEPS, rel=1e-12)
        assert r.per_step.exposed_communication_ms == [0.0] * STEPS
        assert r.overlap_share == pytest.approx(1.0)
        assert r.span_ms_per_step == pytest.approx(0.140, rel=1e-12)
        assert r.idle_ms_per_step == pytest.approx(0.005, rel=1e-12)  # between the GEMM and the add
        assert r.gap_ms_per_step == pytest.approx(0.005, rel=1e-12)
        assert r.median_gap_us == pytest.approx(5.0, rel=1e-12)
        assert r.per_step.wait_ms == [0.0] * STEPS
    assert ranks.step_ms == pytest.approx([0.140] * STEPS, rel=1e-12)
    assert ranks.straggler == [None] * STEPS
    assert ranks.overlap_share == pytest.approx(1.0)
    assert ranks.exposed_communication_ms_per_step == 0.0
    assert ranks.warnings == []


def test_serial_communication_is_exposed(tmp_path: Path) -> None:
    ranks = pass_of(tmp_path, "serial", {0: SERIAL, 1: SERIAL})
    for r in ranks.ranks:
        assert r.per_step.overlap_ms == [0.0] * STEPS
        assert r.exposed_communication_ms_per_step == pytest.approx(0.060, rel=1e-12)
        assert r.overlap_share == 0.0
        assert r.span_ms_per_step == pytest.approx(0.200, rel=1e-12)
    assert ranks.exposed_communication_ms == pytest.approx([0.060] * STEPS, rel=1e-12)
    assert ranks.communication_ms_per_step == pytest.approx(0.060, rel=1e-12)


def test_the_wait_for_a_slower_rank_and_the_straggler(tmp_path: Path) -> None:
    ranks = pass_of(tmp_path, "held", {0: HELD_RANK0, 1: HELD_RANK1})
    r0, r1 = ranks.ranks
    assert r0.per_step.wait_ms == pytest.approx([0.050] * STEPS, rel=1e-12)  # 110 - 60 us in its all-reduce
    assert r1.per_step.wait_ms == [0.0] * STEPS
    assert ranks.straggler == [1] * STEPS
    assert (r0.straggler_steps, r1.straggler_steps) == (0, STEPS)
    assert ranks.wait_ms == pytest.approx([0.050] * STEPS, rel=1e-12)
    assert r1.compute_ms_per_step == pytest.approx(0.185, rel=1e-12)
    assert r0.compute_ms_per_step == pytest.approx(0.135, rel=1e-12)
    # rank 0 exposes 110 us, 50 of them waiting: beyond the wait both expose the same 60 us
    assert r0.exposed_communication_ms_per_step == pytest.approx(0.110, rel=1e-12)
    assert ranks.exposed_communication_ms_per_step == pytest.approx(0.060, rel=1e-12)
    assert ranks.step_ms_per_step == pytest.approx(0.250, rel=1e-12)


def test_figures_do_not_depend_on_the_processes_clocks(tmp_path: Path) -> None:
    here = pass_of(tmp_path, "a", {0: HELD_RANK0, 1: HELD_RANK1})
    elsewhere = analyze_ranks({
        0: rank_trace(tmp_path / "b-rank0.trace.json.gz", HELD_RANK0, 10**15 + 123_457),
        1: rank_trace(tmp_path / "b-rank1.trace.json.gz", HELD_RANK1, 987_654_321),
    }, STEPS)
    strip = {"ranks": {"__all__": {"source"}}}
    assert here.model_dump(exclude=strip) == elsewhere.model_dump(exclude=strip)


def test_ranks_with_other_step_counts_are_aligned_on_the_first_steps(tmp_path: Path) -> None:
    ranks = analyze_ranks({
        0: rank_trace(tmp_path / "r0.trace.json.gz", SERIAL, CLOCK_NS[0], steps=STEPS),
        1: rank_trace(tmp_path / "r1.trace.json.gz", SERIAL, CLOCK_NS[1], steps=STEPS - 1),
    }, STEPS)
    assert ranks.steps == STEPS - 1
    assert len(ranks.ranks[0].per_step.span_ms) == STEPS - 1
    assert [w.kind for w in ranks.warnings] == ["step_counts_differ"]
    assert ranks.warnings[0].steps_by_rank == {0: STEPS, 1: STEPS - 1}


def test_a_rank_without_communication_is_named(tmp_path: Path) -> None:
    compute_only = [k for k in SERIAL if k[0] != ALL_REDUCE]
    ranks = pass_of(tmp_path, "nocomm", {0: SERIAL, 1: compute_only})
    assert [(w.kind, w.rank) for w in ranks.warnings] == [("no_communication", 1)]
    assert ranks.ranks[1].overlap_share is None
    assert ranks.ranks[0].per_step.wait_ms == [0.0] * STEPS  # not its whole all-reduce: rank 1 joined none
    assert ranks.straggler == [None] * STEPS


def test_no_traces_is_a_clear_error() -> None:
    with pytest.raises(TraceError, match="no rank traces to analyse"):
        analyze_ranks({}, STEPS)


# -- a CPU-only trace: host ops ---------------------------------------------------------------


def cpu_trace(path: Path, with_steps: bool = True) -> Path:
    """One step of a gloo rank as torch.profiler records it: the main thread's ops (aten::mm
    inside aten::matmul), the c10d call that starts the all-reduce, and gloo's own thread doing it."""
    def op(cat: str, name: str, tid: int, start_us: int, dur_us: int) -> dict:
        return {"ph": "X", "cat": cat, "name": name, "pid": 5, "tid": tid, "ts": us_text(CLOCK_NS[0] + start_us * 1000),
                "dur": us_text(dur_us * 1000)}
    events = [
        op("cpu_op", "aten::matmul", 5, 10, 100),
        op("cpu_op", "aten::mm", 5, 12, 96),  # part of aten::matmul
        op("cpu_op", "c10d::allreduce_", 5, 120, 10),
        op("user_annotation", "gloo:all_reduce", 9, 125, 175),  # gloo's thread: [125, 300)
        op("cpu_op", "aten::add", 5, 400, 20),  # after the step
    ]
    if with_steps:
        events.append(op("user_annotation", "ProfilerStep#1", 5, 0, 350))
    return write_kineto(path, events)


def test_a_cpu_only_trace_is_read_as_host_work(tmp_path: Path) -> None:
    path = cpu_trace(tmp_path / "cpu.json")
    with pytest.raises(TraceError, match="holds no GPU kernels"):
        read_trace(path)  # as before: a GPU analysis needs kernels
    trace = read_trace(path, host_ops=True)
    assert trace.host_ops is not None and sorted(trace.host_ops.names) == [
        "aten::add", "aten::matmul", "aten::mm", "c10d::allreduce_"]

    (r,) = analyze_ranks({0: path}, 1).ranks
    assert r.activities == "host_ops"
    assert r.activities_per_step == 3.0  # matmul, allreduce_, gloo:all_reduce; aten::mm is inside matmul
    assert r.communication_per_step == {"c10d::allreduce_": 1.0, "gloo:all_reduce": 1.0}
    assert r.compute_ms_per_step == pytest.approx(0.100, rel=1e-12)
    assert r.communication_ms_per_step == pytest.approx(0.180, rel=1e-12)  # [120, 300)
    assert r.overlap_share == 0.0
    assert r.span_ms_per_step == pytest.approx(0.290, rel=1e-12)  # [10, 300)
    assert r.idle_ms_per_step == pytest.approx(0.010, rel=1e-12)  # [110, 120)


def test_a_cpu_only_trace_without_step_ranges_says_what_to_record(tmp_path: Path) -> None:
    path = cpu_trace(tmp_path / "cpu.json", with_steps=False)
    with pytest.raises(TraceError, match=r"cpu\.json.*ProfilerStep#N.*prof\.step\(\)"):
        analyze_ranks({0: path}, 1)


# -- diffs of two arms, over repeats ------------------------------------------------------------


def test_communication_that_no_longer_overlaps(tmp_path: Path) -> None:
    base = [pass_of(tmp_path, f"base{i}", {0: OVERLAPPED, 1: OVERLAPPED}, shift_ns=i * 7_919) for i in range(2)]
    head = [pass_of(tmp_path, f"head{i}", {0: SERIAL, 1: SERIAL}, shift_ns=i * 7_919) for i in range(2)]
    change = diff_ranks(base, head)
    assert change.overlap_share.before == pytest.approx(1.0) and change.overlap_share.after == 0.0
    assert change.exposed_communication_ms_per_step.before == 0.0
    assert change.exposed_communication_ms_per_step.after == pytest.approx(0.060, rel=1e-12)
    assert change.step_ms_per_step.before == pytest.approx(0.140, rel=1e-12)
    assert change.step_ms_per_step.after == pytest.approx(0.200, rel=1e-12)
    (finding,) = change.findings
    assert isinstance(finding, CommunicationNotOverlapped)
    assert finding.share_of_step == pytest.approx(0.060 / 0.140, rel=1e-9)
    assert finding.overlapped_communication_ms_per_step.before == pytest.approx(0.060, rel=1e-12)
    assert finding.overlapped_communication_ms_per_step.after == 0.0
    assert not change.ranks_differ and rank_table(change) is None

    bullets = rank_bullets(change)
    assert "Communication overlapped with compute: 100% -> 0% of its time" in bullets[0]
    assert any(line.startswith("Communication no longer overlapped: exposed communication grew by 0.060 ms per "
                               "step, 43% of the base's step") for line in bullets)


def test_one_rank_holds_back_the_other(tmp_path: Path) -> None:
    base = [pass_of(tmp_path, "base", {0: SERIAL, 1: SERIAL})]
    head = [pass_of(tmp_path, "head", {0: HELD_RANK0, 1: HELD_RANK1})]
    change = diff_ranks(base, head)
    assert change.head.straggler == 1 and change.base.straggler is None
    (finding,) = change.findings  # the exposed communication beyond the wait is unchanged: no lost overlap
    assert isinstance(finding, RankHeldBack)
    assert finding.rank == 1 and finding.straggler_share == 1.0
    assert finding.wait_ms_per_step.before == 0.0
    assert finding.wait_ms_per_step.after == pytest.approx(0.050, rel=1e-12)
    assert finding.share_of_step == pytest.approx(0.050 / 0.200, rel=1e-9)
    assert finding.compute_ms_per_step.after == pytest.approx(0.185, rel=1e-12)
    assert finding.others_compute_ms_per_step.after == pytest.approx(0.135, rel=1e-12)
    r0, r1 = change.ranks
    assert r0.wait_ms_per_step.after == pytest.approx(0.050, rel=1e-12)
    assert r1.straggler_share.after == 1.0 and r0.straggler_share.after == 0.0

    assert change.ranks_differ
    table = rank_table(change)
    assert table is not None
    header, rows = table
    assert header[0] == "rank" and [row[0] for row in rows] == ["0", "1"]
    assert rows[0][header.index("wait ms")] == "0.000 -> 0.050"
    assert rows[1][header.index("last to join")] == "0% -> 100%"
    assert any("One rank held back the others: rank 1 was the last to join the collectives in 100% of the "
               "head's steps" in line for line in rank_bullets(change))


def test_more_communication_never_hidden_is_not_lost_overlap(tmp_path: Path) -> None:
    larger = [(GEMM, 0, 100, COMPUTE_STREAM), (ADD, 105, 35, COMPUTE_STREAM), (ALL_REDUCE, 140, 120, COMM_STREAM)]
    change = diff_ranks([pass_of(tmp_path, "base", {0: SERIAL, 1: SERIAL})],
                        [pass_of(tmp_path, "head", {0: larger, 1: larger})])
    assert change.exposed_communication_ms_per_step.delta == pytest.approx(0.060, rel=1e-9)  # 30% of the step
    assert change.overlapped_communication_ms_per_step.before == 0.0
    assert change.overlapped_communication_ms_per_step.after == 0.0
    assert change.findings == []


def test_same_traces_make_no_finding(tmp_path: Path) -> None:
    change = diff_ranks([pass_of(tmp_path, "a", {0: OVERLAPPED, 1: OVERLAPPED})],
                        [pass_of(tmp_path, "b", {0: OVERLAPPED, 1: OVERLAPPED}, shift_ns=31_337)])
    assert change.findings == [] and not change.ranks_differ
    assert change.exposed_communication_ms_per_step.delta == 0.0 and change.wait_ms_per_step.delta == 0.0


def test_a_growth_within_the_base_repeats_spread_is_no_finding(tmp_path: Path) -> None:
    """One base repeat exposes more than the head: the medians moved, the repeats overlap."""
    longer = [(GEMM, 0, 100, COMPUTE_STREAM), (ADD, 105, 35, COMPUTE_STREAM), (ALL_REDUCE, 140, 80, COMM_STREAM)]
    base = [pass_of(tmp_path, "b0", {0: OVERLAPPED, 1: OVERLAPPED}), pass_of(tmp_path, "b1", {0: longer, 1: longer})]
    head = [pass_of(tmp_path, f"h{i}", {0: SERIAL, 1: SERIAL}, shift_ns=i) for i in range(2)]
    change = diff_ranks(base, head)
    assert change.exposed_communication_ms_per_step.delta == pytest.approx(0.020, rel=1e-9)
    assert change.base.exposed_communication_ms_by_repeat == pytest.approx([0.0, 0.080], rel=1e-12)
    assert change.findings == []


def test_a_diff_needs_both_arms(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="no rank traces for the head arm"):
        diff_ranks([pass_of(tmp_path, "base", {0: SERIAL, 1: SERIAL})], [])


# -- two real gloo ranks on the CPU ------------------------------------------------------------

GLOO_RANK = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    import torch
    import torch.distributed as dist
    from torch.profiler import ProfilerActivity, profile, schedule

    rank, store, out, steps = int(sys.argv[1]), sys.argv[2], Path(sys.argv[3]), int(sys.argv[4])
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=2)
    torch.set_num_threads(1)
    x, w = torch.randn(64, 64), torch.randn(64, 64)
    for name, slow_rank in (("even", None), ("slow1", 1)):
        path = out / f"{name}-rank{rank}.trace.json.gz"
        with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=0, warmup=1, active=steps),
                     on_trace_ready=lambda p, path=path: p.export_chrome_trace(str(path))) as prof:
            for _ in range(steps + 1):
                y = x @ w
                if rank == slow_rank:
                    time.sleep(0.04)  # the others wait for this rank in the all-reduce
                dist.all_reduce(y)
                prof.step()
    dist.destroy_process_group()
""")


@pytest.mark.slow
def test_two_gloo_ranks_on_the_cpu(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    if not torch.distributed.is_available() or not torch.distributed.is_gloo_available():
        pytest.skip("this torch has no gloo backend")
    script = tmp_path / "gloo_rank.py"
    script.write_text(GLOO_RANK)
    steps = 4
    procs = [subprocess.Popen([sys.executable, str(script), str(rank), str(tmp_path / "store"), str(tmp_path),
                               str(steps)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for rank in range(2)]
    for proc in procs:
        output, _ = proc.communicate(timeout=180)
        assert proc.returncode == 0, output

    arms = {name: analyze_ranks({rank: tmp_path / f"{name}-rank{rank}.trace.json.gz" for rank in range(2)}, steps)
            for name in ("even", "slow1")}
    for ranks in arms.values():
        assert ranks.steps == steps
        for r in ranks.ranks:
            assert r.activities == "host_ops"
            assert r.communication_per_step.get("gloo:all_reduce") == 1.0  # one all-reduce per step, found
            assert r.communication_ms_per_step > 0 and r.compute_ms_per_step > 0
    slow = arms["slow1"]
    assert slow.straggler.count(1) > steps / 2
    assert slow.ranks[0].wait_ms_per_step > 20  # of the 40 ms rank 1 slept, rank 0 spent most in its all-reduce
    assert slow.ranks[1].idle_ms_per_step > 20  # rank 1 was not computing: its sleep is idle time in its step

    change = diff_ranks([arms["even"]], [slow])
    assert [f.kind for f in change.findings] == ["rank_held_back"]  # nothing was ever overlapped: none lost
    assert change.findings[0].rank == 1
    json.loads(change.model_dump_json())  # the diff is plain data for the report
