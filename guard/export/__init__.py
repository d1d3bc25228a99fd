"""Export: a report's figures in the formats other tools read (Bencher's BMF, pyperf's JSON,
github-action-benchmark's customSmallerIsBetter), from a report read back and checked."""

from __future__ import annotations

import json
from typing import Literal, get_args

from guard.export._benchmark_action import to_benchmark_action
from guard.export._bmf import to_bmf
from guard.export._measures import Arm, ExportError, Measure, benchmark_name, measures
from guard.export._pyperf import to_pyperf
from guard.report import Report

Format = Literal["bmf", "pyperf", "github-action-benchmark"]
FORMATS: tuple[str, ...] = get_args(Format)


def export(report: Report, fmt: Format, arm: Arm = "head") -> str:
    """The export as JSON text, ending in a newline."""
    found = measures(report, arm)
    name = report.base if arm == "base" else report.head
    if fmt == "bmf":
        data: object = to_bmf(found)
    elif fmt == "pyperf":
        data = to_pyperf(report, name, found)
    else:
        data = to_benchmark_action(found, report.arm(name).sha)
    return json.dumps(data, indent=2, allow_nan=False) + "\n"


__all__ = ["FORMATS", "Arm", "ExportError", "Format", "Measure", "benchmark_name", "export", "measures"]
