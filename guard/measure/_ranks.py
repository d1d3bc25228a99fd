"""One process of several ranks, from its ranks' results: a step's time is its slowest rank's.

Every rank of a process times the same steps (the harness keeps them in step), so step k of
the process took as long as the slowest rank's step k: that is the process's step time, whose
mean (measure/_figures.py) is the figure the decision rule compares, and its tok/s is its
slowest rank's, its decode time that rank's end-to-end passes. Each rank's own
figures stay beside it (`RankRun`), with how often each rank was the slowest: the one that
finished the step last. Ranks that wait for each other in collectives take about as long
per step, whichever holds the others back; the one that finishes last is the one they wait
for, and each rank stamps its steps' ends on the host's one monotonic clock to tell. Tokens,
the trace and whatever else a figure is not come from rank 0; the other ranks' outputs are
counted against rank 0's, as the guard counts them, never as a process says.
"""

from __future__ import annotations

import statistics
from pathlib import Path

from guard.measure._disagreements import count_disagreements
from guard.measure._figures import batch_figures, mean_ms
from guard.measure._models import ArmMeasurement, BatchRun, MixRun, RankRun, RepeatResult


class RanksDiffer(ValueError):
    """The ranks' results do not line up (other batch sizes, other step counts)."""


def merge_ranks(results: list[RepeatResult]) -> RepeatResult:
    """The process's result from its ranks' results, given in rank order."""
    lead = results[0]
    if len(results) == 1:
        return lead
    runs = []
    for run in lead.runs:
        try:
            per_rank = [result.run_for(run.batch_size) for result in results]
        except KeyError:
            raise RanksDiffer(f"a rank has no result for batch size {run.batch_size}") from None
        runs.append(_merged_batch(per_rank))
    mix = None
    if lead.mix is not None:
        mixes = [result.mix for result in results]
        if any(m is None for m in mixes):
            raise RanksDiffer("a rank has no result for the batch-size mix")
        mix = _merged_mix([m for m in mixes if m is not None])
    return lead.model_copy(update={"runs": runs, "mix": mix, "world_size": len(results)})


def slowest_rank_times(step_ms: list[list[float]]) -> list[float]:
    """Per step, the slowest rank's time."""
    return [max(column) for column in zip(*_lined_up(step_ms, "timed"))]


def finished_last(done_ns: list[list[int]]) -> tuple[list[int], list[float]]:
    """Per rank, the steps it finished last, the one the others waited for, and the median of
    how far behind the first rank to finish each step it finished, in microseconds."""
    lags = [[(t - min(column)) / 1e3 for t in column] for column in zip(*_lined_up(done_ns, "stamped"))]
    per_rank = list(zip(*lags)) if lags else [() for _ in done_ns]
    return _last_counts(done_ns), [statistics.median(lag) if lag else 0.0 for lag in per_rank]


def _lined_up(values: list[list[float]] | list[list[int]], what: str) -> list[list[float]] | list[list[int]]:
    lengths = {len(v) for v in values}
    if len(lengths) != 1:
        raise RanksDiffer(f"the ranks {what} different numbers of steps ({', '.join(map(str, sorted(lengths)))})")
    return values


def _last_counts(values: list[list[float]] | list[list[int]]) -> list[int]:
    counts = [0] * len(values)
    for column in zip(*values):
        counts[column.index(max(column))] += 1
    return counts


def _rank_run(rank: int, run: BatchRun | MixRun, lead: BatchRun | MixRun, lag_us: float | None) -> RankRun:
    count, _, first = count_disagreements(run.tokens, lead.tokens) if rank else (0, 0, None)
    own = run.gpu_ms_per_step if isinstance(run, BatchRun) else mean_ms(run.step_ms)
    return RankRun(rank=rank, gpu_ms_per_step=own, step_ms=run.step_ms,
                   host_ms_per_step=run.host_ms_per_step if isinstance(run, BatchRun) else None,
                   tok_per_s=run.tok_per_s, step_done_ns=run.step_done_ns, finish_lag_us=lag_us, trace=run.trace,
                   workload=run.workload, disagreements=count, first_disagreement=first)


def _ranks_of(per_rank: list[BatchRun] | list[MixRun]) -> tuple[list[RankRun], list[int]]:
    """Each rank's own figures, and per rank the steps it was the slowest in: the one that
    finished last, where every rank stamped its steps, else the one whose step took longest."""
    stamped = all(r.step_done_ns for r in per_rank)
    if stamped:
        slowest, lags = finished_last([r.step_done_ns for r in per_rank])
    else:
        slowest, lags = _last_counts(_lined_up([r.step_ms for r in per_rank], "timed")), [None] * len(per_rank)
    lead = per_rank[0]
    return [_rank_run(rank, run, lead, lag) for rank, (run, lag) in enumerate(zip(per_rank, lags))], slowest


def _merged_batch(per_rank: list[BatchRun]) -> BatchRun:
    """Each per-step list its slowest rank's step by step, the end-to-end passes the slowest
    rank's; the figures then computed from them as from one rank's (`batch_figures`)."""
    lead = per_rank[0]
    ranks, slowest = _ranks_of(per_rank)
    update: dict[str, object] = {"step_ms": slowest_rank_times([r.step_ms for r in per_rank])}
    for name in ("host_ms", "end_to_end_gpu_ms"):
        lists = [getattr(r, name) for r in per_rank]
        update[name] = slowest_rank_times(lists) if all(lists) else []
    slow = min(per_rank, key=lambda r: r.tok_per_s)  # the process decodes as fast as its slowest rank
    update |= {name: getattr(slow, name) for name in ("end_to_end_pass_ms", "tok_per_s_windows", "window_s")}
    update |= {"setup_s": max(r.setup_s for r in per_rank), "warmup_s": max(r.warmup_s for r in per_rank),
               "hold_us": max(r.hold_us for r in per_rank), "unheld_steps": max(r.unheld_steps for r in per_rank),
               "ranks": ranks, "slowest_steps": slowest}
    return batch_figures(lead.model_copy(update=update))


def _merged_mix(per_rank: list[MixRun]) -> MixRun:
    lead = per_rank[0]
    step_ms = slowest_rank_times([m.step_ms for m in per_rank])
    ranks, slowest = _ranks_of(per_rank)
    slow = min(per_rank, key=lambda m: m.tok_per_s)  # its tok/s as the guard computed it, from these
    return lead.model_copy(update={
        "step_ms": step_ms, "tok_per_s": slow.tok_per_s, "end_to_end_step_ms": slow.end_to_end_step_ms,
        "setup_s": max(m.setup_s for m in per_rank), "warmup_s": max(m.warmup_s for m in per_rank),
        "ranks": ranks, "slowest_steps": slowest,
    })


RankTraces = dict[str, dict[int, list[tuple[int, list[Path]]]]]


def rank_trace_paths(measurements: dict[str, ArmMeasurement]) -> RankTraces:
    """arm -> batch size -> (repeat, each rank's trace in rank order) for every profiled pass of
    several ranks that left a trace on every rank (the trace analysis across ranks reads them)."""
    found: RankTraces = {}
    for arm, m in measurements.items():
        for result in m.repeats:
            for run in result.runs:
                traces = [r.trace for r in run.ranks]
                if traces and all(traces):
                    found.setdefault(arm, {}).setdefault(run.batch_size, []).append(
                        (result.repeat, [Path(t) for t in traces if t]))
    return found


def rank_mix_trace_paths(measurements: dict[str, ArmMeasurement]) -> dict[str, list[tuple[int, list[Path]]]]:
    """arm -> (repeat, each rank's trace in rank order) for the mix's profiled passes of several ranks."""
    found: dict[str, list[tuple[int, list[Path]]]] = {}
    for arm, m in measurements.items():
        for result in m.repeats:
            traces = [r.trace for r in result.mix.ranks] if result.mix else []
            if traces and all(traces):
                found.setdefault(arm, []).append((result.repeat, [Path(t) for t in traces if t]))
    return found
