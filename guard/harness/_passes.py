"""One batch size's passes in a harness process: the settling warmup, the end-to-end pass, on a
GPU the GPU-timed pass behind a hold, more end-to-end passes until tok/s has its seconds; and a
reference process's free-running pass.

Standard library only; torch is the workload's, handed in.
"""

from __future__ import annotations

import gc
import time
from dataclasses import dataclass
from typing import Any, Callable

from . import _host as host
from . import _logits as logits_of
from . import _perf as perf
from ._protocol import BatchRun, ReferenceRun, Spec, tokens_sha256
from ._ranks import ALONE
from ._timed import hold_cycles_per_us, hold_us_for, mark_pass
from ._workload import (
    Feed, WorkloadError, accepts_tokens, call_step, described, loaded_torch, log, mean, median, token_ids,
    uses_cuda, workload_device,
)

# Repeated passes stop at this multiple of tok_per_s_min_s, their setups included: a
# workload whose setup() is slow gets fewer seconds of decode, not an endless process.
PASS_BUDGET_FACTOR = 4.0


@dataclass
class Process:
    """What every pass of a harness process shares: the workload, the torch it uses (None until
    it imports one), the spec, the ranks it steps with, `phase(name)`, called as the setup and
    warmup end and as the timed passes do, and `after_warmup()`, before the timed passes."""

    workload: Any
    torch: Any
    spec: Spec
    peers: Any = ALONE
    phase: Callable[[str], None] = lambda name: None
    after_warmup: Callable[[], None] = lambda: None


def restart(workload: Any, batch_size: int, feed: Feed | None) -> float:
    """setup() again, for another pass from the state every pass starts from; its seconds."""
    t0 = time.perf_counter()
    workload.setup(batch_size)
    if feed is not None:
        feed.reset()
    return time.perf_counter() - t0


def warm_up(
    workload: Any, batch_size: int, pass_steps: int, max_s: float, feed: Feed | None, window_s: float = host.WINDOW_S,
    peers: Any = ALONE,
) -> dict[str, Any]:
    """Untimed decode after setup(), in passes of `pass_steps` steps, until the rolling median
    of its windows' tok/s settles or `max_s` seconds of decode have gone; then setup() again,
    so that the timed passes start where every pass does. Nothing when `max_s` is 0. Several
    ranks go on while one of them would (`peers`), so each steps as often as the others."""
    if max_s <= 0:
        return {"warmup_s": 0.0, "warmup_settled": None}
    rates: list[float] = []
    count, total, elapsed, done = 0, 0.0, 0.0, 0
    is_settled = False
    stamp = time.perf_counter()
    while peers.any(elapsed < max_s and not is_settled):
        if done == pass_steps:
            restart(workload, batch_size, feed)
            done, stamp = 0, time.perf_counter()
        token_ids(call_step(workload, feed), batch_size)
        now = time.perf_counter()
        seconds, stamp, done = now - stamp, now, done + 1
        elapsed, count, total = elapsed + seconds, count + 1, total + seconds
        if total >= window_s:
            rates.append(batch_size * count / total)
            count, total = 0, 0.0
            is_settled = host.settled(rates)
    restart(workload, batch_size, feed)
    return {"warmup_s": elapsed, "warmup_settled": is_settled}


def _end_to_end_pass(
    workload: Any, torch: Any, batch_size: int, steps: int, feed: Feed | None, cuda_ok: bool, meter: Any,
    peers: Any = ALONE,
) -> dict[str, Any]:
    """`steps` steps with each step's ids copied to the host, as a decode loop does. Each step's
    wall time runs from the end of the one before, so they add up to the pass: tok/s, and on a
    CPU the step time, come from them. CUDA events are recorded whenever CUDA is present (they
    include the host's launch time, as the GPU waits for it): the first pass's are end-to-end
    ms per step; every pass records them, so every pass does the same."""
    if cuda_ok:
        torch.cuda.synchronize()
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(steps)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(steps)]
    tokens: list[list[int]] = []
    step_s: list[float] = []
    enqueue_us: list[float] = []
    done_ns: list[int] = []  # as each step's ids reached the host, on the clock every process of the host shares
    on_cuda = False
    peers.barrier()  # the ranks start their timed steps together
    meter.start()
    meter.count_start()
    mark_pass(b"s")
    stamp = time.perf_counter()
    for i in range(steps):
        if cuda_ok:
            starts[i].record()
        s0 = time.perf_counter()
        out = call_step(workload, feed)
        enqueue_us.append((time.perf_counter() - s0) * 1e6)
        if cuda_ok:
            ends[i].record()
        tokens.append(token_ids(out, batch_size))  # copies to the host: a real decode loop does too
        now = time.perf_counter()
        done_ns.append(time.monotonic_ns())
        step_s.append(now - stamp)
        stamp = now
        on_cuda = on_cuda or uses_cuda(out)
        if meter.window(step_s[-1]):
            stamp = time.perf_counter()  # reading the window's host state is not the next step's time
    mark_pass(b"e")
    if cuda_ok:
        torch.cuda.synchronize()
    meter.count_stop(steps)
    meter.stop()
    result: dict[str, Any] = {"tokens": tokens, "step_s": step_s, "enqueue_us": enqueue_us,
                              "on_cuda": on_cuda, "done_ns": done_ns}
    if on_cuda:
        result["end_to_end_gpu_ms"] = [s.elapsed_time(e) for s, e in zip(starts, ends)]
    return result



def run_batch(p: Process, batch_size: int, reference: list[list[int]] | None = None) -> BatchRun:
    """setup(), a warmup (see `warm_up`), `warmup_steps` steps, then the timed passes: the
    end-to-end pass, on a GPU the GPU-timed pass after it, then more end-to-end passes, each
    from setup() and `warmup_steps` steps again, until tok/s has `tok_per_s_min_s` seconds of
    decode. `tokens` holds the first of them alone (and the GPU-timed pass), so that what is
    compared with the reference does not depend on how many passes a process made. The
    garbage collector is off during the timed passes: a collection is a pause of the host.
    Every figure is a mean, what the user feels, a stall included: GPU ms per step over the
    GPU-timed pass (a CPU's: the first end-to-end pass), end-to-end ms over the first pass's CUDA
    events, tok/s the tokens of every end-to-end pass over their summed time; the medians are
    diagnostics."""
    spec, workload, peers = p.spec, p.workload, p.peers
    steps, window_s = spec.steps, spec.tok_per_s_window_s
    t0 = time.perf_counter()
    workload.setup(batch_size)
    setup_s = time.perf_counter() - t0
    torch = loaded_torch(p.torch)  # a workload may import it as it sets up
    description = described(workload)
    feed = Feed(torch, reference, workload_device(workload), batch_size) if reference is not None else None
    warmup = warm_up(workload, batch_size, spec.warmup_steps + steps, spec.warmup_max_s, feed, window_s, peers)
    p.phase("setup and warmup")
    tokens: list[list[int]] = []
    for _ in range(spec.warmup_steps):
        tokens.append(token_ids(call_step(workload, feed), batch_size))
    p.after_warmup()

    meter = host.HostMeter(perf.InstructionCounter(), window_s)
    collecting = gc.isenabled()
    gc.collect()
    gc.freeze()  # what exists now is never scanned again: a later collection has less to walk
    gc.disable()
    try:
        run, first, done_ns = _first_passes(p, torch, batch_size, feed, meter, tokens)
        run["setup_s"] = setup_s
        step_s, pass_ms, passes, differing = _more_passes(p, torch, batch_size, feed, meter, first,
                                                          tokens[: spec.warmup_steps + steps])
    finally:
        gc.unfreeze()
        if collecting:
            gc.enable()
    p.phase("timed passes")
    rates = host.window_rates(step_s, batch_size, window_s)
    timed_s = sum(step_s)
    if timed_s < spec.tok_per_s_min_s:
        log(f"batch size {batch_size}: tok/s from {timed_s:.2f} s of decode in {passes} pass(es), under the "
            f"{spec.tok_per_s_min_s:g} s asked: setup() is slow when called again for the same batch size "
            "(see docs/workload-protocol.md)")
    # which of them disagree with the reference, the guard counts from the tokens: this
    # process runs the arm's code, so it reports what it generated and nothing it concluded
    return BatchRun(**run, tok_per_s=batch_size * steps * passes / timed_s if timed_s > 0 else 0.0,
                    end_to_end_pass_ms=pass_ms, tok_per_s_windows=rates, window_s=window_s, timed_passes=passes,
                    timed_s=timed_s, passes_differing=differing, gc_disabled=True, host=meter.result(), **warmup,
                    tokens=tokens, sha256=tokens_sha256(tokens), workload=description,
                    step_done_ns=done_ns if peers.world_size > 1 else None)  # which rank each step waited for


def _first_passes(
    p: Process, torch: Any, batch_size: int, feed: Feed | None, meter: Any, tokens: list[list[int]],
) -> tuple[dict[str, Any], dict[str, Any], list[int]]:
    """The first end-to-end pass and, on a GPU, the GPU-timed pass: the run's step figures,
    the first pass, and as each figure's step finished."""
    workload, steps, peers = p.workload, p.spec.steps, p.peers
    cuda_ok = torch is not None and torch.cuda.is_available()
    first = _end_to_end_pass(workload, torch, batch_size, steps, feed, cuda_ok, meter, peers)
    tokens.extend(first["tokens"])
    first_ms = [s * 1e3 for s in first["step_s"]]
    run: dict[str, Any] = {
        "batch_size": batch_size,
        "steps": steps,
        "warmup_steps": p.spec.warmup_steps,
        "timer": "perf_counter",
        "wall_s": sum(first["step_s"]),
        "gpu_ms_per_step": mean(first_ms),
        "gpu_ms_median_per_step": median(first_ms),
        "step_ms": first_ms,
        "forced": feed is not None,
    }
    done_ns = first["done_ns"]  # of the pass whose step times are the figures
    if first["on_cuda"]:
        run |= {"end_to_end_gpu_ms": first["end_to_end_gpu_ms"],
                "end_to_end_gpu_ms_per_step": mean(first["end_to_end_gpu_ms"]),
                "end_to_end_gpu_ms_median_per_step": median(first["end_to_end_gpu_ms"])}
        hold_us = peers.max(hold_us_for(first["enqueue_us"]))  # one hold for every rank: they start together
        meter.start()
        held = _gpu_timed_pass(workload, torch, batch_size, steps, hold_us, tokens, feed, peers)
        meter.stop()
        done_ns = held.pop("done_ns")
        run |= held | {"timer": "cuda_event", "gpu_ms_per_step": mean(held["step_ms"]),
                       "gpu_ms_median_per_step": median(held["step_ms"]), "host_ms_per_step": mean(held["host_ms"])}
    return run, first, done_ns


def _more_passes(
    p: Process, torch: Any, batch_size: int, feed: Feed | None, meter: Any, first: dict[str, Any],
    first_pass: list[list[int]],
) -> tuple[list[float], list[float], int, int]:
    """More end-to-end passes, each from setup() and the warmup's steps, until tok/s has its
    seconds: every pass's step seconds, each pass's decode ms, the passes, and how many of
    them decoded other ids than the first (`first_pass`, its warmup included)."""
    workload, spec, peers = p.workload, p.spec, p.peers
    cuda_ok = torch is not None and torch.cuda.is_available()
    step_s = list(first["step_s"])
    pass_ms = [sum(first["step_s"]) * 1e3]  # each end-to-end pass's decode: tok/s is tokens over their sum
    passes, differing = 1, 0
    budget_end = time.perf_counter() + PASS_BUDGET_FACTOR * spec.tok_per_s_min_s
    while peers.any(sum(step_s) < spec.tok_per_s_min_s and time.perf_counter() < budget_end):
        restart(workload, batch_size, feed)
        lead_in = [token_ids(call_step(workload, feed), batch_size) for _ in range(spec.warmup_steps)]
        again = _end_to_end_pass(workload, torch, batch_size, spec.steps, feed, cuda_ok, meter, peers)
        step_s.extend(again["step_s"])
        pass_ms.append(sum(again["step_s"]) * 1e3)
        passes += 1
        differing += (lead_in + again["tokens"]) != first_pass
    return step_s, pass_ms, passes, differing


def _gpu_timed_pass(
    workload: Any, torch: Any, batch_size: int, steps: int, hold_us: float, tokens: list[list[int]],
    feed: Feed | None, peers: Any = ALONE,
) -> dict[str, Any]:
    """Every step held behind a spin of hold_us on the GPU, then timed by CUDA events. The
    host's enqueue time of each step is its host time: what CUDA graphs save."""
    rate = hold_cycles_per_us(torch)
    hold_cycles = int(hold_us * rate) if rate else 0
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(steps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(steps)]
    host_ms: list[float] = []
    done_ns: list[int] = []
    unheld = 0
    torch.cuda.synchronize()
    peers.barrier()
    mark_pass(b"g")
    for i in range(steps):
        if hold_cycles:
            torch.cuda._sleep(hold_cycles)
        t0 = time.perf_counter()  # the spin starts about now: the GPU was idle
        starts[i].record()
        out = call_step(workload, feed)
        ends[i].record()
        enqueue_s = time.perf_counter() - t0
        host_ms.append(enqueue_s * 1e3)
        if enqueue_s * 1e6 > hold_us:
            unheld += 1  # the host was still launching when the hold ran out
        tokens.append(token_ids(out, batch_size))
        done_ns.append(time.monotonic_ns())
    torch.cuda.synchronize()
    mark_pass(b"h")
    return {
        "step_ms": [s.elapsed_time(e) for s, e in zip(starts, ends)],
        "host_ms": host_ms,
        "hold_us": hold_us if hold_cycles else 0.0,
        "unheld_steps": unheld if hold_cycles else steps,
        "done_ns": done_ns,
    }


def reference_batch(p: Process, batch_size: int) -> ReferenceRun:
    """A free-running greedy pass, untimed, as long as a measured process's passes: warmup and
    one timed pass on a CPU; on a GPU, the second (GPU-timed) pass too, or the profiled pass
    if that is longer. Its outputs are the ids every measured process is forced with; with the
    workload's step_logits(), each output's two largest logits beside them."""
    workload, steps, warmup_steps = p.workload, p.spec.steps, p.spec.warmup_steps
    workload.setup(batch_size)
    tokens: list[list[int]] = []
    total = warmup_steps + steps
    takes_ids = accepts_tokens(workload)
    logits = logits_of.StepLogits(workload, WorkloadError)
    while len(tokens) < total:
        out = workload.step(None) if takes_ids else workload.step()
        tokens.append(token_ids(out, batch_size))
        logits.record(batch_size)
        if len(tokens) == 1 and uses_cuda(out):
            total = warmup_steps + max(2 * steps, p.spec.profile_steps)
    return ReferenceRun(batch_size=batch_size, tokens=tokens, sha256=tokens_sha256(tokens), **logits.fields())
