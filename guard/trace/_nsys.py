"""Nsight Systems SQLite export (`nsys export --type sqlite`) -> the columnar Trace.

Times there are already integer nanoseconds. Names are ids into the StringIds table.
Kernels and CUDA API calls are read; memcpy, memset and NVTX ranges when the export has them.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np

from guard._errors import TraceError
from guard.trace._figures import TraceWarning
from guard.trace._model import KERNEL, MEMCPY, MEMSET, ApiTable, GpuTable, RangeTable, Trace

_KERNELS = "CUPTI_ACTIVITY_KIND_KERNEL"
_RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
_MEMCPY = "CUPTI_ACTIVITY_KIND_MEMCPY"
_MEMSET = "CUPTI_ACTIVITY_KIND_MEMSET"
_NVTX = "NVTX_EVENTS"

# CUpti_ActivityMemcpyKind, spelled as Kineto names its memcpy records
_COPY_KIND = {
    1: "HtoD",
    2: "DtoH",
    3: "HtoA",
    4: "AtoH",
    5: "AtoA",
    6: "AtoD",
    7: "DtoA",
    8: "DtoD",
    9: "HtoH",
    10: "PtoP",
}

# CUPTI marks a GPU record it could not time with start = end = 0
_UNTIMED = "(start = 0 AND end = 0)"

# nsys serialises a thread as globalTid = (... << 48) | (pid << 24) | tid: the low 24 bits are the OS tid
_TID_MASK = 0xFFFFFF


def read_nsys_sqlite(path: Path) -> Trace:
    """Tables come back unsorted and unfiltered; read_trace sorts them and drops corrupt records."""
    source = str(path)
    try:
        con = sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise TraceError(f"cannot open SQLite file {source}: {exc}") from None
    try:
        return _read(con, source)
    except sqlite3.DatabaseError as exc:
        raise TraceError(
            f"{source} is a damaged SQLite file ({exc}); export it again with nsys export --type sqlite"
        ) from None
    finally:
        con.close()


def _read(con: sqlite3.Connection, source: str) -> Trace:
    tables = {name for (name,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if _KERNELS not in tables:
        raise TraceError(
            f"{source} is an SQLite file without a {_KERNELS} table: not an Nsight Systems export with "
            "CUDA kernels; profile with nsys --trace cuda and export with nsys export --type sqlite"
        )
    warnings: list[TraceWarning] = []
    strings = _Strings(con, "StringIds" in tables)

    name_column = next((c for c in ("demangledName", "shortName") if c in _columns(con, _KERNELS)), None)
    if name_column is None:
        raise TraceError(
            f"{source}: {_KERNELS} has neither demangledName nor shortName; the export is not one nsys writes"
        )
    untimed = sum(con.execute(f"SELECT COUNT(*) FROM {table} WHERE {_UNTIMED}").fetchone()[0]
                  for table in (_KERNELS, _MEMCPY, _MEMSET) if table in tables)
    if untimed:
        warnings.append(TraceWarning(kind="untimed_gpu_records", count=untimed))
    gpu = _gpu(con, tables, strings, name_column)
    if _RUNTIME not in tables:
        warnings.append(TraceWarning(kind="no_runtime_table"))
    return Trace(gpu=gpu, api=_api(con, tables, strings), ranges=_ranges(con, tables, strings), source=source,
                 format="nsys-sqlite", warnings=warnings)


def _gpu(con: sqlite3.Connection, tables: set[str], strings: _Strings, name_column: str) -> GpuTable:
    """The timed kernels, and the memcpy and memset records where the export has them, as one table."""
    kernels = _gpu_rows(con, _KERNELS, f"COALESCE({name_column}, -1)")
    parts = [(kernels, KERNEL, strings.names(kernels[5], "(unnamed kernel)"))]
    if _MEMCPY in tables:
        copies = _gpu_rows(con, _MEMCPY, "COALESCE(copyKind, 0)" if "copyKind" in _columns(con, _MEMCPY) else "0")
        parts.append((copies, MEMCPY, [f"Memcpy {_COPY_KIND.get(int(k), 'Unknown')}" for k in copies[5]]))
    if _MEMSET in tables:
        sets = _gpu_rows(con, _MEMSET, "0")
        parts.append((sets, MEMSET, ["Memset"] * len(sets[0])))
    names, name_ids = _interned([n for _, _, labels in parts for n in labels])
    start, end, device, stream, correlation = (np.concatenate([cols[i] for cols, _, _ in parts]) for i in range(5))
    return GpuTable(
        start_ns=start, end_ns=end, device=device, stream=stream, correlation=correlation,
        kind=np.concatenate([np.full(len(cols[0]), kind, np.int8) for cols, kind, _ in parts]),
        name_id=name_ids, names=names,
    )


def _gpu_rows(con: sqlite3.Connection, table: str, last: str) -> list[np.ndarray]:
    """A GPU table's timed records: start, end, device, stream, correlation and the column `last`."""
    return _rows(con, "SELECT start, end, deviceId, streamId, COALESCE(correlationId, -1), "
                      f"{last} FROM {table} WHERE NOT {_UNTIMED}", 6)


def _api(con: sqlite3.Connection, tables: set[str], strings: _Strings) -> ApiTable:
    """The CUDA runtime calls; none where the export has no runtime table."""
    if _RUNTIME in tables:
        calls = _rows(
            con,
            f"SELECT start, end, globalTid, COALESCE(correlationId, -1), COALESCE(nameId, -1) FROM {_RUNTIME}",
            5,
        )
    else:
        calls = [np.empty(0, np.int64)] * 5
    names, name_ids = _interned(strings.names(calls[4], "(unnamed API call)"))
    return ApiTable(start_ns=calls[0], end_ns=calls[1], tid=calls[2] & _TID_MASK, correlation=calls[3],
                    name_id=name_ids, names=names)


def _ranges(con: sqlite3.Connection, tables: set[str], strings: _Strings) -> RangeTable:
    """NVTX push/pop and start/end ranges; marks (no end) are not ranges and are left out."""
    rows = []
    if _NVTX in tables:
        columns = _columns(con, _NVTX)
        text = "text" if "text" in columns else "NULL"
        text_id = "textId" if "textId" in columns else "NULL"
        rows = con.execute(
            f"SELECT start, end, COALESCE(globalTid, -1), {text}, {text_id} FROM {_NVTX} WHERE end IS NOT NULL"
        ).fetchall()
    names, name_ids = _interned(
        [r[3] if r[3] is not None else strings.get(r[4], "(unnamed NVTX range)") for r in rows])
    return RangeTable(
        start_ns=np.array([r[0] for r in rows], dtype=np.int64),
        end_ns=np.array([r[1] for r in rows], dtype=np.int64),
        tid=np.array([r[2] for r in rows], dtype=np.int64) & _TID_MASK,
        name_id=name_ids,
        names=names,
    )


class _Strings:
    """The StringIds table, loaded once: id -> string."""

    def __init__(self, con: sqlite3.Connection, present: bool) -> None:
        self.by_id: dict[int, str] = dict(con.execute("SELECT id, value FROM StringIds")) if present else {}

    def get(self, string_id: int | None, missing: str) -> str:
        return self.by_id.get(string_id, missing) if string_id is not None else missing

    def names(self, ids: np.ndarray, missing: str) -> list[str]:
        unique, inverse = np.unique(ids, return_inverse=True)
        labels = [self.get(int(i), missing) for i in unique]
        return [labels[i] for i in inverse.ravel()]


def _columns(con: sqlite3.Connection, table: str) -> set[str]:
    return {row[1] for row in con.execute(f"PRAGMA table_info({table})")}


def _rows(con: sqlite3.Connection, sql: str, width: int) -> list[np.ndarray]:
    """A query's integer columns as int64 arrays."""
    rows = con.execute(sql).fetchall()
    if not rows:
        return [np.empty(0, np.int64) for _ in range(width)]
    table = np.array(rows, dtype=np.int64)
    return [table[:, i].copy() for i in range(width)]


def _interned(labels: list[str]) -> tuple[list[str], np.ndarray]:
    """Distinct labels in order of first appearance, and each label's index among them."""
    ids: dict[str, int] = {}
    index = np.fromiter((ids.setdefault(label, len(ids)) for label in labels), dtype=np.int32, count=len(labels))
    return list(ids), index
