"""The figures an export carries: per batch size and metric, one arm's median, range and
every process's value, with the metric's name and unit. The names are the exports' public
contract: a dashboard keys its series on them."""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel

from guard._errors import GuardError
from guard.compare import ArmStats
from guard.measure import Spread
from guard.record import Record
from guard.report import Environment, Report
from guard.report import _words as words

Arm = Literal["base", "head"]


class ExportError(GuardError):
    """A report that holds nothing an export could carry for the arm asked for."""


class Measure(BaseModel):
    batch_size: int
    slug: str  # "gpu-ms-per-step": a Bencher measure, part of every exported name
    name: str  # "GPU ms per step" (guard/report/_words.py)
    unit: Literal["ms", "tok/s"]
    smaller_is_better: bool
    median: float
    low: float  # the fastest and slowest process
    high: float
    values: list[float]  # each process's figure, in the order they ran


def benchmark_name(batch_size: int) -> str:
    return f"decode/batch-size-{batch_size}"


class Source(BaseModel):
    """What one arm's figures were measured on, as the exports carry it beside them."""

    sha: str
    environment: Environment
    gpu_timed: bool
    steps: int
    warmup_steps: int


def measures(report: Report, arm: Arm) -> list[Measure]:
    """The arm's figures at every batch size it was measured at; ExportError when none."""
    name = report.base if arm == "base" else report.head
    found = arm_measures([(b.batch_size, stats) for b in report.batch_sizes
                          if (stats := next((a for a in b.arms if a.arm == name), None)) is not None],
                         report.gpu_timed())
    if not found:
        raise ExportError(f"the report holds no measurement of the {arm} arm (its build or run failed): "
                          "nothing to export; export the other arm with --arm, or a report with both measured")
    return found


def record_measures(record: Record) -> list[Measure]:
    """A record's figures at every batch size; ExportError where its commit was not measured."""
    found = arm_measures([(b.batch_size, b.stats) for b in record.batch_sizes], record.gpu_timed())
    if not found:
        raise ExportError(f"the record holds no measurement of {record.arm.sha[:12]} (its build or run failed): "
                          "nothing to export")
    return found


def report_source(report: Report, arm: Arm) -> Source:
    return Source(sha=report.arm(report.base if arm == "base" else report.head).sha, environment=report.environment,
                  gpu_timed=report.gpu_timed(), steps=report.workload.steps,
                  warmup_steps=report.workload.warmup_steps)


def record_source(record: Record) -> Source:
    return Source(sha=record.arm.sha, environment=record.environment, gpu_timed=record.gpu_timed(),
                  steps=record.workload.steps, warmup_steps=record.workload.warmup_steps)


def arm_measures(batches: list[tuple[int, ArmStats]], gpu: bool) -> list[Measure]:
    """Per batch size, the step time, tok/s and (where measured) the host's time per step."""
    step = ("gpu-ms-per-step" if gpu else "cpu-ms-per-step", words.metric("gpu_ms", gpu))
    found = []
    for batch_size, stats in batches:
        rows = [(step, "ms", True, stats.gpu_ms_per_step), (("tok-per-s", "tok/s"), "tok/s", False, stats.tok_per_s)]
        if stats.host_ms_per_step is not None:
            rows.append((("host-ms-per-step", words.HOST), "ms", True, stats.host_ms_per_step))
        for (slug, label), unit, smaller, spread in rows:
            _check_figures(spread, f"batch size {batch_size} {label}")
            found.append(Measure(batch_size=batch_size, slug=slug, name=label, unit=unit,
                                 smaller_is_better=smaller, median=spread.median, low=spread.min, high=spread.max,
                                 values=spread.values))
    return found


def _check_figures(spread: Spread, where: str) -> None:
    """Every export writes numbers as JSON, which has no nan or inf; a step takes some time."""
    figures = [spread.median, spread.min, spread.max, *spread.values]
    if not spread.values or not all(math.isfinite(v) and v > 0 for v in figures):
        raise ExportError(f"the {where} figures are not all positive finite numbers: "
                          "pass the report.json that `guard run` wrote")
