"""Run the harness once per (arm, repeat), each in a fresh process of the arm's interpreter
(a process per rank, started together, for a workload of several ranks)."""

from __future__ import annotations

import json
import os
import socket
import time
from contextlib import ExitStack
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any, Callable, Protocol

from pydantic import BaseModel, InstanceOf, ValidationError

from guard._errors import ConfigError
from guard.config import Workload
from guard.harness import HARNESS_SCRIPT, PROTOCOL_VERSION, Spec, draw_schedule, pass_lengths
from guard.measure import _clock as clock
from guard.measure._compile_cache import compile_cache_environment
from guard.measure._disagreements import UNCOUNTED, with_disagreements
from guard.measure._figures import StepsMissing, with_figures
from guard.measure._in_container import MAX_RESULT_BYTES, container_environment, run_in_container
from guard.measure._models import ArmMeasurement, ClockMisfit, ReferenceTokens, RepeatResult
from guard.measure._ranks import RanksDiffer, merge_ranks
from guard.measure._schedule import interleave
from guard.sandbox import (
    DEFAULT_PR_USER, Box, Container, ContainerError, Launch, LaunchError, launch, pr_environment, pr_user,
    seal, seal_children, shared_folder, writable_file,
)

LOG_TAIL_LINES = 30
HARNESS_FAILED = 3  # the harness's exit code when the workload failed (its result says how)
# Every rank's, whatever the arm's environment says: NVLink multicast (NVLS) stays off, as
# the machines the guard measures on are set up without it
NO_MULTICAST = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


class ArmTarget(BaseModel):
    """Where and how an arm's harness runs."""

    name: str
    python: Path
    worktree: Path
    box: InstanceOf[Box]  # the run's, which its processes run in (not in a container)
    env: dict[str, str] = {}
    pass_env: list[str] = []  # variables beyond the allowlist that the arm may see (build.pass_env)
    user: str = DEFAULT_PR_USER  # who its processes run as when the guard is root (build.user)
    cpus: list[int] = []  # the CPUs its processes may run on (measure.cpus); empty: wherever the OS puts them
    container: Container | None = None  # build.method "docker": its processes run in this image, not `python`
    # the folder its processes share torch.compile's caches in (measure.compile_cache; not in a container)
    compile_cache: Path | None = None


class Harness(Protocol):
    """Runs one harness process of `target` (a process per rank, started together) on `spec`,
    its files named `stem` in `run_dir`, and answers each rank's result JSON in rank order, or
    raises RunFailed. `run_ranks` starts the arm's interpreter in its sandbox; a test's stand-in
    answers as a process would, in-process."""

    def __call__(self, target: ArmTarget, spec: dict[str, Any], stem: str, run_dir: Path, timeout_s: float,
                 repeat: int = 0) -> list[dict[str, Any]]: ...


# the windows the warmup settles by and each one's host state is read at: a window shorter than
# that is one pause away from being 10% off (tok/s itself is tokens over the whole decode)
TOK_PER_S_WINDOW_S = 0.1


class HarnessSpec(Workload):
    """The workload as the harness is given it, with what only the harness needs."""

    tok_per_s_window_s: float = TOK_PER_S_WINDOW_S
    reference: str | None = None  # reference-tokens file that forces every step's input (see _reference)
    reference_sha256: str | None = None  # of that file as the guard wrote it: the harness checks it
    batch_mix_steps: list[int] | None = None  # batch_mix_file's sizes, read by the guard from the base commit

    def mix_schedule(self) -> list[int] | None:
        """The mix pass's active batch size per step, as every process draws it; None: no mix."""
        if self.batch_mix is None and self.batch_mix_steps is None:
            return None
        return draw_schedule(pass_lengths(self.warmup_steps, self.steps, self.profile_steps), self.batch_mix_seed,
                             self.batch_mix, self.batch_mix_steps)

    @classmethod
    def of(cls, workload: Workload, **more: Any) -> HarnessSpec:
        """The spec of `workload` (the config's, say), the workload's own fields as they are."""
        return cls(**workload.model_dump(include=set(Workload.model_fields)), **more)


def run_interleaved(
    targets: list[ArmTarget],
    spec: HarnessSpec,
    repeats: int,
    run_dir: Path,
    timeout_s: float,
    progress: Callable[[str], None] = lambda _: None,
    first_repeat: int = 0,
    reference: ReferenceTokens | None = None,
    harness: Harness | None = None,
) -> dict[str, ArmMeasurement]:
    """Run every arm `repeats` times, alternating arms in mirrored rounds. An arm that fails stops being
    scheduled; the others go on, so their results are kept. Repeat indices start at
    `first_repeat`, so a confirmation round does not overwrite the first round's files.
    With `reference` (and `spec.reference` its file) every process is forced from it. `harness`
    runs each process (default `run_ranks`)."""
    if (reference is None) != (spec.reference is None):
        raise ValueError("run_interleaved: give the reference tokens and spec.reference together")
    run_dir = run_dir.resolve()  # the harness runs in the arm's worktree: a relative path would miss
    run_dir.mkdir(parents=True, exist_ok=True)
    by_name = {t.name: t for t in targets}
    results = {t.name: ArmMeasurement(arm=t.name) for t in targets}
    order = interleave([t.name for t in targets], repeats, first_repeat)
    last = first_repeat + repeats
    for index, (arm, repeat) in enumerate(order, start=1):
        measurement = results[arm]
        if measurement.error is not None:
            continue
        started = time.perf_counter()
        try:
            # the trace comparison needs a couple per arm: a confirmation round adds none
            profiled = not spec.profile_repeats or repeat < spec.profile_repeats
            result = _run_one(by_name[arm], spec if profiled else spec.model_copy(update={"profile_steps": 0}),
                              repeat, run_dir, timeout_s, reference, harness or run_ranks)
        except RunFailed as failed:
            measurement.error = failed.message
            measurement.log_tail = failed.details()
            measurement.clock_misfit = failed.misfit
            progress(f"[{index}/{len(order)}] {arm} repeat {repeat + 1}/{last} FAILED: {failed.message}")
            if failed.frames:
                progress(failed.frames)
            continue
        result = result.model_copy(update={"process_s": time.perf_counter() - started})
        measurement.repeats.append(result)
        figures = [f"bs {r.batch_size}: {r.gpu_ms_per_step:.3f} ms/step (mean)" for r in result.runs]
        if result.mix is not None and result.mix.step_ms:
            figures.append(f"mix: {sum(result.mix.step_ms) / len(result.mix.step_ms):.3f} ms/step (mean)")
        timings = ", ".join(figures)
        if result.world_size > 1:
            timings += f" (each step its slowest rank's, of {result.world_size})"
        progress(
            f"[{index}/{len(order)}] {arm} repeat {repeat + 1}/{last} "
            f"({_where_seconds_went(result)}){_compile_cost(result)}: {timings}"
        )
    return results


def _where_seconds_went(result: RepeatResult) -> str:
    """'TOTAL s: PHASE SECONDS, ...': the process's phases of a tenth of a second or more, largest first."""
    total = result.process_s or 0.0
    phases = dict(result.timings_s)
    if phases:
        phases["start and exit"] = max(0.0, total - sum(phases.values()))
    shown = sorted(((s, name) for name, s in phases.items() if s >= 0.1), reverse=True)
    return f"{total:.1f} s" + (": " + ", ".join(f"{name} {s:.1f}" for s, name in shown) if shown else "")


def _compile_cost(result: RepeatResult) -> str:
    """' [torch.compile S s, FX graph cache H hit M miss]', where the process compiled; else ''."""
    stats = result.compile
    if stats is None:
        return ""
    fx = stats.fx_graph
    return f" [torch.compile {stats.compile_s:.1f} s, FX graph cache {fx.hit} hit {fx.miss} miss]"


class RunFailed(Exception):
    def __init__(self, message: str, log_tail: str, misfit: ClockMisfit | None = None, frames: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.log_tail = log_tail
        self.misfit = misfit  # the guard's clock refused the process: the facts, for the report
        self.frames = frames  # what the workload raised: its traceback's last frames (`workload_frames`)

    def details(self) -> str:
        """The frames, then the log's tail: what the failure fold of the comment shows."""
        return "\n\n".join(part for part in (self.frames, self.log_tail) if part)


MOST_FRAMES = 6  # a failing workload's last frames shown in the log and the comment
_HARNESS_DIR = str(HARNESS_SCRIPT.parent)


def workload_frames(traceback_text: str) -> str:
    """The last MOST_FRAMES frames of a traceback the harness kept, without the harness's own,
    and the exception line: where in the workload's files it raised. "" without a traceback."""
    lines = traceback_text.rstrip().splitlines()
    if not lines or not lines[0].startswith("Traceback"):
        return ""
    frames: list[list[str]] = []
    tail: list[str] = []
    for line in lines[1:]:
        if line.startswith('  File "'):
            frames.append([line])
        elif line.startswith("    ") and frames and not tail:
            frames[-1].append(line)
        else:
            tail.append(line)  # the exception line (and any chained one's header)
    own = [f for f in frames if not f[0].startswith(f'  File "{_HARNESS_DIR}') and "/guard/harness/" not in f[0]]
    shown = own[-MOST_FRAMES:]
    skipped = len(own) - len(shown)
    head = ["Traceback (most recent call last" + (f"; {skipped} earlier frame(s) left out" if skipped else "") + "):"]
    return "\n".join(head + [line for f in shown for line in f] + tail[-3:])


def _run_one(
    target: ArmTarget, spec: HarnessSpec, repeat: int, run_dir: Path, timeout_s: float,
    reference: ReferenceTokens | None, harness: Harness,
) -> RepeatResult:
    stem = f"{target.name}-{repeat}"
    if reference is not None and spec.reference is not None:
        # written again before every process, from the guard's own copy: an earlier process
        # (the arm's code) may have changed the file, and the harness checks its hash
        Path(spec.reference).write_text(reference.model_dump_json())
    answers = harness(target, spec.model_dump(), stem, run_dir, timeout_s, repeat=repeat)
    schedule = spec.mix_schedule()
    results = []
    for rank, data in enumerate(answers):
        name = stem if len(answers) == 1 else rank_stem(stem, rank)
        try:
            # every figure the guard's own, from the step times the process lists (measure/_figures.py)
            result = with_figures(RepeatResult.model_validate(data), spec.steps, spec.warmup_steps, schedule)
        except ValidationError as exc:
            raise RunFailed(f"harness result {run_dir / name}.json is malformed: {exc}",
                            _tail(run_dir / f"{name}.log")) from None
        except StepsMissing as exc:
            raise RunFailed(f"harness result {run_dir / name}.json is refused: {exc} (the guard takes a "
                            "process's figures from its step times alone)", _tail(run_dir / f"{name}.log")) from None
        _check_traces(result, run_dir / "traces", run_dir / name)
        _check_clock(result, run_dir / name, repeat)
        results.append(result)
    try:
        result = merge_ranks(results)
    except (RanksDiffer, StepsMissing) as exc:
        raise RunFailed(f"the ranks of {stem} do not line up: {exc}", "") from None
    if reference is None:  # nothing was forced, whatever the process says
        unforced = UNCOUNTED | {"forced": False}
        return result.model_copy(update={"runs": [r.model_copy(update=unforced) for r in result.runs],
                                         "mix": result.mix.model_copy(update=unforced) if result.mix else None})
    # the guard counts, from the ids the process generated and its own copy of the reference
    return with_disagreements(result, reference)


def run_ranks(
    target: ArmTarget, spec: dict[str, Any], stem: str, run_dir: Path, timeout_s: float, repeat: int = 0
) -> list[dict[str, Any]]:
    """The result JSON of each rank, in rank order (one process: `run_harness`), or RunFailed."""
    world = int(spec.get("world_size", 1))
    if world == 1:
        return [run_harness(target, spec, stem, run_dir, timeout_s, repeat=repeat)]
    if target.container is not None:  # the config refuses it; said here too for a caller that did not check
        raise RunFailed("a workload of several ranks runs without a container (build.method venv or none)", "")
    port = free_port()
    cpus = split_cpus(target.cpus, world)
    user = pr_user(target.user)
    trace_dir = run_dir / "traces"
    shared_folder(user, trace_dir)
    base_env = _process_environment(target)
    stems = [rank_stem(stem, rank) for rank in range(world)]
    launches = []
    with ExitStack() as logs:
        watches = [logs.enter_context(clock.watching()) for _ in stems]
        for rank, name in enumerate(stems):
            spec_path = run_dir / f"{name}.spec.json"
            spec_path.write_text(json.dumps(_payload(target, spec, repeat, trace_dir) | {"cpus": cpus[rank]},
                                            indent=2))
            writable_file(user, run_dir / f"{name}.json")
            log = logs.enter_context((run_dir / f"{name}.log").open("w"))
            cmd = [str(target.python), str(HARNESS_SCRIPT), str(spec_path), str(run_dir / f"{name}.json")]
            fd = watches[rank].fd
            assert fd is not None
            launches.append(Launch(cmd, log, cwd=target.worktree,
                                   env=base_env | rank_environment(rank, world, port) | {clock.CLOCK_ENV: str(fd)},
                                   user=user, reads=[target.python, HARNESS_SCRIPT, spec_path, *_cache(target)],
                                   pass_fds=[fd], owner=target.name))
        try:
            with target.box.temp.handed_over(user, _cache(target)):
                ended = launch(target.box, launches, timeout_s=timeout_s)
        except LaunchError as exc:
            raise RunFailed(exc.message, "") from None
        except OSError as exc:
            raise RunFailed(f"could not start {target.python}: {exc}", "") from None
        finally:
            if user is not None:  # what they wrote is the guard's now
                for name in stems:
                    seal(user, run_dir / f"{name}.json")
                seal_children(user, trace_dir)
    # the rank that failed first is the one to name: the others failed or were ended because of it
    first = _first_failed(ended.codes, run_dir, stems)
    order = ([first] if first is not None else []) + [r for r in range(world) if r != first]
    answers: dict[int, dict[str, Any]] = {}
    for rank in order:
        name = stems[rank]
        code = ended.codes[rank]
        if code is None and rank == first:  # ended by the guard as it exited: answered by the failure it wrote
            code = HARNESS_FAILED
        try:
            data = _harness_answer(code, run_dir / f"{name}.json", run_dir / f"{name}.log", timeout_s)
        except RunFailed as failed:
            raise RunFailed(f"rank {rank} of {world}: {failed.message}", failed.log_tail,
                            frames=failed.frames) from None
        if data.get("rank", rank) != rank:
            raise RunFailed(f"rank {rank} of {world}: its result says rank {data.get('rank')!r}", "")
        answers[rank] = data | _seen(watches[rank])
    return [answers[rank] for rank in range(world)]


def _first_failed(codes: list[int | None], run_dir: Path, stems: list[str]) -> int | None:
    """Of the ranks that failed (exited non-zero, or wrote a failure before they were ended),
    the one whose result says it failed first: a rank whose peer died fails too, a moment
    later. None when none did."""
    def when(rank: int) -> float | None:
        data = _read_result(run_dir / f"{stems[rank]}.json", run_dir / f"{stems[rank]}.log")
        at = data.get("failed_at") if data is not None else None
        return float(at) if isinstance(at, (int, float)) and not isinstance(at, bool) else None

    stamped = {rank: at for rank in range(len(codes)) if (at := when(rank)) is not None}
    if stamped:
        return min(stamped, key=lambda rank: (stamped[rank], rank))
    return next((rank for rank, code in enumerate(codes) if code not in (None, 0)), None)


def rank_stem(stem: str, rank: int) -> str:
    """The files of one rank of a process: STEM.rankR.json, .log and .spec.json."""
    return f"{stem}.rank{rank}"


def rank_environment(rank: int, world: int, port: int) -> dict[str, str]:
    """What torch.distributed's env:// rendezvous reads, on this host, and NVLink multicast off."""
    return {"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(world), "LOCAL_WORLD_SIZE": str(world),
            "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)} | NO_MULTICAST


def free_port() -> int:
    """A TCP port on loopback that no one listens on now, for one launch's rendezvous."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def split_cpus(cpus: list[int], world: int) -> list[list[int]]:
    """measure.cpus shared out among the ranks, in runs of neighbours (none: unpinned); the
    last rank takes what does not divide."""
    if not cpus:
        return [[] for _ in range(world)]
    each = len(cpus) // world
    return [cpus[rank * each: (rank + 1) * each if rank < world - 1 else len(cpus)] for rank in range(world)]


def _payload(target: ArmTarget, spec: dict[str, Any], repeat: int, trace_dir: Path) -> dict[str, Any]:
    """The spec file's object: the harness's fields of `spec`, where and as what this process runs."""
    given = {f.name: spec[f.name] for f in fields(Spec) if f.name in spec}
    return asdict(Spec(**given | {
        "root": str(target.worktree),
        "arm": target.name,
        "repeat": repeat,
        "trace_dir": str(trace_dir),
        "cpus": target.cpus,  # the harness pins itself before it imports torch
        "protocol": PROTOCOL_VERSION,
    }))


def run_harness(
    target: ArmTarget, spec: dict[str, Any], stem: str, run_dir: Path, timeout_s: float, repeat: int = 0
) -> dict[str, Any]:
    """One harness process in the arm's environment; its result JSON, or RunFailed."""
    spec_path = run_dir / f"{stem}.spec.json"
    result_path = run_dir / f"{stem}.json"
    log_path = run_dir / f"{stem}.log"
    trace_dir = run_dir / "traces"
    payload = _payload(target, spec, repeat, trace_dir)
    spec_path.write_text(json.dumps(payload, indent=2))
    if target.container is not None:
        exit_code = _run_contained(target, target.container, payload, run_dir / f"{stem}.box", result_path,
                                   trace_dir, log_path, timeout_s)
        return _harness_answer(exit_code, result_path, log_path, timeout_s) | _seen(None)
    # the process (the arm's code) may write its result file and add traces, nothing else here
    user = pr_user(target.user)
    writable_file(user, result_path)
    shared_folder(user, trace_dir)
    env = _process_environment(target)
    cmd = [str(target.python), str(HARNESS_SCRIPT), str(spec_path), str(result_path)]
    with log_path.open("w") as log, clock.watching() as watch:
        assert watch.fd is not None
        try:
            # the arm's to write while its process runs, sealed after
            with target.box.temp.handed_over(user, _cache(target)):
                one = Launch(cmd, log, cwd=target.worktree, env=env | {clock.CLOCK_ENV: str(watch.fd)}, user=user,
                             reads=[target.python, HARNESS_SCRIPT, spec_path, *_cache(target)], pass_fds=[watch.fd],
                             owner=target.name)
                exit_code = launch(target.box, [one], timeout_s=timeout_s).codes[0]
        except LaunchError as exc:
            raise RunFailed(exc.message, "") from None
        except OSError as exc:
            raise RunFailed(f"could not start {target.python}: {exc}", "") from None
        finally:
            if user is not None:  # what it wrote is the guard's now: a later process cannot change it
                seal(user, result_path)
                seal_children(user, trace_dir)
    return _harness_answer(exit_code, result_path, log_path, timeout_s) | _seen(watch)


def _seen(watch: clock.Watch | None) -> dict[str, Any]:
    """What the guard saw of a process's passes on its own clock, put over whatever the
    process's result said of it: None where the guard did not watch (in a container)."""
    passes = watch.passes() if watch is not None else None
    return {"clock_watched": watch is not None,
            "seen_passes": [p.model_dump() for p in passes] if passes is not None else None}


def _process_environment(target: ArmTarget) -> dict[str, str]:
    """A harness process's environment: the allowlist, the arm's own variables, its compile cache."""
    given = pr_environment(target.pass_env) | target.env
    return compile_cache_environment(target.compile_cache, given) | {"PYTHONUNBUFFERED": "1"}


def _cache(target: ArmTarget) -> list[Path]:
    return [target.compile_cache] if target.compile_cache is not None else []


def _run_contained(
    target: ArmTarget, container: Container, payload: dict[str, Any], box: Path, result_path: Path, trace_dir: Path,
    log_path: Path, timeout_s: float,
) -> int | None:
    env = container_environment(target.pass_env, target.env)
    with log_path.open("wb") as log:
        try:
            return run_in_container(target.box, container, payload, box, result_path, trace_dir, log, timeout_s,
                                    env, target.cpus)
        except ContainerError as exc:
            raise RunFailed(exc.message, "") from None


def _harness_answer(exit_code: int | None, result_path: Path, log_path: Path, timeout_s: float) -> dict[str, Any]:
    """The result of a harness process that ended with `exit_code`, or RunFailed."""
    if exit_code is None:
        raise RunFailed(f"timed out after {timeout_s:.0f} s (measure.timeout_s)", _tail(log_path))
    data = _read_result(result_path, log_path)
    if data is not None and "error" in data:
        err = data["error"] if isinstance(data["error"], dict) else {"message": data["error"]}
        raise RunFailed(f"{err.get('type')} at {err.get('stage')}: {err.get('message')}", _tail(log_path),
                        frames=workload_frames(str(err.get("traceback") or "")))
    if exit_code != 0 or data is None:
        raise RunFailed(f"harness exited with code {exit_code} and no result", _tail(log_path))
    # every harness writes its version first; a result without one is malformed, which its
    # model says next (the arm's code may have written the file itself)
    if "protocol" in data and data["protocol"] != PROTOCOL_VERSION:
        raise RunFailed(
            f"the harness answered in protocol {data['protocol']!r}, the guard reads {PROTOCOL_VERSION}: "
            f"{HARNESS_SCRIPT} and the guard come from different installs; reinstall the guard", _tail(log_path))
    return data


def _check_traces(result: RepeatResult, trace_dir: Path, stem: Path) -> None:
    """A trace the guard reads must be a file the process wrote in the traces folder: the
    result names it, and the guard, perhaps root, must not read another file for it."""
    for trace in [run.trace for run in result.runs] + [result.mix.trace if result.mix else None]:
        if trace is None:
            continue
        path = Path(trace)
        if path.parent != trace_dir or not path.is_file() or path.is_symlink():
            raise RunFailed(f"harness result {stem}.json names the trace {trace}, which is not a file the "
                            f"process wrote in {trace_dir}", "")


def _check_clock(result: RepeatResult, stem: Path, repeat: int) -> None:
    """A process's step times must fit the passes the guard saw on its own clock."""
    if not result.clock_watched:
        return
    misfit = clock.misfit(clock.claims(result), result.seen_passes)
    if misfit is not None:  # the report words it from the facts (guard/report/_reason_text.py)
        raise RunFailed(f"harness result {stem}.json is refused: its timings do not fit the guard's clock "
                        f"({misfit.why})", "", misfit.model_copy(update={"repeat": repeat}))


def check_cpus(cpus: list[int]) -> None:
    """measure.cpus must be CPUs this process, and so its children, may run on."""
    if not cpus:
        return
    usable = sorted(os.sched_getaffinity(0))
    missing = sorted(set(cpus) - set(usable))
    if missing:
        raise ConfigError(
            f"measure.cpus lists CPU(s) {', '.join(map(str, missing))}, but the guard may only run on "
            f"{', '.join(map(str, usable))} here; list CPUs from those, or leave measure.cpus empty"
        )


def _read_result(path: Path, log_path: Path) -> dict[str, Any] | None:
    """The result object the harness wrote; None when there is none. The arm's code ran in
    that process and may have written the file itself: it is read as data, bounded."""
    try:
        with path.open("rb") as f:
            text = f.read(MAX_RESULT_BYTES + 1)
    except OSError:
        return None
    if len(text) > MAX_RESULT_BYTES:
        raise RunFailed(f"its result {path.name} is over {MAX_RESULT_BYTES >> 20} MiB, far more than "
                        "timings and token ids take", _tail(log_path))
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):  # RecursionError: nested deeper than any result is
        return None
    return data if isinstance(data, dict) else None


def _tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""
