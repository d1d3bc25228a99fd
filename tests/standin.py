"""A stand-in for the harness processes: answers each one the guard starts as the harness
would (the same JSON, the same files in the run folder), in-process and at once, from a model
of the workload that the test states. With it the whole pipeline (`run_guard`, `calibrate`)
runs in milliseconds, with figures the test knows exactly, so that what it checks is the
guard's decision, not the machine's noise.

The model is a few functions of the process asked for (`Process`: its arm, its repeat, its
number among the run's processes, its spec and the arm's environment):
- `step_ms(process, batch_size)`: the process's milliseconds per step at that batch size
  (every timed step alike), or a list of one per timed step (its one end-to-end pass's, on a
  CPU: the guard's figures are their mean and its tok/s);
- `token(process, batch_size, step, row)`: the id it generates (`step` counts from 1, the
  warmup included);
- `fails(process)`: a message where the process fails, as the harness reports a workload's
  exception;
- `instructions(process, batch_size)`: its host instructions per step, or None where it had no
  counter (as on a machine without one; the default).
A workload whose step() takes ids (`accepts_tokens`) is forced from the reference the guard
writes, as the harness forces it; its own ids are still what `token` says, so a head that
generates others is counted as disagreeing.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from guard.cli import GATE_EXIT
from guard.harness import PROTOCOL_VERSION, draw_schedule, pass_lengths
from guard.harness._protocol import tokens_sha256
from guard.measure import ArmTarget, RunFailed
from guard.pipeline import run_guard
from guard.report import Report, gate

ENVIRONMENT = {"python": "3.11.7", "platform": "Linux-stand-in", "hostname": "stand-in", "cpu": "x86_64",
               "torch": None, "cuda": None, "gpu": None, "gpu_capability": None, "driver": None, "cpus": None}


@dataclass(frozen=True)
class Process:
    """One process the guard asked for, as the model sees it."""

    arm: str
    repeat: int
    number: int  # among the run's processes, from 0: the reference process first where there is one
    mode: str  # "measure" or "reference"
    spec: dict[str, Any]
    env: dict[str, str]  # the arm's own variables (its [[arms]] env)


def busy_token(_process: Process, _batch_size: int, step: int, row: int) -> int:
    """The ids tests/workload_sources.py's busy workload generates."""
    return (step * 7 + row) % 101


def steady(ms: float) -> Callable[[Process, int], float]:
    return lambda _process, _batch_size: ms


@dataclass
class StandIn:
    """A `Harness` (guard.measure) that answers from a model instead of starting processes."""

    step_ms: Callable[[Process, int], float | list[float]] = steady(1.0)
    token: Callable[[Process, int, int, int], int] = busy_token
    fails: Callable[[Process], str | None] = lambda _process: None
    instructions: Callable[[Process, int], float | None] = lambda _process, _batch_size: None
    accepts_tokens: bool = False
    process_s: float = 0.05  # what each process's timings say it took besides its decode
    asked: list[Process] = field(default_factory=list)  # every process asked for, in order

    def __call__(self, target: ArmTarget, spec: dict[str, Any], stem: str, run_dir: Path, timeout_s: float,
                 repeat: int = 0) -> list[dict[str, Any]]:
        process = Process(arm=target.name, repeat=repeat, number=len(self.asked), mode=spec.get("mode") or "measure",
                          spec=spec, env=dict(target.env))
        self.asked.append(process)
        payload = spec | {"root": str(target.worktree), "arm": target.name, "repeat": repeat,
                          "protocol": PROTOCOL_VERSION}
        (run_dir / f"{stem}.spec.json").write_text(json.dumps(payload, indent=2))
        result: dict[str, Any] = {"protocol": PROTOCOL_VERSION, "arm": target.name, "repeat": repeat,
                                  "environment": ENVIRONMENT, "accepts_tokens": self.accepts_tokens,
                                  "timings_s": {"engine": self.process_s}}
        message = self.fails(process)
        if message is not None:
            result["error"] = {"stage": "load", "type": "RuntimeError", "message": message, "traceback": ""}
            (run_dir / f"{stem}.json").write_text(json.dumps(result))
            (run_dir / f"{stem}.log").write_text(f"[harness] failed at load: RuntimeError: {message}\n")
            raise RunFailed(f"RuntimeError at load: {message}", f"[harness] failed at load: RuntimeError: {message}")
        if process.mode == "reference":
            result |= self._reference(process)
        else:
            result["runs"] = [self._batch(process, size) for size in spec["batch_sizes"]]
            if (schedule := _schedule(spec)) is not None:
                result["mix"] = self._mix(process, schedule)
        (run_dir / f"{stem}.json").write_text(json.dumps(result))
        (run_dir / f"{stem}.log").write_text(f"[harness] {target.name} repeat {repeat}: answered by the stand-in\n")
        return [result]

    def _rows(self, process: Process, batch_size: int, steps: int) -> list[list[int]]:
        return [[self.token(process, batch_size, step, row) for row in range(batch_size)]
                for step in range(1, steps + 1)]

    def _reference(self, process: Process) -> dict[str, Any]:
        spec = process.spec
        if not self.accepts_tokens:
            return {"runs": []}
        steps = spec["warmup_steps"] + spec["steps"]
        runs = []
        for size in spec["batch_sizes"]:
            rows = self._rows(process, size, steps)
            runs.append({"batch_size": size, "tokens": rows, "sha256": tokens_sha256(rows)})
        found: dict[str, Any] = {"runs": runs}
        if (schedule := _schedule(spec)) is not None:
            found["mix"] = {"tokens": self._mix_rows(process, schedule, spec["warmup_steps"] + spec["steps"])}
        return found

    def _times(self, process: Process, batch_size: int, steps: int) -> list[float]:
        ms = self.step_ms(process, batch_size)
        return [float(v) for v in ms] if isinstance(ms, list) else [float(ms)] * steps

    def _batch(self, process: Process, batch_size: int) -> dict[str, Any]:
        spec = process.spec
        steps, warmup = spec["steps"], spec["warmup_steps"]
        step_ms = self._times(process, batch_size, steps)
        rows = self._rows(process, batch_size, warmup + steps)
        seconds = sum(step_ms) / 1000
        tok_per_s = batch_size * steps / seconds  # one end-to-end pass, whose steps are `step_ms`
        counted = self.instructions(process, batch_size)
        host = {"voluntary_switches": 0, "involuntary_switches": 0, "user_s": seconds, "sys_s": 0.0}
        host |= ({"instructions_per_step": counted, "instructions_per_step_passes": [counted]} if counted
                 else {"instructions_unavailable": "no hardware instruction counter here (the stand-in)"})
        return {
            "batch_size": batch_size, "steps": steps, "warmup_steps": warmup, "timer": "perf_counter",
            "setup_s": 0.001, "wall_s": seconds, "gpu_ms_per_step": statistics.fmean(step_ms), "step_ms": step_ms,
            "forced": bool(spec.get("reference")) and self.accepts_tokens, "end_to_end_pass_ms": [sum(step_ms)],
            "tok_per_s": tok_per_s, "tok_per_s_windows": [tok_per_s], "window_s": spec.get("tok_per_s_window_s"),
            "timed_passes": 1, "timed_s": seconds, "passes_differing": 0, "gc_disabled": True,
            "tokens": rows, "sha256": tokens_sha256(rows), "workload": {}, "host": host,
        }

    def _mix_rows(self, process: Process, schedule: list[int], steps: int) -> list[list[int]]:
        widest = max(schedule)
        lead = [self.token(process, widest, 1, row) for row in range(widest)]
        return [lead] + [[self.token(process, size, k + 2, row) for row in range(size)]
                         for k, size in enumerate(schedule[:steps])]

    def _mix(self, process: Process, schedule: list[int]) -> dict[str, Any]:
        spec = process.spec
        steps, warmup = spec["steps"], spec["warmup_steps"]
        timed = schedule[warmup: warmup + steps]
        step_ms = [float(self.step_ms(process, size)) for size in timed]  # type: ignore[arg-type]
        return {
            "max_batch_size": max(schedule), "steps": steps, "warmup_steps": warmup, "timer": "perf_counter",
            "setup_s": 0.001, "tok_per_s": sum(timed) * 1000 / sum(step_ms), "step_ms": step_ms,
            "end_to_end_step_ms": step_ms,
            "tokens": self._mix_rows(process, schedule, warmup + steps), "workload": {},
            "forced": bool(spec.get("reference")) and self.accepts_tokens,
        }


def _schedule(spec: dict[str, Any]) -> list[int] | None:
    if spec.get("batch_mix") is None and spec.get("batch_mix_steps") is None:
        return None
    mix = {int(size): share for size, share in spec["batch_mix"].items()} if spec.get("batch_mix") else None
    return draw_schedule(pass_lengths(spec["warmup_steps"], spec["steps"], spec.get("profile_steps", 0)),
                         spec.get("batch_mix_seed", 0), mix, spec.get("batch_mix_steps"))



@dataclass
class Run:
    """A run of the pipeline in-process: its report, its progress lines, and the exit code
    `guard run` would give it."""

    report: Report
    progress: list[str]
    out: Path

    @property
    def exit_code(self) -> int:
        return GATE_EXIT[gate(self.report)]

    @property
    def text(self) -> str:
        return "\n".join(self.progress)

    @property
    def comment(self) -> str:
        return (self.out / "comment.md").read_text()

    def result(self, arm: str, repeat: int) -> dict[str, Any]:
        """A process's result file, as the run kept it."""
        return json.loads((self.out / "runs" / f"{arm}-{repeat}.json").read_text())


def run_in_process(repo: Path, out: Path, harness: StandIn, head: str = "feature", base: str | None = None,
                   **given: Any) -> Run:
    """`guard run --repo REPO --head HEAD --out OUT` in this process, its processes answered by `harness`."""
    lines: list[str] = []
    report = run_guard(repo, base, head, given.pop("config", None), out, progress=lines.append, harness=harness,
                       **given)
    return Run(report, lines, out)
