"""read_trace: open a profiler trace of any supported format, by its content, not its name.

Gzip, SQLite (Nsight Systems export) and JSON (Kineto) are told apart by their first bytes.
Whatever the format, the tables come back sorted by start, with corrupt records dropped
and named in Trace.warnings, and a trace without GPU kernels is refused.
"""

from __future__ import annotations

import dataclasses
import gzip
import mmap
import re
import zlib
from pathlib import Path
from typing import TypeVar

import numpy as np

from guard._errors import TraceError
from guard.trace._kineto import read_kineto
from guard.trace._model import KERNEL, ApiTable, GpuTable, RangeTable, Trace
from guard.trace._nsys import read_nsys_sqlite

_GZIP_MAGIC = b"\x1f\x8b"
_SQLITE_MAGIC = b"SQLite format 3\x00"
_GUNZIP_INPUT_BYTES = 1 << 16  # compressed; its output (up to ~30x) is copied into place
_NOT_SPACE = re.compile(rb"\S")

# No decode-step kernel runs for 10 s; profilers do emit records with a garbage end
# (a missed completion), which show up as such durations or as end < start
MAX_GPU_DURATION_NS = 10 * 1_000_000_000

_Table = TypeVar("_Table", GpuTable, ApiTable, RangeTable)


def read_trace(path: Path) -> Trace:
    """Read a Kineto JSON trace (plain or gzipped) or an Nsight Systems SQLite export."""
    path = Path(path)
    source = str(path)
    try:
        with path.open("rb") as f:
            head = f.read(len(_SQLITE_MAGIC))
    except FileNotFoundError:
        raise TraceError(f"trace file {source} does not exist; check the path") from None
    except IsADirectoryError:
        raise TraceError(f"{source} is a directory; give the path of one trace file") from None
    except OSError as exc:
        raise TraceError(f"cannot read trace file {source}: {exc.strerror}") from None
    if not head:
        raise TraceError(f"trace file {source} is empty; the profiler did not finish writing it, record it again")
    if head.startswith(_SQLITE_MAGIC):
        trace = read_nsys_sqlite(path)
    else:
        raw = path.read_bytes()
        data = _gunzip(raw, source) if head.startswith(_GZIP_MAGIC) else raw
        del raw
        _check_json_start(data, source)
        trace = read_kineto(data, source)
        del data  # before sorting: the tables are all that is needed now
    return _finished(trace)


def _gunzip(data: bytes, source: str) -> bytes | memoryview:
    try:
        text = _gunzip_into_place(data)
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise TraceError(
            f"{source} is a truncated or corrupt gzip file ({exc}); copy or export the trace again"
        ) from None
    if not len(text):
        raise TraceError(f"{source} is gzip of an empty file; the profiler did not finish writing it, record it again")
    if bytes(text[: len(_SQLITE_MAGIC)]) == _SQLITE_MAGIC:
        raise TraceError(f"{source} is a gzipped SQLite file; decompress it (gunzip) and pass the .sqlite file")
    return text


def _gunzip_into_place(data: bytes) -> bytes | memoryview:
    """Decompress into one buffer sized from the gzip trailer: gzip.decompress gathers the
    output in blocks and joins them, which briefly needs twice the uncompressed size.

    The buffer is anonymous memory, which the kernel hands out a page at a time as it is
    written: a truncated file's trailer is garbage, up to 4 GiB, and must not cost that.
    """
    # ISIZE, a member's last 4 bytes: its uncompressed size mod 2^32
    size = int.from_bytes(data[-4:], "little")
    out = mmap.mmap(-1, max(size, 1))
    filled = 0
    inflate = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)  # expect a gzip header
    view = memoryview(data)
    for at in range(0, len(data), _GUNZIP_INPUT_BYTES):
        piece = inflate.decompress(view[at : at + _GUNZIP_INPUT_BYTES])
        if filled + len(piece) > size:
            # the trailer does not hold this member's size: over 4 GiB, or several members
            out.close()
            return gzip.decompress(data)
        out[filled : filled + len(piece)] = piece
        filled += len(piece)
        if inflate.eof:
            break
    if not inflate.eof:
        raise EOFError("compressed data ended before the end-of-stream marker")
    if inflate.unused_data.strip(b"\x00"):
        out.close()
        return gzip.decompress(data)  # several gzip members (concatenated files): rare
    return memoryview(out)[:filled]


def _check_json_start(data: bytes | memoryview, source: str) -> None:
    found = _NOT_SPACE.search(data)  # not data.lstrip(): that copies the whole file
    first = found.group() if found else b""
    if not first:
        raise TraceError(f"trace file {source} holds only whitespace; record the trace again")
    if first not in (b"{", b"["):
        raise TraceError(
            f"{source} is not a trace: not JSON, gzip or SQLite; pass a Kineto trace "
            "(.json or .json.gz from torch.profiler) or an Nsight Systems export (nsys export --type sqlite)"
        )


def _finished(trace: Trace) -> Trace:
    """Drop impossible records, sort every table by start, refuse a trace without kernels."""
    warnings = list(trace.warnings)
    gpu_duration = trace.gpu.end_ns - trace.gpu.start_ns
    gpu_bad = (gpu_duration < 0) | (gpu_duration > MAX_GPU_DURATION_NS)
    gpu = _kept(
        trace.gpu, gpu_bad, "GPU", f"end before start or longer than {MAX_GPU_DURATION_NS // 10**9} s", warnings
    )
    api = _kept(trace.api, trace.api.end_ns < trace.api.start_ns, "CUDA API", "end before start", warnings)
    ranges = _kept(trace.ranges, trace.ranges.end_ns < trace.ranges.start_ns, "range", "end before start", warnings)
    if not np.any(gpu.kind == KERNEL):
        dropped = int(np.count_nonzero(gpu_bad))
        also = f" ({dropped} GPU record{'s were' if dropped > 1 else ' was'} dropped as corrupt)" if dropped else ""
        raise TraceError(
            f"{trace.source} holds no GPU kernels{also}; record it with GPU activity on "
            "(torch.profiler activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], or nsys --trace cuda)"
        )
    return dataclasses.replace(trace, gpu=gpu, api=api, ranges=ranges, warnings=warnings)


def _kept(table: _Table, bad: np.ndarray, what: str, why: str, warnings: list[str]) -> _Table:
    """The table without the `bad` rows, sorted by start_ns (stable, so file order breaks ties)."""
    dropped = int(np.count_nonzero(bad))
    if dropped:
        warnings.append(f"{dropped} {what} record{'s' if dropped > 1 else ''} dropped as corrupt: {why}")
        keep = np.flatnonzero(~bad)
        order = keep[np.argsort(table.start_ns[keep], kind="stable")]
    else:
        order = np.argsort(table.start_ns, kind="stable")
    columns = {
        f.name: getattr(table, f.name)[order]
        for f in dataclasses.fields(table)
        if isinstance(getattr(table, f.name), np.ndarray)
    }
    return dataclasses.replace(table, **columns)
