"""A process's figures, computed by the guard from the step times its result lists.

Each figure is what the user feels: a mean, the timed steps' total time over their number, so a
stall of 50 ms every 32 steps adds its 1.56 ms per step in full where a median over the steps
would not move. GPU ms per step is the mean over `step_ms` (the GPU-timed pass on a GPU, the
first end-to-end pass on a CPU), end-to-end ms the mean over the first end-to-end pass's CUDA
events, tok/s the tokens of every end-to-end pass over their summed time; the mix's tok/s the
rows of its timed steps, as the guard's schedule has them, over their summed end-to-end time.
The medians stay beside them as diagnostics.

The process runs the pull request's code, so a figure it states is never taken: the guard
computes each one again from the lists as it reads the result, and a stated figure that
disagrees with its own lists is simply replaced (the lists are what the guard's clock holds to
its own, measure/_clock.py; a process that lies in both ways alike gains nothing by a refusal
here). A result whose lists cannot give a figure (missing, of another length than its steps,
adding up to no time) is refused: `StepsMissing`.
"""

from __future__ import annotations

import statistics

from guard.measure._models import BatchRun, MixRun, RepeatResult


class StepsMissing(ValueError):
    """A result whose step lists cannot give its figures; the message says which list and why."""


def mean_ms(values: list[float]) -> float:
    """The total of `values` over their count: a process's per-step figure."""
    return sum(values) / len(values) if values else 0.0


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _counted(values: list[float], steps: int, name: str, where: str) -> list[float]:
    if len(values) != steps:
        raise StepsMissing(f"{where}: {name} holds {len(values)} step times for its {steps} timed steps")
    return values


def batch_figures(run: BatchRun) -> BatchRun:
    """`run` with its figures computed from its lists: GPU ms, end-to-end ms (a GPU's), the host's
    enqueue ms (a GPU's), tok/s and its decode seconds, and the medians beside them."""
    where = f"batch size {run.batch_size}"
    step_ms = _counted(run.step_ms, run.steps, "step_ms", where)
    passes = run.end_to_end_pass_ms
    decode_ms = sum(passes)
    if not passes or decode_ms <= 0:
        raise StepsMissing(f"{where}: end_to_end_pass_ms holds no decode time to take tok/s from")
    gpu = run.timer == "cuda_event"
    end_to_end = _counted(run.end_to_end_gpu_ms, run.steps, "end_to_end_gpu_ms", where) if gpu else []
    host_ms = _counted(run.host_ms, run.steps, "host_ms", where) if gpu and run.host_ms else []
    return run.model_copy(update={
        "gpu_ms_per_step": mean_ms(step_ms),
        "gpu_ms_median_per_step": _median(step_ms),
        "end_to_end_gpu_ms_per_step": mean_ms(end_to_end) if gpu else None,
        "end_to_end_gpu_ms_median_per_step": _median(end_to_end),
        "host_ms_per_step": mean_ms(host_ms) if host_ms else None,
        "tok_per_s": run.batch_size * run.steps * len(passes) / (decode_ms / 1e3),
        "timed_passes": len(passes),
        "timed_s": decode_ms / 1e3,
        "wall_s": passes[0] / 1e3,
    })


def mix_figures(mix: MixRun, timed_sizes: list[int]) -> MixRun:
    """`mix` with its tok/s computed from its end-to-end steps and `timed_sizes`, the active batch
    size of each of them as the guard's schedule has it."""
    _counted(mix.step_ms, mix.steps, "step_ms", "the mix")
    end_to_end = _counted(mix.end_to_end_step_ms, mix.steps, "end_to_end_step_ms", "the mix")
    if len(timed_sizes) != mix.steps or sum(end_to_end) <= 0:
        raise StepsMissing("the mix: its end-to-end steps hold no decode time of the schedule's timed steps")
    return mix.model_copy(update={"tok_per_s": sum(timed_sizes) / (sum(end_to_end) / 1e3)})


def with_figures(result: RepeatResult, steps: int, warmup_steps: int, schedule: list[int] | None) -> RepeatResult:
    """`result` (one rank's, as the process wrote it) with every figure computed by the guard,
    its passes held to the `steps` and `warmup_steps` the guard asked for, the mix's read
    against `schedule` (None: no mix was asked for)."""
    for run in result.runs:
        if (run.steps, run.warmup_steps) != (steps, warmup_steps):
            raise StepsMissing(f"batch size {run.batch_size}: {run.steps} timed steps after {run.warmup_steps}, "
                               f"where the guard asked for {steps} after {warmup_steps}")
    mix = result.mix
    if mix is not None:
        if schedule is None:
            raise StepsMissing("a mix pass, where the guard asked for none")
        if (mix.steps, mix.warmup_steps) != (steps, warmup_steps):
            raise StepsMissing(f"the mix: {mix.steps} timed steps after {mix.warmup_steps}, where the guard asked "
                               f"for {steps} after {warmup_steps}")
        mix = mix_figures(mix, schedule[warmup_steps: warmup_steps + steps])
    return result.model_copy(update={"runs": [batch_figures(run) for run in result.runs], "mix": mix})
