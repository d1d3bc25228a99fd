"""What the batch-size mix did, per arm: capture coverage against useful work, padding waste,
step time per size and per real token, and MoE expert imbalance.

Computed by the guard from each process's per-step records, read against the schedule the
guard draws itself (the process's own sizes and conclusions are never taken). A figure that
needs step_info() is None where a workload has none: unknown, not guessed. Reading the path
and padding of such a workload from its profiled pass is a later step.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel

from guard.measure._models import ArmMeasurement, MixRun, StepInfo

# The batch size the mix's figures are kept at where figures of sizes are (its comparison,
# its slow processes): no size, so nothing of a size is taken for it
MIX_BATCH = 0

# Edges of the imbalance buckets that GPU ms per step is read against: I = 1 is a perfect
# balance; past 3 one expert holds three times the mean load
IMBALANCE_EDGES = (1.0, 1.25, 1.5, 2.0, 3.0)


class MixSize(BaseModel):
    """One batch size of the mix, over every timed step of that size in every process."""

    batch_size: int
    share: float  # of the timed steps
    path: Literal["graph", "eager", "mixed"] | None = None  # None: unknown (no step_info)
    padded_to: int | None = None  # the rows most of its steps computed; None: unknown
    padding_waste: float | None = None  # its padded rows over its computed rows; None: unknown
    gpu_ms_per_step: float  # median over processes of each one's mean over the size's steps
    gpu_ms_per_real_token: float  # median over processes of the size's step ms summed over its real rows
    imbalance_median: float | None = None  # median I over its steps; None: no expert_tokens


class ImbalanceBucket(BaseModel):
    """The steps whose imbalance I lies in [i_from, i_to) (i_to None: no upper edge)."""

    i_from: float
    i_to: float | None
    steps: int
    # medians over those steps, of every process pooled: a relation read across buckets, which a
    # few slow steps should not bend (the mix's own figures are means)
    gpu_ms_per_step: float
    gpu_ms_per_real_token: float


class Imbalance(BaseModel):
    """I = max_i n_i / mean(n) per step, over the expert loads step_info() reported: its
    distribution over every timed step of every process, and GPU ms per step by I bucket. The
    schedule and the forced ids give both arms the same steps, so with unchanged routing the
    buckets hold the same steps in both: like for like."""

    steps: int
    median: float
    p90: float  # nearest rank
    max: float
    buckets: list[ImbalanceBucket]


class ArmMix(BaseModel):
    arm: str
    processes: int  # whose mix pass followed the schedule (the others are left out)
    timer: str
    gpu_ms_per_step: float  # median over processes of the mean over the timed steps (a mix is a whole)
    process_ms_per_step: list[float] = []  # each process's mean over its timed steps, as they ran
    gpu_ms_per_real_token: float  # median over processes of the timed steps' ms over their real rows
    tok_per_s: float  # median over processes of each one's, the end-to-end pass's rows over its time
    # None: unknown (the workload has no step_info(), or some step did not say)
    capture_coverage: float | None = None  # share of timed steps replayed from a graph
    useful_work_coverage: float | None = None  # real rows over computed rows
    padding_waste: float | None = None  # padded rows over computed rows
    inconsistent_steps: int = 0  # step records that contradict the schedule (padded_to under the batch): unknown
    # forced: each process's (step, row) outputs that differ from the reference, as the guard
    # counted them, of `compared` each; None: it ran free
    disagreements: list[int | None] = []
    compared: int = 0
    sizes: list[MixSize]
    imbalance: Imbalance | None = None  # None: no expert_tokens


class MixReport(BaseModel):
    """report.json's `mix`: the schedule it was, and each arm's figures."""

    source: str  # "batch_mix" or the batch_mix_file's path
    seed: int
    steps: int  # timed steps per process
    max_batch_size: int
    arms: list[ArmMix]


def imbalance_of(loads: list[int]) -> float | None:
    """max_i n_i / mean(n); None when no token reached an expert."""
    total = sum(loads)
    return max(loads) * len(loads) / total if total else None


def nearest_rank(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def _path_of(paths: list[str | None]) -> Literal["graph", "eager", "mixed"] | None:
    if not paths or any(p is None for p in paths):
        return None
    kinds = set(paths)
    return "mixed" if len(kinds) > 1 else ("graph" if kinds == {"graph"} else "eager")


def _on_schedule(run: MixRun, schedule: list[int]) -> bool:
    """The process decoded the guard's schedule: after its lead row, a row per step as wide as
    that step's batch, through its timed steps (another interpreter's draw would show here)."""
    widths = [len(row) for row in run.tokens[1:]]
    timed_end = run.warmup_steps + run.steps * (2 if run.timer == "cuda_event" else 1)
    return len(widths) >= timed_end and widths == schedule[: len(widths)]


def _consistent(info: StepInfo | None, size: int) -> bool:
    return info is None or info.padded_to is None or info.padded_to >= size


def usable_mix_runs(runs: list[MixRun], schedule: list[int]) -> list[MixRun]:
    """The processes whose mix pass is whole and followed `schedule`: the ones every mix figure,
    and the mix's verdict, are made from."""
    return [r for r in runs if len(r.step_ms) == r.steps and (r.step_info is None or len(r.step_info) == r.steps)
            and _on_schedule(r, schedule)]


@dataclass
class _Tally:
    """One arm's timed mix steps, added process by process: what arm_mix's figures are made of.
    A step whose record contradicts the schedule is counted inconsistent and read as unknown."""

    per_size_ms: dict[int, list[float]] = field(default_factory=dict)  # each process's mean per size
    per_size_token: dict[int, list[float]] = field(default_factory=dict)
    whole_ms: list[float] = field(default_factory=list)  # each process's mean over its timed steps
    whole_token: list[float] = field(default_factory=list)
    timed: list[int] = field(default_factory=list)  # the sizes of the timed steps, the same in every process
    paths: dict[int, list[str | None]] = field(default_factory=dict)
    padded: dict[int, list[int]] = field(default_factory=dict)
    levels_by_size: dict[int, list[float]] = field(default_factory=dict)
    points: list[tuple[float, float, float]] = field(default_factory=list)  # (I, ms, ms per real token)
    graph: int = 0
    steps_known: int = 0
    real_rows: int = 0
    computed_rows: int = 0
    unknown_path: bool = False
    unknown_rows: bool = False
    inconsistent: int = 0

    def add_run(self, run: MixRun, schedule: list[int]) -> None:
        first = run.warmup_steps + (run.steps if run.timer == "cuda_event" else 0)
        self.timed = schedule[first: first + run.steps]
        infos: list[StepInfo | None] = list(run.step_info) if run.step_info is not None else [None] * run.steps
        by_size: dict[int, list[float]] = {}
        for size, ms, info in zip(self.timed, run.step_ms, infos):
            by_size.setdefault(size, []).append(ms)
            self.add_step(size, ms, info)
        for size, values in by_size.items():
            # a mean, as the whole mix's: each process's sizes then add up to its whole, share by share
            self.per_size_ms.setdefault(size, []).append(statistics.fmean(values))
            self.per_size_token.setdefault(size, []).append(sum(values) / (size * len(values)))
        self.whole_ms.append(statistics.fmean(run.step_ms))
        self.whole_token.append(sum(run.step_ms) / sum(self.timed))

    def add_step(self, size: int, ms: float, info: StepInfo | None) -> None:
        if not _consistent(info, size):
            self.inconsistent += 1
            info = None
        path = info.path if info else None
        self.paths.setdefault(size, []).append(path)
        if path is None:
            self.unknown_path = True
        else:
            self.steps_known += 1
            self.graph += path == "graph"
        if info is None or info.padded_to is None:
            self.unknown_rows = True
        else:
            self.padded.setdefault(size, []).append(info.padded_to)
            self.real_rows += size
            self.computed_rows += info.padded_to
        loads = info.expert_tokens if info else None
        level = imbalance_of(loads) if loads else None
        if level is not None:
            self.points.append((level, ms, ms / size))
            self.levels_by_size.setdefault(size, []).append(level)

    def mix_size(self, size: int, counts: Counter[int]) -> MixSize:
        padded = self.padded.get(size, [])
        known = bool(padded) and len(padded) == len(self.paths[size])
        return MixSize(
            batch_size=size,
            share=counts[size] / sum(counts.values()),
            path=_path_of(self.paths.get(size, [])),
            padded_to=_mode(padded) if known else None,
            padding_waste=1.0 - size * len(padded) / sum(padded) if known else None,
            gpu_ms_per_step=statistics.median(self.per_size_ms[size]),
            gpu_ms_per_real_token=statistics.median(self.per_size_token[size]),
            imbalance_median=statistics.median(self.levels_by_size[size]) if size in self.levels_by_size else None,
        )


def arm_mix(arm: str, runs: list[MixRun], schedule: list[int]) -> ArmMix | None:
    """One arm's figures over its processes' mix passes; `schedule` is the guard's own draw,
    the timed steps read against its segment for their timer. None without a usable run."""
    usable = usable_mix_runs(runs, schedule)
    if not usable:
        return None
    tally = _Tally()
    for run in usable:
        tally.add_run(run, schedule)
    counts = Counter(tally.timed)  # every process timed the same segment of the schedule
    useful = tally.real_rows / tally.computed_rows if tally.computed_rows and not tally.unknown_rows else None
    return ArmMix(
        arm=arm,
        processes=len(usable),
        timer=usable[0].timer,
        gpu_ms_per_step=statistics.median(tally.whole_ms),
        process_ms_per_step=tally.whole_ms,
        gpu_ms_per_real_token=statistics.median(tally.whole_token),
        tok_per_s=statistics.median(r.tok_per_s for r in usable),
        capture_coverage=tally.graph / tally.steps_known if tally.steps_known and not tally.unknown_path else None,
        useful_work_coverage=useful,
        padding_waste=1.0 - useful if useful is not None else None,
        inconsistent_steps=tally.inconsistent,
        disagreements=[r.disagreements for r in usable],
        compared=max(r.compared for r in usable),
        sizes=[tally.mix_size(size, counts) for size in sorted(tally.per_size_ms)],
        imbalance=_imbalance(tally.points),
    )


def _mode(values: list[int] | None) -> int | None:
    """The most common value (ties: the larger)."""
    if not values:
        return None
    counts = Counter(values)
    return max(counts, key=lambda v: (counts[v], v))


def _imbalance(points: list[tuple[float, float, float]]) -> Imbalance | None:
    if not points:
        return None
    levels = [p[0] for p in points]
    buckets = []
    edges = [*IMBALANCE_EDGES, math.inf]
    for low, high in zip(edges, edges[1:]):
        inside = [p for p in points if low <= p[0] < high]  # I >= 1 always
        if inside:
            buckets.append(ImbalanceBucket(
                i_from=low, i_to=None if math.isinf(high) else high, steps=len(inside),
                gpu_ms_per_step=statistics.median(p[1] for p in inside),
                gpu_ms_per_real_token=statistics.median(p[2] for p in inside),
            ))
    return Imbalance(steps=len(points), median=statistics.median(levels), p90=nearest_rank(levels, 0.9),
                     max=max(levels), buckets=buckets)


def mix_report(
    schedule: list[int] | None, source: str, seed: int, steps: int, measurements: dict[str, ArmMeasurement],
    arms: list[str],
) -> MixReport | None:
    """Every arm's mix figures, in the order of `arms`; None when the run had no mix."""
    if schedule is None:
        return None
    found = []
    for name in arms:
        measurement = measurements.get(name)
        runs = [r.mix for r in measurement.repeats if r.mix is not None] if measurement else []
        figures = arm_mix(name, runs, schedule)
        if figures is not None:
            found.append(figures)
    return MixReport(source=source, seed=seed, steps=steps, max_batch_size=max(schedule), arms=found)
