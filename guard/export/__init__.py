"""Export: an arm's figures in the formats other tools read (Bencher's BMF, pyperf's JSON,
github-action-benchmark's customSmallerIsBetter), from a report read back and checked, or from
the record of one commit (`guard record`), which writes two of them beside record.json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal, get_args

from guard._output import check_out_dir, write_all_atomic
from guard.export._benchmark_action import to_benchmark_action
from guard.export._bmf import to_bmf
from guard.export._measures import (
    Arm, ExportError, Measure, Source, benchmark_name, measures, record_measures, record_source, report_source,
)
from guard.export._pyperf import to_pyperf
from guard.record import RECORD_FILE, Record
from guard.report import Report

Format = Literal["bmf", "pyperf", "github-action-benchmark"]
FORMATS: tuple[str, ...] = get_args(Format)
# what `guard record` writes beside record.json: the formats main's history is read in elsewhere
RECORD_EXPORTS: dict[Format, str] = {"bmf": "bmf.json", "pyperf": "pyperf.json"}


def export(report: Report, fmt: Format, arm: Arm = "head") -> str:
    """The export as JSON text, ending in a newline."""
    return _text(fmt, measures(report, arm), report_source(report, arm))


def export_record(record: Record, fmt: Format) -> str:
    """A record's figures as JSON text, ending in a newline."""
    return _text(fmt, record_measures(record), record_source(record))


def write_record(record: Record, out_dir: Path) -> list[Path]:
    """record.json, and where the commit was measured its exports (RECORD_EXPORTS), each written
    in full before any replaces its earlier copy; an earlier run's exports never stand beside a
    record without figures. The paths written."""
    check_out_dir(out_dir)
    files: dict[Path, str | bytes] = {}
    for fmt, name in RECORD_EXPORTS.items():
        if record.measured:
            files[out_dir / name] = export_record(record, fmt)
        else:
            (out_dir / name).unlink(missing_ok=True)
    files[out_dir / RECORD_FILE] = record.model_dump_json(indent=2) + "\n"  # renamed into place last
    write_all_atomic(files)
    return list(files)


def _text(fmt: Format, found: list[Measure], source: Source) -> str:
    if fmt == "bmf":
        data: object = to_bmf(found)
    elif fmt == "pyperf":
        data = to_pyperf(source, found)
    else:
        data = to_benchmark_action(found, source.sha)
    return json.dumps(data, indent=2, allow_nan=False) + "\n"


__all__ = [
    "FORMATS", "RECORD_EXPORTS", "Arm", "ExportError", "Format", "Measure", "benchmark_name", "export",
    "export_record", "measures", "write_record",
]
