"""A process's figures are what the user feels (guard/measure/_figures.py): means over its steps,
tok/s its tokens over its whole decode, so a stall counts in full; and the guard computes each
one from the step times the process lists, whatever figure the process states beside them."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import pytest

from guard.harness import Spec, draw_schedule, pass_lengths
from guard.harness._protocol import wire
from guard.harness._passes import Process, run_batch
from guard.measure import ArmMeasurement, ArmTarget, BatchRun, HarnessSpec, run_interleaved
from guard.measure._figures import batch_figures
from guard.sandbox import choose_box
from tests.step_clock import Clock, installed

# -- a stall: 50 ms every 32 steps ------------------------------------------------------------

STEP_S = 0.001
STALL_S = 0.05
STALL_EVERY = 32
STEPS = 64
BATCH = 2


class Stalling:
    """Every step lasts STEP_S; with `stall`, every STALL_EVERY-th step after a setup lasts
    STALL_S more (a host-side hiccup: a periodic sync, a cache flush, a log line to a slow disk)."""

    def __init__(self, stall: bool, clock: Clock) -> None:
        self.stall, self.clock = stall, clock
        self.calls = 0

    def setup(self, batch_size: int) -> None:
        self.batch, self.calls = batch_size, 0

    def step(self) -> list[int]:
        self.calls += 1
        self.clock.sleep(STEP_S + (STALL_S if self.stall and self.calls % STALL_EVERY == 0 else 0.0))
        return [7] * self.batch


def test_a_stall_every_32_steps_adds_its_share_of_the_mean_to_the_figures(monkeypatch: pytest.MonkeyPatch) -> None:
    # one batch size of an in-process harness run (no torch: a CPU's timer), as the guard reads
    # it, on a clock only the steps move; windows of 20 ms leave most without a stall, so a
    # median of their rates would not move
    clock = installed(monkeypatch)
    spec = Spec(entry="wl.py:make", root=".", batch_sizes=[BATCH], steps=STEPS, warmup_steps=0, tok_per_s_min_s=0.3,
                tok_per_s_window_s=0.02)
    written = run_batch(Process(Stalling(True, clock), None, spec), BATCH)
    run = batch_figures(BatchRun.model_validate(wire(written)))
    # tok/s over whole passes, each with its stalls: 64 steps of 1 ms and two of 50 ms more make
    # 164 ms a pass, so two passes reach the 0.3 s asked for
    assert run.timed_passes == 2
    # what the stalls add per step, from the steps alone: 2 of 50 ms over 64 steps
    share_ms = STALL_S * 1e3 * (STEPS // STALL_EVERY) / STEPS
    assert share_ms == pytest.approx(1.5625)
    # the mean holds every step and the stalls, lifted that far over the median step kept beside it
    assert run.gpu_ms_median_per_step == pytest.approx(STEP_S * 1e3, rel=1e-9)
    assert run.gpu_ms_per_step == pytest.approx(STEP_S * 1e3 + share_ms, rel=1e-9)
    # tok/s falls accordingly: the tokens over every pass's whole time
    assert run.tok_per_s == pytest.approx(BATCH / ((STEP_S * 1e3 + share_ms) / 1e3), rel=1e-9)


# -- the guard's own figures, from the lists a process writes ----------------------------------

SPEC_STEPS, SPEC_WARMUP = 4, 1
MIX = {1: 0.5, 3: 0.5}


def _spec() -> HarnessSpec:
    return HarnessSpec(entry="wl.py:make", batch_sizes=[BATCH], steps=SPEC_STEPS, warmup_steps=SPEC_WARMUP,
                       tok_per_s_min_s=0, warmup_max_s=0, profile_steps=0, batch_mix=MIX)


def _schedule() -> list[int]:
    return draw_schedule(pass_lengths(SPEC_WARMUP, SPEC_STEPS), 0, MIX)


def _written(**over: Any) -> dict[str, Any]:
    """What a process on a GPU writes, its lists honest and every figure beside them made up:
    steps of 1, 1, 1 and 5 ms (mean 2, median 1), end to end twice that, enqueue half of it, two
    end-to-end passes of 16 and 24 ms; the mix's four end-to-end steps 1 ms each."""
    run = {
        "batch_size": BATCH, "steps": SPEC_STEPS, "warmup_steps": SPEC_WARMUP, "timer": "cuda_event",
        "setup_s": 0.1, "wall_s": 9.0, "tok_per_s": 1e6, "timed_passes": 7, "timed_s": 9.0,
        "gpu_ms_per_step": 1.0, "step_ms": [1.0, 1.0, 1.0, 5.0],
        "end_to_end_gpu_ms_per_step": 2.0, "end_to_end_gpu_ms": [2.0, 2.0, 2.0, 10.0],
        "host_ms_per_step": 0.5, "host_ms": [0.5, 0.5, 0.5, 2.5],
        "end_to_end_pass_ms": [16.0, 24.0], "tokens": [[7, 7]] * (SPEC_WARMUP + 2 * SPEC_STEPS), "sha256": "x",
    } | over.pop("run", {})
    schedule = _schedule()
    mix = {"max_batch_size": 3, "steps": SPEC_STEPS, "warmup_steps": SPEC_WARMUP, "timer": "cuda_event",
           "setup_s": 0.1, "tok_per_s": 1e6, "step_ms": [0.5] * SPEC_STEPS, "end_to_end_step_ms": [1.0] * SPEC_STEPS,
           "tokens": [[7] * 3] + [[7] * size for size in schedule]} | over.pop("mix", {})
    return {"arm": "head", "repeat": 0, "environment": {}, "runs": [run], "mix": mix} | over


def _read(tmp_path: Path, written: dict[str, Any]) -> ArmMeasurement:
    """The guard's reading of a process that wrote `written`, through its runner."""
    target = ArmTarget(box=choose_box(), name="head", python=Path(sys.executable), worktree=tmp_path)
    return run_interleaved([target], _spec(), 1, tmp_path / "runs", timeout_s=10,
                           harness=lambda *_args, **_kw: [written])["head"]


def test_the_guard_reads_a_process_as_its_step_lists_say_not_as_its_figures_say(tmp_path: Path) -> None:
    found = _read(tmp_path, _written())
    assert found.error is None, found.error
    result = found.repeats[0]
    run = result.run_for(BATCH)
    assert (run.gpu_ms_per_step, run.gpu_ms_median_per_step) == (2.0, 1.0)  # (1 + 1 + 1 + 5) / 4
    assert (run.end_to_end_gpu_ms_per_step, run.end_to_end_gpu_ms_median_per_step) == (4.0, 2.0)
    assert run.host_ms_per_step == 1.0
    # 2 passes of 4 steps of 2 tokens in 40 ms
    assert run.tok_per_s == pytest.approx(2 * 4 * 2 / 0.040)
    assert (run.timed_passes, run.timed_s, run.wall_s) == (2, pytest.approx(0.040), pytest.approx(0.016))
    # the mix: the rows of its end-to-end steps, as the guard's schedule has them, over their 4 ms
    rows = sum(_schedule()[SPEC_WARMUP: SPEC_WARMUP + SPEC_STEPS])
    assert result.mix is not None and result.mix.tok_per_s == pytest.approx(rows / 0.004)


@pytest.mark.parametrize(("over", "why"), [
    ({"run": {"end_to_end_pass_ms": []}}, "end_to_end_pass_ms holds no decode time"),
    ({"run": {"end_to_end_pass_ms": [0.0, 0.0]}}, "end_to_end_pass_ms holds no decode time"),
    ({"run": {"end_to_end_gpu_ms": []}}, "end_to_end_gpu_ms holds 0 step times for its 4 timed steps"),
    ({"run": {"step_ms": [1.0, 1.0, 1.0]}}, "step_ms holds 3 step times for its 4 timed steps"),
    ({"run": {"steps": 3, "step_ms": [1.0] * 3, "end_to_end_gpu_ms": [2.0] * 3, "host_ms": [0.5] * 3}},
     "3 timed steps after 1, where the guard asked for 4 after 1"),
    ({"mix": {"end_to_end_step_ms": []}}, "the mix: end_to_end_step_ms holds 0 step times"),
], ids=["no passes", "passes of no time", "no end-to-end steps", "a step short", "other steps",
        "no mix end-to-end steps"])
def test_a_process_whose_lists_cannot_give_its_figures_is_refused(tmp_path: Path, over: dict[str, Any],
                                                                  why: str) -> None:
    found = _read(tmp_path, _written(**over))
    assert found.error is not None and "is refused" in found.error and why in found.error
    assert found.repeats == []


def test_a_step_time_that_is_no_number_is_malformed(tmp_path: Path) -> None:
    found = _read(tmp_path, _written(run={"step_ms": [1.0, 1.0, math.nan, 1.0]}))
    assert found.error is not None and "is malformed" in found.error and "step_ms.2" in found.error
