"""The batch-size mix pass of a harness process: its settling warmup, its timed steps (end to
end, then on a GPU held and CUDA-event timed, as a fixed size's), its profiled pass, and a
reference process's free-running mix. The schedule is harness/_mix.py's.

Standard library only; torch is the workload's, handed in.
"""

from __future__ import annotations

import gc
import time
from pathlib import Path
from typing import Any, Callable

from . import _host as host
from . import _logits as logits_of
from . import _mix as mixes
from ._mix_feed import MixFeed, mix_start
from ._passes import Process
from ._profile import profiled
from ._protocol import MixRun, ReferenceMix, Spec
from ._timed import hold_cycles_per_us, hold_us_for, mark_pass
from ._workload import WorkloadError, accepts_tokens, described, loaded_torch, token_ids, uses_cuda


def mix_schedule(spec: Spec) -> list[int] | None:
    """The spec's schedule: warmup, end-to-end pass, GPU-timed pass, and what a longer
    profiled pass needs past them (None: no mix)."""
    if not spec.batch_mix and not spec.batch_mix_steps:
        return None
    lengths = mixes.pass_lengths(spec.warmup_steps, spec.steps, spec.profile_steps)
    return mixes.draw_schedule(lengths, spec.batch_mix_seed, spec.batch_mix or None, spec.batch_mix_steps)


def _mix_steps(
    workload: Any, torch: Any, feed: MixFeed, first: int, count: int, tokens: list[list[int]],
    held_cycles: int | None = None, logits: Any = None,
) -> dict[str, Any]:
    """Schedule steps first..first+count-1. Timed per step: the host clock up to the ids' copy
    (CPU), or CUDA events behind a spin of `held_cycles` (the GPU-timed pass). step_info(),
    when the workload has it, is called after each step and recorded as data; so are the step's
    top logits into `logits` (a StepLogits: the reference pass's)."""
    info_fn = getattr(workload, "step_info", None)
    step_s: list[float] = []
    enqueue_us: list[float] = []
    gpu_ms: list[float] = []
    infos: list[dict[str, Any]] = []
    done_ns: list[int] = []
    events = []
    for k in range(first, first + count):
        size = feed.schedule[k]
        ids = feed.input(k)
        if held_cycles is not None:
            if held_cycles:
                torch.cuda._sleep(held_cycles)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
        t0 = time.perf_counter()
        out = workload.step(ids)
        enqueue_us.append((time.perf_counter() - t0) * 1e6)
        if held_cycles is not None:
            end.record()
            events.append((start, end))
        row = token_ids(out, size)
        step_s.append(time.perf_counter() - t0)
        done_ns.append(time.monotonic_ns())
        feed.saw(row)
        tokens.append(row)
        if logits is not None:
            logits.record(size)
        if callable(info_fn):
            try:
                infos.append(mixes.checked_step_info(info_fn(), size))
            except ValueError as exc:
                raise WorkloadError(str(exc)) from None
    if held_cycles is not None:
        torch.cuda.synchronize()
        gpu_ms = [s.elapsed_time(e) for s, e in events]
    return {"step_s": step_s, "enqueue_us": enqueue_us, "gpu_ms": gpu_ms, "done_ns": done_ns,
            "step_info": infos if callable(info_fn) else None}



def settle_mix(p: Process, torch: Any, schedule: list[int], reference: list[list[int]] | None) -> dict[str, Any]:
    """The fixed sizes' warmup (`warm_up`) over the mix, after its setup(): untimed passes of
    the schedule's first `pass_steps` steps, each from a setup() and the lead step, until the
    rolling median of real rows per second over windows settles or `max_s` seconds of decode
    have gone; then setup() again, so that the timed passes start where every pass does.
    Nothing when `max_s` is 0."""
    workload, peers, max_s = p.workload, p.peers, p.spec.warmup_max_s
    pass_steps, window_s = p.spec.warmup_steps + p.spec.steps, p.spec.tok_per_s_window_s
    if max_s <= 0:
        return {"warmup_s": 0.0, "warmup_settled": None}
    width = max(schedule)
    rates: list[float] = []
    rows, total, elapsed = 0, 0.0, 0.0
    is_settled = False
    started = False
    while peers.any(elapsed < max_s and not is_settled):
        if started:
            workload.setup(width)
        started = True
        feed, _ = mix_start(workload, torch, schedule, reference, [])
        for k in range(pass_steps):
            t0 = time.perf_counter()
            feed.saw(token_ids(workload.step(feed.input(k)), schedule[k]))
            seconds = time.perf_counter() - t0
            elapsed, rows, total = elapsed + seconds, rows + schedule[k], total + seconds
            if total >= window_s:
                rates.append(rows / total)
                rows, total = 0, 0.0
                is_settled = host.settled(rates)
            if not peers.any(elapsed < max_s and not is_settled):
                break
    workload.setup(width)
    return {"warmup_s": elapsed, "warmup_settled": is_settled}


def run_mix(p: Process, schedule: list[int], reference: list[list[int]] | None = None) -> MixRun:
    """The mix pass: setup() once for the largest size, the settling warmup (`settle_mix`),
    a lead step of every row, then the schedule: `warmup_steps` untimed, `steps` end-to-end
    (host clock; on a CPU, the step times), on a GPU `steps` more held and CUDA-event timed,
    as the fixed sizes are; tok/s is the end-to-end steps' rows over their summed time. Each
    step(tokens) gets its active rows' input ids, so tokens' length is the step's batch size."""
    workload, steps, warmup_steps = p.workload, p.spec.steps, p.spec.warmup_steps
    if not accepts_tokens(workload):
        raise WorkloadError("a batch_mix needs a workload whose step(tokens) takes its input ids (the active "
                            "rows' ids set the step's batch size); see docs/workload-protocol.md")
    width = max(schedule)
    t0 = time.perf_counter()
    workload.setup(width)
    setup_s = time.perf_counter() - t0
    torch = loaded_torch(p.torch)
    description = described(workload)
    warmup = settle_mix(p, torch, schedule, reference)
    tokens: list[list[int]] = []
    feed, lead = mix_start(workload, torch, schedule, reference, tokens)
    _mix_steps(workload, torch, feed, 0, warmup_steps, tokens)
    p.after_warmup()
    cuda_ok = torch is not None and torch.cuda.is_available() and uses_cuda(lead)
    collecting = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        run, first, done_ns = _timed_mix(p, torch, feed, tokens, cuda_ok)
    finally:
        if collecting:
            gc.enable()
    rows = sum(schedule[warmup_steps: warmup_steps + steps])
    return MixRun(**run, max_batch_size=width, steps=steps, warmup_steps=warmup_steps, setup_s=setup_s,
                  tok_per_s=rows / sum(first["step_s"]) if sum(first["step_s"]) > 0 else 0.0,  # tokens over their time
                  tokens=tokens, forced=reference is not None, workload=description, **warmup,
                  step_done_ns=done_ns if p.peers.world_size > 1 else None)


def _timed_mix(
    p: Process, torch: Any, feed: MixFeed, tokens: list[list[int]], cuda_ok: bool,
) -> tuple[dict[str, Any], dict[str, Any], list[int]]:
    """The mix's end-to-end steps and, on a GPU, its held ones: the run's step figures, the
    end-to-end steps, and as each figure's step finished."""
    workload, steps, warmup_steps, peers = p.workload, p.spec.steps, p.spec.warmup_steps, p.peers
    peers.barrier()
    mark_pass(b"m")
    first = _mix_steps(workload, torch, feed, warmup_steps, steps, tokens)
    mark_pass(b"n")
    end_to_end_ms = [s * 1e3 for s in first["step_s"]]
    run: dict[str, Any] = {"timer": "perf_counter", "step_ms": end_to_end_ms, "end_to_end_step_ms": end_to_end_ms,
                           "step_info": first["step_info"]}
    done_ns = first["done_ns"]
    if cuda_ok:
        rate = hold_cycles_per_us(torch)
        hold_us = peers.max(hold_us_for(first["enqueue_us"]))
        if peers.world_size > 1:
            torch.cuda.synchronize()
            peers.barrier()
        mark_pass(b"p")
        held = _mix_steps(workload, torch, feed, warmup_steps + steps, steps, tokens,
                          int(hold_us * rate) if rate else 0)
        mark_pass(b"q")
        run |= {"timer": "cuda_event", "step_ms": held["gpu_ms"], "step_info": held["step_info"],
                "hold_us": hold_us if rate else 0.0}
        done_ns = held["done_ns"]
    return run, first, done_ns


def profile_mix(
    workload: Any, torch: Any, schedule: list[int], warmup_steps: int, steps: int, trace_path: Path,
    phase: Callable[[str], None] = lambda name: None, reference: list[list[int]] | None = None,
) -> dict[str, Any]:
    """The mix under the profiler, after every timed pass, as `profile_batch` is for a fixed
    size: setup(), the lead step, the warmup's steps, then the next `steps` of the schedule
    (the end-to-end pass's, on into the GPU-timed pass's when longer), each a guard.step range."""
    workload.setup(max(schedule))
    feed, _ = mix_start(workload, torch, schedule, reference, [])
    for k in range(warmup_steps):
        feed.saw(token_ids(workload.step(feed.input(k)), schedule[k]))
    phase("profiled pass: setup and warmup")
    return profiled(torch, range(warmup_steps, warmup_steps + steps),
                    lambda k: feed.saw(token_ids(workload.step(feed.input(k)), schedule[k])), trace_path, phase)


def reference_mix(p: Process, schedule: list[int]) -> ReferenceMix:
    """The mix decoded free-running, untimed, on the same schedule: a lead step of every row,
    then each step's active rows from their own last outputs; as long as a measured process's
    passes (on a GPU, the GPU-timed one too, or the profiled pass if that is longer). With the
    workload's step_logits(), each output's two largest logits beside them, as for a fixed size."""
    workload, steps, warmup_steps = p.workload, p.spec.steps, p.spec.warmup_steps
    if not accepts_tokens(workload):
        return ReferenceMix(tokens=[])
    workload.setup(max(schedule))
    torch = loaded_torch(p.torch)
    tokens: list[list[int]] = []
    logits = logits_of.StepLogits(workload, WorkloadError)
    feed, lead = mix_start(workload, torch, schedule, None, tokens)
    logits.record(max(schedule))
    total = warmup_steps + (max(2 * steps, p.spec.profile_steps) if uses_cuda(lead) else steps)
    _mix_steps(workload, torch, feed, 0, total, tokens, logits=logits)
    return ReferenceMix(tokens=tokens, **logits.fields())
