"""Slow processes: fresh processes whose figure lies far on the slow side of their arm's others.

One process that a pause, another job or a cold cache slowed widens an interval by itself, so
every run names them and counts how often they happen. A process is slow at one batch size in
one metric when its log distance from its arm's median is more than SLOW_SIGMAS robust standard
deviations (1.4826 x the median absolute distance, pooled over the arms) and more than
SLOW_MIN_PCT, on the slow side: GPU ms per step above, tok/s below. Only that side, as
interference adds time and nothing takes it away.

From decision rule 3 (report schema 9) the slow processes of base and head are set aside from
the decision (`set_aside`, by GPU ms per step), unless more than SET_ASIDE_SHARE of an arm's
processes are slow: slowness that common is the arm's behaviour, not an accident of the runner.
The pipeline measures each arm again in their place after the first round. The choice (set
aside and measured again, over Welch on every process and over Yuen's trimmed means) was made
by simulation: benchmarks/slow_processes.py, docs/notebook/decision-rule.md "Slow processes".
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from typing import Literal

from pydantic import BaseModel

from guard.measure._mix import MIX_BATCH, usable_mix_runs
from guard.measure._models import ArmMeasurement
from guard.measure._stats import pct_of_log, rate_interval

SLOW_SIGMAS = 5.0
SLOW_MIN_PCT = 0.1
MAD_TO_SD = 1.4826  # a normal distribution's standard deviation per median absolute deviation
RATE_CONFIDENCE = 0.95

# an arm keeps all its processes where more than this share of them are slow
SET_ASIDE_SHARE = 1 / 3

SlowMetric = Literal["gpu_ms", "tok_per_s"]


class SlowProcess(BaseModel):
    arm: str
    repeat: int  # the process's place in its arm's run order, 1-based, as the progress lines count
    batch_size: int
    metric: SlowMetric
    value: float  # ms per step, or tokens per second
    off_pct: float  # from its arm's median: positive for GPU ms, negative for tok/s


class SlowProcesses(BaseModel):
    """Every slow process of a run, and their share of its processes with a Clopper-Pearson interval."""

    processes: int  # every measured process, of every arm
    slow: list[SlowProcess] = []
    rate_low: float  # share of processes, 0 to 1, at RATE_CONFIDENCE
    rate_high: float

    @property
    def count(self) -> int:
        """Processes slow in some metric at some batch size, each once."""
        return len({(s.arm, s.repeat) for s in self.slow})

    def of(self, metric: SlowMetric, batch_size: int) -> list[SlowProcess]:
        return [s for s in self.slow if s.metric == metric and s.batch_size == batch_size]


def slow_in(values_by_arm: dict[str, list[float]], slower_is_higher: bool) -> list[tuple[str, int, float]]:
    """(arm, 1-based position, off in percent) of each value far on the slow side of its arm's
    others; values in run order (one that is not positive is no figure, and never slow)."""
    logs = {
        arm: [(position, math.log(v)) for position, v in enumerate(values, start=1) if v > 0]
        for arm, values in values_by_arm.items()
    }
    medians = {arm: statistics.median(v for _, v in pairs) for arm, pairs in logs.items() if pairs}
    distances = [abs(v - medians[arm]) for arm, pairs in logs.items() for _, v in pairs]
    if len(distances) < 3:  # no others to be far from
        return []
    limit = max(SLOW_SIGMAS * MAD_TO_SD * statistics.median(distances), math.log1p(SLOW_MIN_PCT / 100))
    sign = 1 if slower_is_higher else -1
    return [
        (arm, position, pct_of_log(v - medians[arm]))
        for arm, pairs in logs.items()
        for position, v in pairs
        if sign * (v - medians[arm]) > limit
    ]


def set_aside(values_by_arm: dict[str, list[float]], slower_is_higher: bool) -> dict[str, list[tuple[int, float]]]:
    """Per arm, (1-based position, off in percent) of its slow processes (`slow_in`) that the
    decision leaves out: none of an arm where more than SET_ASIDE_SHARE of its processes are slow."""
    flagged: dict[str, list[tuple[int, float]]] = {}
    for arm, position, off_pct in slow_in(values_by_arm, slower_is_higher):
        flagged.setdefault(arm, []).append((position, off_pct))
    return {arm: slow for arm, slow in flagged.items() if len(slow) <= SET_ASIDE_SHARE * len(values_by_arm[arm])}


def find_slow_processes(
    values: dict[tuple[int, SlowMetric], dict[str, list[float]]], processes: int
) -> SlowProcesses:
    """`values[(batch size, metric)][arm]`: each process's figure, in its arm's run order."""
    slow = [
        SlowProcess(arm=arm, repeat=position, batch_size=batch_size, metric=metric,
                    value=values_by_arm[arm][position - 1], off_pct=off_pct)
        for (batch_size, metric), values_by_arm in sorted(values.items())
        for arm, position, off_pct in slow_in(values_by_arm, slower_is_higher=metric == "gpu_ms")
    ]
    low, high = rate_interval(len({(s.arm, s.repeat) for s in slow}), processes, RATE_CONFIDENCE)
    return SlowProcesses(processes=processes, slow=slow, rate_low=low, rate_high=high)


def slow_processes(measurements: Iterable[ArmMeasurement], batch_sizes: list[int],
                   mix_schedule: list[int] | None = None) -> SlowProcesses:
    """The slow processes of every arm's repeats, at each batch size and over the mix (at
    MIX_BATCH) where `mix_schedule` gives its schedule, in the order they ran, as the
    comparison's spreads keep them, so a report's figures give the same again."""
    arms = [m for m in measurements if m.repeats]
    values: dict[tuple[int, SlowMetric], dict[str, list[float]]] = {}
    for batch_size in batch_sizes:
        runs = {m.arm: [run for r in m.repeats for run in r.runs if run.batch_size == batch_size] for m in arms}
        values[(batch_size, "gpu_ms")] = {arm: [run.gpu_ms_per_step for run in rs] for arm, rs in runs.items()}
        values[(batch_size, "tok_per_s")] = {arm: [run.tok_per_s for run in rs] for arm, rs in runs.items()}
    if mix_schedule is not None:
        mixes = {m.arm: usable_mix_runs([r.mix for r in m.repeats if r.mix is not None], mix_schedule) for m in arms}
        values[(MIX_BATCH, "gpu_ms")] = {arm: [statistics.fmean(r.step_ms) for r in rs] for arm, rs in mixes.items()}
        values[(MIX_BATCH, "tok_per_s")] = {arm: [r.tok_per_s for r in rs] for arm, rs in mixes.items()}
    return find_slow_processes(values, processes_of(values))


def processes_of(values: dict[tuple[int, SlowMetric], dict[str, list[float]]]) -> int:
    """The processes behind `values`: per arm, its most figures of one batch size (a
    confirmation round measures some of them only)."""
    most: dict[str, int] = {}
    for by_arm in values.values():
        for arm, figures in by_arm.items():
            most[arm] = max(most.get(arm, 0), len(figures))
    return sum(most.values())
