"""Run a decode workload in this process and write its timings and tokens as JSON.

Usage: python run.py SPEC.json RESULT.json

SPEC and RESULT are `Spec` and `Result` of _protocol.py. A "reference" process decodes
free-running, untimed, and writes the ids every measured process is then forced with. Exit
codes: 0 done, 3 the workload failed or the spec was refused (RESULT.json then holds "error").
Imports only the standard library and torch: this file runs in the arm's environment.
"""

import os
import sys
import time
import traceback
import types
from pathlib import Path
from typing import Any


def _mount(name: str = "_guard_harness") -> None:
    """This folder as a package of its own, so that its modules import each other however
    this file is started (as a script, with -I or -P, or imported) and nothing of the guard."""
    if name not in sys.modules:
        package = types.ModuleType(name)
        package.__path__ = [str(Path(__file__).resolve().parent)]
        sys.modules[name] = package


_mount()
from _guard_harness._compile_stats import compile_stats  # noqa: E402
from _guard_harness._dynamo import record as dynamo_record  # noqa: E402
from _guard_harness._env import environment, fingerprint  # noqa: E402
from _guard_harness._mix_passes import mix_schedule, profile_mix, reference_mix, run_mix  # noqa: E402
from _guard_harness._passes import Process, reference_batch, run_batch  # noqa: E402
from _guard_harness._profile import profile_batch, profiled_steps, trace_name  # noqa: E402
from _guard_harness._protocol import PROTOCOL_VERSION, Failure, Result, SpecError, read_spec  # noqa: E402
from _guard_harness._ranks import join  # noqa: E402
from _guard_harness._workload import (  # noqa: E402
    WorkloadError, accepts_tokens, load_entry, load_reference, loaded_torch, log,
)


class Phases:
    """Where a process's seconds go, by phase: most of them are often not the decode steps.
    Called with a phase's name as it ends."""

    def __init__(self) -> None:
        self.timings: dict[str, float] = {}
        self.clock = time.perf_counter()

    def __call__(self, name: str) -> None:
        now = time.perf_counter()
        self.timings[name] = self.timings.get(name, 0.0) + now - self.clock
        self.clock = now


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    out_path = Path(argv[1])
    phase = Phases()
    result = Result(protocol=PROTOCOL_VERSION, arm=None, repeat=None, pid=os.getpid(), started_at=time.time(),
                    timings_s=phase.timings, environment=environment(None))
    try:
        spec = read_spec(Path(argv[0]).read_text())
    except SpecError as exc:
        result.arm, result.repeat = exc.given.get("arm"), exc.given.get("repeat")
        return refused(result, out_path, "spec", type(exc).__name__, str(exc))
    result.arm, result.repeat = spec.arm, spec.repeat
    if spec.cpus:
        # before torch starts its threads: they, and the host side of every step (launches,
        # the copy back, Python), stay on these cores in every process
        try:
            os.sched_setaffinity(0, spec.cpus)
        except (OSError, ValueError) as exc:
            return refused(result, out_path, "pin", type(exc).__name__,
                           f"could not pin this process to CPUs {spec.cpus}: {exc}; check measure.cpus")
    result.fingerprint = {"before": {"available": False, "reason": "the process failed before it looked"}}
    work = Work(Process(None, None, spec, phase=phase), result)
    try:
        work.run()
    except Exception as exc:  # everything the workload raises is reported, not lost
        result.error = Failure(work.stage, type(exc).__name__, str(exc), traceback.format_exc())
        result.failed_at = time.monotonic()  # one clock for the host: which rank failed first
        result.fingerprint["after"] = fingerprint(work.process.torch)
        out_path.write_text(result.json())
        log(f"failed at {work.stage}: {type(exc).__name__}: {exc}")
        return 3
    out_path.write_text(result.json())
    return 0


def refused(result: Result, out_path: Path, stage: str, kind: str, message: str) -> int:
    """The process ends before it loads the workload: its result says why."""
    result.error = Failure(stage, kind, message)
    out_path.write_text(result.json())
    log(f"failed at {stage}: {message}")
    return 3


class Work:
    """A harness process's stages after its spec is read: join the ranks, load and make the
    workload, then its reference pass or its timed and profiled passes, into `result`.
    `stage` names the one it is at, for a failure."""

    def __init__(self, process: Process, result: Result) -> None:
        self.process, self.result, self.stage = process, result, "join ranks"
        process.after_warmup = self.compiled

    def run(self) -> None:
        p, spec = self.process, self.process.spec
        # torch is imported where the work needs it, and only there: several ranks join through
        # torch.distributed before the workload is made, and a workload that imports it (every GPU
        # engine) has it on loading; one that does not (a pure-Python test workload) never pays for it
        p.torch = _import_torch() if spec.world_size > 1 else None
        if p.torch is not None:
            p.phase("import torch")
        p.peers = join(p.torch, spec.world_size)
        if p.peers.world_size > 1:
            self.result.rank, self.result.world_size = p.peers.rank, p.peers.world_size
            p.phase("join ranks")
        self.make()
        self.result.accepts_tokens = accepts_tokens(p.workload)
        if spec.mode == "reference":
            self.reference()
            return
        self.measure()
        self.result.finished_at = time.time()
        self.result.compile = compile_stats()  # what torch.compile cost it, and what the arm's cache gave
        self.result.fingerprint["after"] = fingerprint(p.torch)
        p.phase("fingerprint")

    def make(self) -> None:
        """The workload, loaded from its entry point and made with the spec's options."""
        p, spec, result = self.process, self.process.spec, self.result
        self.stage = "load"
        factory = load_entry(spec.entry, Path(spec.root))
        p.torch = loaded_torch(p.torch)
        p.phase("import")  # the workload's module, and torch with it where it uses torch
        result.fingerprint["before"] = fingerprint(p.torch)  # before the workload is made
        result.environment = environment(p.torch)
        p.phase("fingerprint")
        self.stage = "make"
        p.workload = factory(**spec.options)
        if p.torch is None and (torch := loaded_torch(None)) is not None:  # imported as it was made
            p.torch = torch
            result.environment = environment(torch)
        p.phase("engine")
        for name in ("setup", "step"):
            if not callable(getattr(p.workload, name, None)):
                raise WorkloadError(f"the object returned by {spec.entry} has no {name}() method")

    def compiled(self) -> None:
        """What dynamo compiled so far, after each pass's warmup (cumulative: the last one stands)."""
        found = dynamo_record(Path(self.process.spec.root))
        if found is not None:
            self.result.dynamo = found

    def reference(self) -> None:
        """Free-running passes, untimed, whose ids force every measured process."""
        p, result = self.process, self.result
        runs = []
        for batch_size in p.spec.batch_sizes if result.accepts_tokens else []:  # nothing to force a free one with
            self.stage = f"reference pass, batch size {batch_size}"
            log(f"reference: batch size {batch_size}, free-running greedy decode")
            runs.append(reference_batch(p, batch_size))
        schedule = mix_schedule(p.spec)
        if schedule is not None and result.accepts_tokens:
            self.stage = "reference pass, batch-size mix"
            result.mix = reference_mix(p, schedule)
        p.phase("reference passes")
        result.runs, result.finished_at, result.compile = runs, time.time(), compile_stats()

    def measure(self) -> None:
        """Each batch size's timed passes, the mix's, then the profiled passes, and teardown()."""
        p, spec, result = self.process, self.process.spec, self.result
        forcing = bool(spec.reference and result.accepts_tokens)
        references: dict[Any, list[list[int]]] = (
            load_reference(spec.reference, spec.reference_sha256) if forcing and spec.reference else {})
        runs = []
        for batch_size in spec.batch_sizes:
            self.stage = f"batch size {batch_size}"
            reference = references.get(batch_size)
            if forcing and reference is None:
                raise WorkloadError(f"the reference tokens have no batch size {batch_size}")
            log(f"{spec.arm} repeat {spec.repeat}: batch size {batch_size}, {spec.warmup_steps} warmup + "
                f"{spec.steps} timed steps" + (", inputs forced" if reference is not None else ""))
            p.torch = loaded_torch(p.torch)
            runs.append(run_batch(p, batch_size, reference))
        schedule = mix_schedule(spec)
        if schedule is not None:
            self.stage = "batch-size mix"
            log(f"{spec.arm} repeat {spec.repeat}: batch-size mix up to {max(schedule)}, "
                f"{spec.warmup_steps} warmup + {spec.steps} timed steps")
            p.torch = loaded_torch(p.torch)
            result.mix = run_mix(p, schedule, references.get("mix"))
            p.phase("batch-size mix")
        self.profile(runs, schedule, references)
        result.runs = runs
        teardown = getattr(p.workload, "teardown", None)
        if callable(teardown):
            teardown()

    def profile(self, runs: list[Any], schedule: list[int] | None, references: dict[Any, Any]) -> None:
        """Profiled passes come after every timed pass, the mix's included: a profiler session
        leaves the process slower (H200: +22% GPU time per step afterwards;
        benchmarks/profiler_aftereffect.py). The mix first, then the last batch size: the
        setup() still in place, which a workload can reuse, comes first."""
        p, spec, mix = self.process, self.process.spec, self.result.mix
        trace_dir = Path(spec.trace_dir or "")
        # the mix's on a GPU alone: on a CPU nothing reads a mix's trace across ranks yet
        if schedule is not None and mix is not None and spec.profile_steps and mix.timer == "cuda_event" \
                and spec.trace_dir:
            self.stage = "profiled pass, batch-size mix"
            log(f"{spec.arm} repeat {spec.repeat}: batch-size mix, {spec.profile_steps} profiled steps")
            p.phase("timed passes")
            profiled = profile_mix(p.workload, p.torch, schedule, spec.warmup_steps, spec.profile_steps,
                                   trace_dir / trace_name(spec, p.peers, "mix"), p.phase, references.get("mix"))
            mix.trace, mix.profile_steps = profiled["trace"], profiled["profile_steps"]
        for run in reversed(runs):
            profile_steps = profiled_steps(spec, run.timer, p.peers)
            if not profile_steps:
                continue
            self.stage = f"profiled pass, batch size {run.batch_size}"
            log(f"{spec.arm} repeat {spec.repeat}: batch size {run.batch_size}, {profile_steps} profiled steps")
            p.phase("timed passes")  # what came between: nothing to speak of
            profiled = profile_batch(p.workload, p.torch, run.batch_size, spec.warmup_steps, profile_steps,
                                     trace_dir / trace_name(spec, p.peers, f"bs{run.batch_size}"), p.phase,
                                     references.get(run.batch_size))
            run.trace, run.profile_steps = profiled["trace"], profiled["profile_steps"]


def _import_torch() -> Any:
    try:
        import torch
    except ImportError:
        return None
    return torch


def finish(code: int) -> None:
    """End the process now that its result is written, without the interpreter's teardown:
    with torch loaded that is most of a second per process, spent on nothing the guard reads
    (benchmarks/time_to_verdict.py). The workload's teardown() has run by then."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    finish(main(sys.argv[1:]))
