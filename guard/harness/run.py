"""Run a decode workload in this process and write its timings and tokens as JSON.

Usage: python run.py SPEC.json RESULT.json

SPEC: {"entry", "root", "options", "batch_sizes", "steps", "warmup_steps", "arm", "repeat",
       "tok_per_s_min_s" (optional, 0 = one timed pass), "tok_per_s_window_s" (optional, default WINDOW_S of _host.py),
       "warmup_max_s" (optional, 0 = warmup_steps only),
       "profile_steps" (optional, 0 = none), "trace_dir" (optional), "cpus" (optional: pin to these),
       "mode" (optional: "measure", the default, or "reference"),
       "reference" (optional: a reference-tokens JSON whose ids force every step's input),
       "protocol" (optional: the guard's PROTOCOL_VERSION; another one is refused),
       "batch_mix" (optional: {size: share}) or "batch_mix_steps" (optional: one size per step),
       "batch_mix_seed" (optional, default 0): a mix pass after the fixed batch sizes (see `run_mix`),
       "world_size" (optional, default 1: one process per rank, the guard sets RANK etc.; see `_ranks.py`)}
A "reference" process decodes free-running, untimed, and writes the ids every measured process
is then forced with (see `forcing`). Exit codes: 0 done, 3 the workload failed (RESULT.json
then holds "error").
Imports only the standard library and torch: this file runs in the arm's environment.
"""

from __future__ import annotations

import gc
import gzip
import hashlib
import shutil
import tempfile
import importlib
import importlib.util
import inspect
import json
import os
import platform
import socket
import statistics
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable

REFERENCE_FORMAT = "regression-guard reference tokens"


class WorkloadError(Exception):
    """The workload broke the protocol; the message says how."""


def log(message: str) -> None:
    print(f"[harness] {message}", file=sys.stderr, flush=True)


def load_entry(entry: str, root: Path) -> Callable[..., Any]:
    target, _, func_name = entry.rpartition(":")
    if target.endswith(".py") or "/" in target:
        path = (root / target).resolve()
        if not path.is_file():
            raise WorkloadError(f"workload file {target} not found in {root}")
        sys.path.insert(0, str(path.parent))
        spec = importlib.util.spec_from_file_location(f"_guard_workload_{path.stem}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # dataclasses and pickling look the module up by name
        spec.loader.exec_module(module)
    else:
        sys.path.append(str(root))  # after installed packages, so an installed build wins
        module = importlib.import_module(target)
    func = getattr(module, func_name, None)
    if not callable(func):
        raise WorkloadError(f"{entry}: {func_name} is not a callable in {target}")
    return func


def token_ids(output: Any, batch_size: int) -> list[int]:
    """The step's output as a list of ints, one per sequence of the batch."""
    values = output.tolist() if hasattr(output, "tolist") else output
    if isinstance(values, int):
        values = [values]
    if not isinstance(values, (list, tuple)) or len(values) != batch_size:
        raise WorkloadError(f"step() must return {batch_size} token ids (one per sequence), got {values!r:.80}")
    if not all(isinstance(v, int) for v in values):
        raise WorkloadError("step() must return integer token ids")
    return list(values)


def tokens_sha256(tokens: list[list[int]]) -> str:
    digest = hashlib.sha256()
    for row in tokens:
        for token in row:
            digest.update(int(token).to_bytes(8, "little", signed=True))
    return digest.hexdigest()


def mean(values: list[float]) -> float:
    """A process's figure over its steps: their total time over their count (0 without steps).
    The guard computes it again from the same lists (guard/measure/_figures.py)."""
    return sum(values) / len(values) if values else 0.0


def median(values: list[float]) -> float:
    """A diagnostic beside a mean: a stall moves the mean and leaves the median where it was."""
    return statistics.median(values) if values else 0.0


def uses_cuda(output: Any) -> bool:
    device = getattr(output, "device", None)
    return getattr(device, "type", None) == "cuda"


def accepts_tokens(workload: Any) -> bool:
    """Whether the workload's step() takes the step's input ids (teacher forcing)."""
    try:
        params = list(inspect.signature(workload.step).parameters.values())
    except (TypeError, ValueError):
        return False
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                  inspect.Parameter.VAR_POSITIONAL)
    return any(p.kind in positional for p in params)


class Feed:
    """The input ids of each step after a setup. Free-running (no reference): None, the
    workload decodes from its own last output. Forced: step k (k >= 1) gets the reference's
    output of step k - 1, a view of one tensor preloaded on the device, so no host copy
    happens per step; the first step decodes from the workload's own prefill."""

    def __init__(self, torch: Any, rows: list[list[int]] | None, device: Any, batch_size: int) -> None:
        self.rows = rows
        self.views: list[Any] = []
        if rows is not None:
            if any(len(row) != batch_size for row in rows):
                raise WorkloadError(f"the reference tokens for batch size {batch_size} have rows of another width")
            if torch is None:  # a workload without torch gets each step's ids as a list of ints
                self.views = [list(row) for row in rows]
            else:
                ids = torch.tensor(rows, dtype=torch.int64, device=device if device is not None else "cpu")
                self.views = list(ids.unbind(0))
        self.k = 0

    def reset(self) -> None:
        self.k = 0

    def next(self) -> Any:
        """The input of the next step (None on the first one, or when free-running)."""
        k, self.k = self.k, self.k + 1
        if self.rows is None or k == 0:
            return None
        if k > len(self.views):
            raise WorkloadError(
                f"the reference tokens hold {len(self.views)} steps, fewer than this pass needs (on a GPU a process "
                "decodes warmup_steps + 2 x steps after each setup): write workload.reference_file with the guard on "
                "a machine like the one that runs it, or with fewer steps"
            )
        return self.views[k - 1]


def call_step(workload: Any, feed: Feed | None) -> Any:
    return workload.step(feed.next()) if feed is not None else workload.step()


# The GPU-timed pass holds each step behind a short spin on the GPU (torch.cuda._sleep), so
# the host has queued the whole step before the step's start event runs. The figure is then
# the GPU's own time for the step, not how fast this process's host launched it, which
# varies from process to process. The host's share shows in tok/s, from the end-to-end pass.
HOLD_MIN_US = 50.0
HOLD_MAX_US = 5000.0
_cycles_per_us: list[float | None] = []  # measured once per process


def hold_cycles_per_us(torch: Any) -> float | None:
    """Clock cycles of torch.cuda._sleep per microsecond on this GPU; None without it."""
    if not _cycles_per_us:
        sleep = getattr(torch.cuda, "_sleep", None)
        rate = None
        if sleep is not None:
            cycles = 1_000_000
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            sleep(cycles)  # loads the kernel
            start.record()
            sleep(cycles)
            end.record()
            end.synchronize()
            us = start.elapsed_time(end) * 1e3
            rate = cycles / us if us > 0 else None
        _cycles_per_us.append(rate)
    return _cycles_per_us[0]


def hold_us_for(enqueue_us: list[float]) -> float:
    """Twice the 90th percentile of the host's launch times, within [HOLD_MIN_US, HOLD_MAX_US]."""
    if not enqueue_us:
        return HOLD_MAX_US
    p90 = sorted(enqueue_us)[min(len(enqueue_us) - 1, int(len(enqueue_us) * 0.9))]
    return min(HOLD_MAX_US, max(HOLD_MIN_US, 2 * p90))


def workload_device(workload: Any) -> Any:
    return getattr(workload, "device", None)


# Repeated passes stop at this multiple of tok_per_s_min_s, their setups included: a
# workload whose setup() is slow gets fewer seconds of decode, not an endless process.
PASS_BUDGET_FACTOR = 4.0


def _sibling(name: str) -> Any:
    """A module beside this file, loaded by path, so it works however this file is started
    (as a script, with -I or -P, or imported)."""
    key = f"_guard_harness_{name}"
    module = sys.modules.get(key)
    if module is None:
        spec = importlib.util.spec_from_file_location(key, Path(__file__).with_name(f"{name}.py"))
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[key] = module
        spec.loader.exec_module(module)
    return module


host = _sibling("_host")
perf = _sibling("_perf")
mixes = _sibling("_mix")
logits_of = _sibling("_logits")
ranks = _sibling("_ranks")
dynamo = _sibling("_dynamo")
compile_stats = _sibling("_compile_stats").compile_stats
ALONE = ranks.ALONE
PROTOCOL_VERSION = _sibling("_protocol").PROTOCOL_VERSION


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


# The guard's clock (GUARD_CLOCK_FD, a pipe): a byte as each timed pass starts and ends, written
# as it happens (end-to-end s/e, GPU-timed g/h, the mix's m/n and p/q); the guard, which runs
# none of the arm's code, timestamps them with its own clock and holds the pass's step times to
# them (guard/measure/_clock.py, MARKS).
_clock_fd: list[int | None] = []


def mark_pass(what: bytes) -> None:
    if not _clock_fd:
        given = os.environ.get("GUARD_CLOCK_FD", "")
        _clock_fd.append(int(given) if given.isdigit() else None)
    fd = _clock_fd[0]
    if fd is None:
        return
    try:
        os.write(fd, what)
    except OSError:
        _clock_fd[0] = None  # the guard stopped reading: it sees the passes it saw


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


def run_batch(
    workload: Any, torch: Any, batch_size: int, steps: int, warmup_steps: int,
    reference: list[list[int]] | None = None, tok_per_s_min_s: float = 0.0, warmup_max_s: float = 0.0,
    phase: Callable[[str], None] = lambda name: None, window_s: float = host.WINDOW_S, peers: Any = ALONE,
    after_warmup: Callable[[], None] = lambda: None,
) -> dict[str, Any]:
    """setup(), a warmup (see `warm_up`), `warmup_steps` steps, then the timed passes: the
    end-to-end pass, on a GPU the GPU-timed pass after it, then more end-to-end passes, each
    from setup() and `warmup_steps` steps again, until tok/s has `tok_per_s_min_s` seconds of
    decode. `tokens` holds the first of them alone (and the GPU-timed pass), so that what is
    compared with the reference does not depend on how many passes a process made. The
    garbage collector is off during the timed passes: a collection is a pause of the host.
    Every figure is a mean, what the user feels, a stall included: GPU ms per step over the
    GPU-timed pass (a CPU's: the first end-to-end pass), end-to-end ms over the first pass's CUDA
    events, tok/s the tokens of every end-to-end pass over their summed time; the medians are
    diagnostics. `phase(name)` is called as the setup and warmup end and as the timed passes do;
    `after_warmup()` before the timed passes."""
    t0 = time.perf_counter()
    workload.setup(batch_size)
    setup_s = time.perf_counter() - t0
    torch = loaded_torch(torch)  # a workload may import it as it sets up
    describe = getattr(workload, "describe", None)
    described = describe() if callable(describe) else {}
    feed = Feed(torch, reference, workload_device(workload), batch_size) if reference is not None else None
    warmup = warm_up(workload, batch_size, warmup_steps + steps, warmup_max_s, feed, window_s, peers)
    phase("setup and warmup")
    tokens: list[list[int]] = []
    for _ in range(warmup_steps):
        tokens.append(token_ids(call_step(workload, feed), batch_size))
    after_warmup()

    cuda_ok = torch is not None and torch.cuda.is_available()
    meter = host.HostMeter(perf.InstructionCounter(), window_s)
    collecting = gc.isenabled()
    gc.collect()
    gc.freeze()  # what exists now is never scanned again: a later collection has less to walk
    gc.disable()
    try:
        first = _end_to_end_pass(workload, torch, batch_size, steps, feed, cuda_ok, meter, peers)
        tokens.extend(first["tokens"])
        first_ms = [s * 1e3 for s in first["step_s"]]
        run: dict[str, Any] = {
            "batch_size": batch_size,
            "steps": steps,
            "warmup_steps": warmup_steps,
            "timer": "perf_counter",
            "setup_s": setup_s,
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
        step_s = list(first["step_s"])
        pass_ms = [sum(first["step_s"]) * 1e3]  # each end-to-end pass's decode: tok/s is tokens over their sum
        passes, differing = 1, 0
        first_pass = tokens[: warmup_steps + steps]
        budget_end = time.perf_counter() + PASS_BUDGET_FACTOR * tok_per_s_min_s
        while peers.any(sum(step_s) < tok_per_s_min_s and time.perf_counter() < budget_end):
            restart(workload, batch_size, feed)
            lead_in = [token_ids(call_step(workload, feed), batch_size) for _ in range(warmup_steps)]
            again = _end_to_end_pass(workload, torch, batch_size, steps, feed, cuda_ok, meter, peers)
            step_s.extend(again["step_s"])
            pass_ms.append(sum(again["step_s"]) * 1e3)
            passes += 1
            differing += (lead_in + again["tokens"]) != first_pass
    finally:
        gc.unfreeze()
        if collecting:
            gc.enable()
    phase("timed passes")
    rates = host.window_rates(step_s, batch_size, window_s)
    timed_s = sum(step_s)
    if timed_s < tok_per_s_min_s:
        log(f"batch size {batch_size}: tok/s from {timed_s:.2f} s of decode in {passes} pass(es), under the "
            f"{tok_per_s_min_s:g} s asked: setup() is slow when called again for the same batch size "
            "(see docs/workload-protocol.md)")
    run |= {
        "tok_per_s": batch_size * steps * passes / timed_s if timed_s > 0 else 0.0,
        "end_to_end_pass_ms": pass_ms,
        "tok_per_s_windows": rates,
        "window_s": window_s,
        "timed_passes": passes,
        "timed_s": timed_s,
        "passes_differing": differing,
        "gc_disabled": True,
        "host": meter.result(),
        **warmup,
    }
    # which of them disagree with the reference, the guard counts from the tokens: this
    # process runs the arm's code, so it reports what it generated and nothing it concluded
    run |= {"tokens": tokens, "sha256": tokens_sha256(tokens), "workload": described}
    if peers.world_size > 1:  # which rank each step waited for, the guard finds from these
        run["step_done_ns"] = done_ns
    return run


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


def reference_batch(
    workload: Any, torch: Any, batch_size: int, steps: int, warmup_steps: int, profile_steps: int
) -> dict[str, Any]:
    """A free-running greedy pass, untimed, as long as a measured process's passes: warmup and
    one timed pass on a CPU; on a GPU, the second (GPU-timed) pass too, or the profiled pass
    if that is longer. Its outputs are the ids every measured process is forced with; with the
    workload's step_logits(), each output's two largest logits beside them."""
    workload.setup(batch_size)
    torch = loaded_torch(torch)
    tokens: list[list[int]] = []
    total = warmup_steps + steps
    takes_ids = accepts_tokens(workload)
    logits = logits_of.StepLogits(workload, WorkloadError)
    while len(tokens) < total:
        out = workload.step(None) if takes_ids else workload.step()
        tokens.append(token_ids(out, batch_size))
        logits.record(batch_size)
        if len(tokens) == 1 and uses_cuda(out):
            total = warmup_steps + max(2 * steps, profile_steps)
    return {"batch_size": batch_size, "tokens": tokens, "sha256": tokens_sha256(tokens)} | logits.fields()


def profile_batch(
    workload: Any,
    torch: Any,
    batch_size: int,
    warmup_steps: int,
    steps: int,
    trace_path: Path,
    phase: Callable[[str], None] = lambda name: None,
    reference: list[list[int]] | None = None,
) -> dict[str, Any]:
    """A separate pass under the profiler, after the timed ones: it says where the time went.
    Its timings are inflated by the profiler and never used as figures. `phase(name)` is
    called as each part ends, so that the process's timings show what the pass costs."""
    workload.setup(batch_size)
    feed = Feed(torch, reference, workload_device(workload), batch_size) if reference is not None else None
    for _ in range(warmup_steps):
        token_ids(call_step(workload, feed), batch_size)
    phase("profiled pass: setup and warmup")
    return _profiled(torch, range(steps), lambda _: token_ids(call_step(workload, feed), batch_size), trace_path,
                     phase)


def _profiled(torch: Any, steps: range, step: Callable[[int], object], trace_path: Path,
              phase: Callable[[str], None]) -> dict[str, Any]:
    """`step(k)` for each k of `steps` under the profiler, each a guard.step range; the trace written."""
    from torch.profiler import ProfilerActivity, profile, record_function

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    with profile(activities=activities) as prof:
        for k in steps:
            with record_function("guard.step"):  # the analysis splits the trace into steps by this range
                step(k)
        if torch.cuda.is_available():
            torch.cuda.synchronize()
    phase("profiled pass: profiler and steps")
    write_trace(prof, trace_path)
    phase("profiled pass: trace export")
    return {"trace": str(trace_path), "profile_steps": len(steps)}


def write_trace(prof: Any, trace_path: Path) -> None:
    """The profiler's Chrome trace, gzipped, at `trace_path`."""
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(raw))
        trace_path.parent.mkdir(parents=True, exist_ok=True)
        with raw.open("rb") as src, gzip.open(trace_path, "wb", compresslevel=3) as dst:
            shutil.copyfileobj(src, dst)


# --- batch-size mix ----------------------------------------------------------------------
class MixFeed:
    """The input ids of each step of a mix pass. Every step after a setup has an active batch:
    the first `b` rows of the largest size. Step 0 runs every row from the workload's own
    prefill; a later step gives each active row the last output that row had, the reference's
    when forced (the same rule the reference process fed itself with), its own when free."""

    def __init__(self, torch: Any, width: int, schedule: list[int], rows: list[list[int]] | None,
                 device: Any) -> None:
        self.torch, self.width, self.schedule, self.device = torch, width, schedule, device
        self.last: list[int] = []
        self.views: list[Any] = []
        self.forced = rows is not None
        if rows is not None:
            widths = [width, *schedule]
            if not rows or any(len(row) != w for row, w in zip(rows, widths)):
                raise WorkloadError("the reference tokens of the mix have rows of other widths than its schedule")
            # step k decodes from rows 0..k-1: a reference of n rows forces n - 1 steps (a CPU's
            # reference stops before the GPU-timed pass; a GPU's holds it)
            covered = schedule[: len(rows) - 1]
            inputs: list[int] = []
            last = list(rows[0])
            for k, size in enumerate(covered, start=1):
                inputs.extend(last[:size])
                last[:size] = rows[k]
            if torch is None:  # as a fixed size's: lists of ints without torch
                ends = [sum(covered[: k + 1]) for k in range(len(covered))]
                self.views = [inputs[end - size: end] for end, size in zip(ends, covered)]
            else:
                flat = torch.tensor(inputs, dtype=torch.int64, device=device if device is not None else "cpu")
                self.views = list(flat.split(covered)) if covered else []

    def input(self, k: int) -> Any:
        """The ids of schedule step k (0-based, after the lead step)."""
        if self.forced:
            if k >= len(self.views):
                raise WorkloadError(f"the reference tokens hold {len(self.views)} mix steps, fewer than this pass "
                                    "needs (on a GPU, warmup_steps + 2 x steps)")
            return self.views[k]
        if self.torch is None:
            return self.last[: self.schedule[k]]
        return self.torch.tensor(self.last[: self.schedule[k]], dtype=self.torch.int64,
                                 device=self.device if self.device is not None else "cpu")

    def saw(self, ids: list[int]) -> None:
        """A step's output: the last ids of its rows."""
        if not self.last:
            self.last = list(ids)
        else:
            self.last[: len(ids)] = ids


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


def mix_schedule(spec: dict[str, Any]) -> list[int] | None:
    """The spec's schedule: warmup, end-to-end pass, GPU-timed pass, and what a longer
    profiled pass needs past them (None: no mix)."""
    mix = spec.get("batch_mix")
    sequence = spec.get("batch_mix_steps")
    if not mix and not sequence:
        return None
    lengths = mixes.pass_lengths(spec["warmup_steps"], spec["steps"], spec.get("profile_steps", 0))
    return mixes.draw_schedule(lengths, int(spec.get("batch_mix_seed", 0)),
                               {int(k): float(v) for k, v in mix.items()} if mix else None, sequence)


def _mix_start(
    workload: Any, torch: Any, schedule: list[int], reference: list[list[int]] | None, tokens: list[list[int]],
) -> tuple[MixFeed, Any]:
    """After a setup(): the feed of the schedule, and the lead step of every row (its ids
    appended to `tokens`); returns the feed and the lead step's output."""
    width = max(schedule)
    feed = MixFeed(torch, width, schedule, reference, workload_device(workload))
    lead = workload.step(None)
    tokens.append(token_ids(lead, width))
    feed.saw(tokens[-1])
    return feed, lead


def settle_mix(
    workload: Any, torch: Any, schedule: list[int], pass_steps: int, max_s: float,
    reference: list[list[int]] | None, window_s: float = host.WINDOW_S, peers: Any = ALONE,
) -> dict[str, Any]:
    """The fixed sizes' warmup (`warm_up`) over the mix, after its setup(): untimed passes of
    the schedule's first `pass_steps` steps, each from a setup() and the lead step, until the
    rolling median of real rows per second over windows settles or `max_s` seconds of decode
    have gone; then setup() again, so that the timed passes start where every pass does.
    Nothing when `max_s` is 0."""
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
        feed, _ = _mix_start(workload, torch, schedule, reference, [])
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


def run_mix(
    workload: Any, torch: Any, schedule: list[int], steps: int, warmup_steps: int,
    reference: list[list[int]] | None = None, warmup_max_s: float = 0.0, window_s: float = host.WINDOW_S,
    peers: Any = ALONE, after_warmup: Callable[[], None] = lambda: None,
) -> dict[str, Any]:
    """The mix pass: setup() once for the largest size, the settling warmup (`settle_mix`),
    a lead step of every row, then the schedule: `warmup_steps` untimed, `steps` end-to-end
    (host clock; on a CPU, the step times), on a GPU `steps` more held and CUDA-event timed,
    as the fixed sizes are; tok/s is the end-to-end steps' rows over their summed time. Each
    step(tokens) gets its active rows' input ids, so tokens' length is the step's batch size.
    `after_warmup()` before the timed steps."""
    if not accepts_tokens(workload):
        raise WorkloadError("a batch_mix needs a workload whose step(tokens) takes its input ids (the active "
                            "rows' ids set the step's batch size); see docs/workload-protocol.md")
    width = max(schedule)
    t0 = time.perf_counter()
    workload.setup(width)
    setup_s = time.perf_counter() - t0
    torch = loaded_torch(torch)
    describe = getattr(workload, "describe", None)
    described = describe() if callable(describe) else {}
    warmup = settle_mix(workload, torch, schedule, warmup_steps + steps, warmup_max_s, reference, window_s, peers)
    tokens: list[list[int]] = []
    feed, lead = _mix_start(workload, torch, schedule, reference, tokens)
    _mix_steps(workload, torch, feed, 0, warmup_steps, tokens)
    after_warmup()
    cuda_ok = torch is not None and torch.cuda.is_available() and uses_cuda(lead)
    collecting = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
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
    finally:
        if collecting:
            gc.enable()
    rows = sum(schedule[warmup_steps: warmup_steps + steps])
    run |= {
        "max_batch_size": width,
        "steps": steps,
        "warmup_steps": warmup_steps,
        "setup_s": setup_s,
        "tok_per_s": rows / sum(first["step_s"]) if sum(first["step_s"]) > 0 else 0.0,  # tokens over their time
        "tokens": tokens,
        "forced": reference is not None,
        "workload": described,
        **warmup,
    }
    if peers.world_size > 1:
        run["step_done_ns"] = done_ns
    return run


def profile_mix(
    workload: Any, torch: Any, schedule: list[int], warmup_steps: int, steps: int, trace_path: Path,
    phase: Callable[[str], None] = lambda name: None, reference: list[list[int]] | None = None,
) -> dict[str, Any]:
    """The mix under the profiler, after every timed pass, as `profile_batch` is for a fixed
    size: setup(), the lead step, the warmup's steps, then the next `steps` of the schedule
    (the end-to-end pass's, on into the GPU-timed pass's when longer), each a guard.step range."""
    workload.setup(max(schedule))
    feed, _ = _mix_start(workload, torch, schedule, reference, [])
    for k in range(warmup_steps):
        feed.saw(token_ids(workload.step(feed.input(k)), schedule[k]))
    phase("profiled pass: setup and warmup")
    return _profiled(torch, range(warmup_steps, warmup_steps + steps),
                     lambda k: feed.saw(token_ids(workload.step(feed.input(k)), schedule[k])), trace_path, phase)


def reference_mix(
    workload: Any, torch: Any, schedule: list[int], steps: int, warmup_steps: int, profile_steps: int = 0,
) -> dict[str, Any]:
    """The mix decoded free-running, untimed, on the same schedule: a lead step of every row,
    then each step's active rows from their own last outputs; as long as a measured process's
    passes (on a GPU, the GPU-timed one too, or the profiled pass if that is longer). With the
    workload's step_logits(), each output's two largest logits beside them, as for a fixed size."""
    if not accepts_tokens(workload):
        return {"tokens": []}
    workload.setup(max(schedule))
    torch = loaded_torch(torch)
    tokens: list[list[int]] = []
    logits = logits_of.StepLogits(workload, WorkloadError)
    feed, lead = _mix_start(workload, torch, schedule, None, tokens)
    logits.record(max(schedule))
    total = warmup_steps + (max(2 * steps, profile_steps) if uses_cuda(lead) else steps)
    _mix_steps(workload, torch, feed, 0, total, tokens, logits=logits)
    return {"tokens": tokens} | logits.fields()
# --- end batch-size mix ------------------------------------------------------------------


def load_reference(path: str, sha256: str | None = None) -> dict[Any, list[list[int]]]:
    """Batch size -> one row of ids per step, from a reference-tokens file the guard wrote,
    checked against the hash the guard gave (an earlier process may have changed the file);
    the mix's rows, when it has them, under "mix"."""
    raw = Path(path).read_bytes()
    if sha256 is not None and hashlib.sha256(raw).hexdigest() != sha256:
        raise WorkloadError(f"{path} is not the reference the guard wrote (its sha256 differs)")
    data = json.loads(raw)
    if not isinstance(data, dict) or data.get("format") != REFERENCE_FORMAT:
        raise WorkloadError(f"{path} is not a reference-tokens file")
    found: dict[Any, list[list[int]]] = {int(size): rows for size, rows in data["batch_sizes"].items()}
    if data.get("mix"):
        found["mix"] = data["mix"]
    return found


def profiled_steps(spec: dict[str, Any], timer: str, peers: Any) -> int:
    """Steps of a pass's profiled run after its timed ones (0: none). On a GPU, profile_steps.
    On a CPU, only for several ranks, whose analysis across ranks reads the host's ops (gloo),
    and no more than the timed steps: a reference holds no more past the warmup there."""
    steps = int(spec.get("profile_steps", 0)) if spec.get("trace_dir") else 0
    if timer == "cuda_event":
        return steps
    return min(steps, int(spec["steps"])) if peers.world_size > 1 else 0


def trace_name(spec: dict[str, Any], peers: Any, part: str) -> str:
    """A profiled pass's trace file: ARM-REPEAT-PART, each rank's with its rank (ARM-REPEAT-rankR-PART)."""
    rank = f"-rank{peers.rank}" if peers.world_size > 1 else ""
    return f"{spec.get('arm')}-{spec.get('repeat')}{rank}-{part}.trace.json.gz"


def environment(torch: Any) -> dict[str, Any]:
    env: dict[str, Any] = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "hostname": socket.gethostname(),
        "cpu": platform.processor() or platform.machine(),
        "torch": getattr(torch, "__version__", None),
        "cuda": getattr(getattr(torch, "version", None), "cuda", None),
        "gpu": None,
        "gpu_capability": None,
        "driver": None,
        "cpus": sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
    }
    if torch is not None and torch.cuda.is_available():
        env["gpu"] = torch.cuda.get_device_name()
        env["gpu_capability"] = "sm_%d%d" % torch.cuda.get_device_capability()
        env["driver"] = _driver_version()
    return env


def _driver_version() -> str | None:
    try:
        import pynvml  # nvidia-ml-py; optional in the arm's environment

        pynvml.nvmlInit()
        try:
            version = pynvml.nvmlSystemGetDriverVersion()
            return version.decode() if isinstance(version, bytes) else version
        finally:
            pynvml.nvmlShutdown()
    except Exception:
        return None


# --- GPU fingerprint (guard/harness/_fingerprint.py) -------------------------------------
def _fingerprint(torch: Any) -> dict[str, Any]:
    """The GPU's state now; loaded by path so it works however this file is started
    (as a script, with -I or -P, or imported), and never fails the run."""
    try:
        path = Path(__file__).with_name("_fingerprint.py")
        module = sys.modules.get("_guard_fingerprint")
        if module is None:
            spec = importlib.util.spec_from_file_location("_guard_fingerprint", path)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            sys.modules[spec.name] = module
        return module.gpu_fingerprint(torch)
    except Exception as exc:
        return {"available": False, "reason": f"fingerprint not collected ({type(exc).__name__}: {exc})"}
# --- end GPU fingerprint -------------------------------------------------------------------


def _import_torch() -> Any:
    try:
        import torch
    except ImportError:
        return None
    return torch


def loaded_torch(torch: Any) -> Any:
    """`torch` as given, else torch where the workload has imported it by now, else None:
    the harness times and feeds with the torch its workload uses, and imports none itself."""
    return torch if torch is not None else sys.modules.get("torch")


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    spec = json.loads(Path(argv[0]).read_text())
    out_path = Path(argv[1])
    # Where a process's seconds go, by phase: most of them are often not the decode steps.
    timings: dict[str, float] = {}
    clock = time.perf_counter()

    def phase(name: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        timings[name] = timings.get(name, 0.0) + now - clock
        clock = now

    result: dict[str, Any] = {
        "protocol": PROTOCOL_VERSION,
        "arm": spec.get("arm"),
        "repeat": spec.get("repeat"),
        "pid": os.getpid(),
        "started_at": time.time(),
        "timings_s": timings,
        "environment": environment(None),
    }
    if spec.get("protocol", PROTOCOL_VERSION) != PROTOCOL_VERSION:
        message = (f"the guard speaks harness protocol {spec['protocol']} and this harness {PROTOCOL_VERSION}: "
                   "they come from different installs of the guard; run the harness of the guard that runs it")
        result["error"] = {"stage": "spec", "type": "ProtocolMismatch", "message": message, "traceback": ""}
        out_path.write_text(json.dumps(result))
        log(f"failed at spec: {message}")
        return 3
    if spec.get("cpus"):
        # before torch starts its threads: they, and the host side of every step (launches,
        # the copy back, Python), stay on these cores in every process
        try:
            os.sched_setaffinity(0, spec["cpus"])
        except (OSError, ValueError) as exc:
            message = f"could not pin this process to CPUs {spec['cpus']}: {exc}; check measure.cpus"
            result["error"] = {"stage": "pin", "type": type(exc).__name__, "message": message, "traceback": ""}
            out_path.write_text(json.dumps(result))
            log(f"failed at pin: {message}")
            return 3
    # torch is imported where the work needs it, and only there: several ranks join through
    # torch.distributed before the workload is made, and a workload that imports it (every GPU
    # engine) has it on loading; one that does not (a pure-Python test workload) never pays for it
    world_size = int(spec.get("world_size", 1))
    torch = _import_torch() if world_size > 1 else None
    if torch is not None:
        phase("import torch")
    stage = "join ranks"
    result["fingerprint"] = {"before": {"available": False, "reason": "the process failed before it looked"}}
    try:
        peers = ranks.join(torch, world_size)
        if peers.world_size > 1:
            result |= {"rank": peers.rank, "world_size": peers.world_size}
            phase("join ranks")
        stage = "load"
        root = Path(spec["root"])
        factory = load_entry(spec["entry"], root)
        torch = loaded_torch(torch)
        phase("import")  # the workload's module, and torch with it where it uses torch
        result["fingerprint"]["before"] = _fingerprint(torch)  # GPU fingerprint, before the workload is made
        result["environment"] = environment(torch)
        phase("fingerprint")
        stage = "make"
        workload = factory(**spec.get("options", {}))
        if torch is None and (torch := loaded_torch(None)) is not None:  # imported as it was made
            result["environment"] = environment(torch)
        phase("engine")
        for name in ("setup", "step"):
            if not callable(getattr(workload, name, None)):
                raise WorkloadError(f"the object returned by {spec['entry']} has no {name}() method")
        forcing = accepts_tokens(workload)
        result["accepts_tokens"] = forcing
        if spec.get("mode") == "reference":
            runs = []
            for batch_size in spec["batch_sizes"] if forcing else []:  # nothing to force a free-running one with
                stage = f"reference pass, batch size {batch_size}"
                log(f"reference: batch size {batch_size}, free-running greedy decode")
                runs.append(reference_batch(workload, torch, batch_size, spec["steps"], spec["warmup_steps"],
                                            spec.get("profile_steps", 0)))
            schedule = mix_schedule(spec)
            if schedule is not None and forcing:
                stage = "reference pass, batch-size mix"
                result["mix"] = reference_mix(workload, torch, schedule, spec["steps"], spec["warmup_steps"],
                                              spec.get("profile_steps", 0))
            phase("reference passes")
            result |= {"runs": runs, "finished_at": time.time(), "compile": compile_stats()}
            out_path.write_text(json.dumps(result))
            return 0
        references = load_reference(spec["reference"], spec.get("reference_sha256")) if (
            spec.get("reference") and forcing) else {}

        def compiled() -> None:
            """What dynamo compiled so far, after each pass's warmup (cumulative: the last one stands)."""
            found = dynamo.record(root)
            if found is not None:
                result["dynamo"] = found
        runs = []
        for batch_size in spec["batch_sizes"]:
            stage = f"batch size {batch_size}"
            reference = references.get(batch_size)
            if spec.get("reference") and forcing and reference is None:
                raise WorkloadError(f"the reference tokens have no batch size {batch_size}")
            log(f"{spec.get('arm')} repeat {spec.get('repeat')}: batch size {batch_size}, "
                f"{spec['warmup_steps']} warmup + {spec['steps']} timed steps"
                + (", inputs forced" if reference is not None else ""))
            torch = loaded_torch(torch)
            runs.append(run_batch(workload, torch, batch_size, spec["steps"], spec["warmup_steps"], reference,
                                  spec.get("tok_per_s_min_s", 0.0), spec.get("warmup_max_s", 0.0), phase,
                                  spec.get("tok_per_s_window_s", host.WINDOW_S), peers, compiled))
        schedule = mix_schedule(spec)
        if schedule is not None:
            stage = "batch-size mix"
            log(f"{spec.get('arm')} repeat {spec.get('repeat')}: batch-size mix up to {max(schedule)}, "
                f"{spec['warmup_steps']} warmup + {spec['steps']} timed steps")
            torch = loaded_torch(torch)
            result["mix"] = run_mix(workload, torch, schedule, spec["steps"], spec["warmup_steps"],
                                    references.get("mix"), spec.get("warmup_max_s", 0.0),
                                    spec.get("tok_per_s_window_s", host.WINDOW_S), peers, compiled)
            phase("batch-size mix")
        # Profiled passes come after every timed pass, the mix's included: a profiler session
        # leaves the process slower (H200: +22% GPU time per step afterwards;
        # benchmarks/profiler_aftereffect.py). The mix first, then the last batch size: the
        # setup() still in place, which a workload can reuse, comes first.
        profile_steps = spec.get("profile_steps", 0)
        mix = result.get("mix")
        # the mix's on a GPU alone: on a CPU nothing reads a mix's trace across ranks yet
        if schedule is not None and mix is not None and profile_steps and mix["timer"] == "cuda_event" \
                and spec.get("trace_dir"):
            stage = "profiled pass, batch-size mix"
            log(f"{spec.get('arm')} repeat {spec.get('repeat')}: batch-size mix, {profile_steps} profiled steps")
            phase("timed passes")
            mix |= profile_mix(workload, torch, schedule, spec["warmup_steps"], profile_steps,
                               Path(spec["trace_dir"]) / trace_name(spec, peers, "mix"), phase, references.get("mix"))
        for run in reversed(runs):
            profile_steps = profiled_steps(spec, run["timer"], peers)
            if not profile_steps:
                continue
            batch_size = run["batch_size"]
            stage = f"profiled pass, batch size {batch_size}"
            log(f"{spec.get('arm')} repeat {spec.get('repeat')}: batch size {batch_size}, "
                f"{profile_steps} profiled steps")
            name = trace_name(spec, peers, f"bs{batch_size}")
            phase("timed passes")  # what came between: nothing to speak of
            run |= profile_batch(
                workload, torch, batch_size, spec["warmup_steps"], profile_steps, Path(spec["trace_dir"]) / name,
                phase, references.get(batch_size),
            )
        result["runs"] = runs
        teardown = getattr(workload, "teardown", None)
        if callable(teardown):
            teardown()
    except Exception as exc:  # everything the workload raises is reported, not lost
        result["error"] = {
            "stage": stage,
            "type": type(exc).__name__,
            "message": str(exc),
            "traceback": traceback.format_exc(),
        }
        result["failed_at"] = time.monotonic()  # one clock for the host: which rank failed first
        result["fingerprint"]["after"] = _fingerprint(torch)  # GPU fingerprint
        out_path.write_text(json.dumps(result))
        log(f"failed at {stage}: {type(exc).__name__}: {exc}")
        return 3
    result["finished_at"] = time.time()
    result["compile"] = compile_stats()  # what torch.compile cost it, and what the arm's cache gave
    result["fingerprint"]["after"] = _fingerprint(torch)  # GPU fingerprint
    phase("fingerprint")
    out_path.write_text(json.dumps(result))
    return 0


def finish(code: int) -> None:
    """End the process now that its result is written, without the interpreter's teardown:
    with torch loaded that is most of a second per process, spent on nothing the guard reads
    (benchmarks/time_to_verdict.py). The workload's teardown() has run by then."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    finish(main(sys.argv[1:]))
