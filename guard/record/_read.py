"""A record.json read back: it comes from another job (a CI run's artifact, an upload to the
service), so it is data, bounded in size, checked against the schema, and its figures made
again from its own values before anything keeps or shows them."""

from __future__ import annotations

from pathlib import Path

import pydantic
import pydantic_core

from guard._errors import GuardError
from guard._types import is_commit_sha
from guard.compare import Discrepancy, arm_discrepancies
from guard.record._models import RECORD_SCHEMA_VERSION, Record
from guard.report import MAX_NAMED, MAX_REPORT_BYTES, describe_discrepancy

# a record holds one arm's figures: never more than a report, which holds several arms'
MAX_RECORD_BYTES = MAX_REPORT_BYTES
_WRITTEN_BY = "pass the record.json that `guard record` wrote, unedited"


class RecordError(GuardError):
    """A record.json that is missing, too large, not a record of this schema, or whose figures
    or parts its own values do not give."""


def read_record(path: Path) -> Record:
    """The record at `path`, read as `parse_record` reads one."""
    try:
        with path.open("rb") as f:
            data = f.read(MAX_RECORD_BYTES + 1)  # a pipe has no size to stat: read no more than a record
    except OSError as exc:
        raise RecordError(f"cannot read {path}: {exc.strerror}; {_WRITTEN_BY}") from exc
    return parse_record(data, str(path))


def parse_record(data: bytes, where: str) -> Record:
    """The record in `data`, checked; RecordError naming what does not hold. `where` names it
    in the message (a path, or "the upload")."""
    if len(data) > MAX_RECORD_BYTES:
        raise RecordError(f"{where} holds more than the {MAX_RECORD_BYTES:,} bytes a record can be")
    version = _schema_version(data)
    if isinstance(version, int) and not isinstance(version, bool) and version != RECORD_SCHEMA_VERSION:
        raise RecordError(f"{where} is a record of schema_version {version}; this guard reads schema_version "
                          f"{RECORD_SCHEMA_VERSION} only: record the commit again with this guard (`guard record`)")
    try:
        record = Record.model_validate_json(data)
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(part) for part in first["loc"]) or "the top level"
        raise RecordError(f"{where} is not a valid record: {field}: {first['msg']}; {_WRITTEN_BY}") from exc
    found = record_discrepancies(record)
    if found:
        named = "; ".join(describe_discrepancy(d) for d in found[:MAX_NAMED])
        more = f"; and {len(found) - MAX_NAMED} more" if len(found) > MAX_NAMED else ""
        raise RecordError(f"{where} states figures or parts its own values do not give: {named}{more}; {_WRITTEN_BY}")
    return record


def record_discrepancies(record: Record) -> list[Discrepancy]:
    """What a record states that its own values do not give: the commit a full object name, a
    measured record's batch sizes the workload's, each once, and each batch size's figures its
    processes' (guard.compare's check of one arm); a record of a commit that did not build or
    run holds no figures. [] for a record that holds up."""
    found = []

    def wrong(field: str, stated: str, expected: str, batch_size: int | None = None) -> None:
        found.append(Discrepancy(kind="shape", batch_size=batch_size, field=field, stated=stated,
                                 recomputed=expected))

    if not is_commit_sha(record.arm.sha):
        wrong("arm.sha", "not a full hex commit sha", "40 or 64 hex digits")
    sizes = [b.batch_size for b in record.batch_sizes]
    if record.arm.status != "ok" and sizes:
        wrong("batch_sizes", f"{len(sizes)} measured", f"none (arm.status is {record.arm.status})")
    elif sizes and sorted(sizes) != sorted(set(record.workload.batch_sizes)):
        wrong("batch_sizes", ", ".join(map(str, sizes)),
              f"the workload's, each once ({', '.join(map(str, record.workload.batch_sizes))})")
    for batch in record.batch_sizes:
        stats = batch.stats
        if stats.arm != record.arm.name:
            wrong("stats.arm", "another arm's name", f"the record's arm ({record.arm.name[:40]})", batch.batch_size)
        elif not 1 <= stats.repeats <= record.arm.repeats:
            wrong("stats.repeats", str(stats.repeats), f"1 to {record.arm.repeats} (the arm's processes)",
                  batch.batch_size)
        else:
            found += arm_discrepancies(stats, batch.batch_size)
    return found


def _schema_version(text: bytes) -> object:
    try:
        data = pydantic_core.from_json(text)
    except ValueError:
        return None
    return data.get("schema_version") if isinstance(data, dict) else None
