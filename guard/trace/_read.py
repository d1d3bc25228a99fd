"""read_trace: open a profiler trace of any supported format, by its content, not its name.

Gzip, SQLite (Nsight Systems export) and JSON (Kineto) are told apart by their first bytes.
Whatever the format, the tables come back sorted by start, with corrupt records dropped
and named in Trace.warnings, and a trace without GPU kernels is refused.
"""

from __future__ import annotations

import dataclasses
import mmap
import os
import re
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import TypeVar

import numpy as np

from guard._errors import TraceError
from guard._types import MAX_TRACE_BYTES
from guard.trace._figures import TraceWarning
from guard.trace._kineto import read_kineto, read_kineto_mapped
from guard.trace._model import KERNEL, ApiTable, GpuTable, RangeTable, Trace
from guard.trace._nsys import read_nsys_sqlite

_GZIP_MAGIC = b"\x1f\x8b"
_SQLITE_MAGIC = b"SQLite format 3\x00"
_GUNZIP_INPUT_BYTES = 1 << 16  # compressed, fed to zlib at a time
_INFLATE_PIECE_BYTES = 1 << 20  # output inflated at a time: copied into place, then dropped
_NOT_SPACE = re.compile(rb"\S")

# No decode-step kernel runs for 10 s; profilers do emit records with a garbage end
# (a missed completion), which show up as such durations or as end < start
MAX_GPU_DURATION_NS = 10 * 1_000_000_000

_Table = TypeVar("_Table", GpuTable, ApiTable, RangeTable)


def read_trace(path: Path, max_bytes: int = MAX_TRACE_BYTES, host_ops: bool = False) -> Trace:
    """Read a Kineto JSON trace (plain or gzipped) or an Nsight Systems SQLite export.
    A trace of more than `max_bytes` (uncompressed) is refused before it is held in memory.
    With `host_ops`, a Kineto trace's CPU ops are kept too, and a trace of CPU work alone
    (no GPU kernels, as a CPU-only run writes) is read rather than refused."""
    path = Path(path)
    source = str(path)
    try:
        with path.open("rb") as f:
            head = f.read(len(_SQLITE_MAGIC))
            size = os.fstat(f.fileno()).st_size
    except FileNotFoundError:
        raise TraceError(f"trace file {source} does not exist; check the path") from None
    except IsADirectoryError:
        raise TraceError(f"{source} is a directory; give the path of one trace file") from None
    except OSError as exc:
        raise TraceError(f"cannot read trace file {source}: {exc.strerror}") from None
    if not head:
        raise TraceError(f"trace file {source} is empty; the profiler did not finish writing it, record it again")
    if size > max_bytes:
        raise TraceError(_too_large(source, f"is {size:,} bytes, more than", max_bytes))
    if head.startswith(_SQLITE_MAGIC):
        trace = read_nsys_sqlite(path)
    elif not head.startswith(_GZIP_MAGIC) and (mapped := read_kineto_mapped(path, source, host_ops)) is not None:
        trace = mapped
    else:  # gzip, or a file the map does not read: held whole, and refused with the reason where it is no trace
        raw = _read_at_most(path, max_bytes, source)
        data = _gunzip(raw, source, max_bytes) if head.startswith(_GZIP_MAGIC) else raw
        del raw
        _check_json_start(data, source)
        trace = read_kineto(data, source, host_ops)
        del data  # before sorting: the tables are all that is needed now
    return _finished(trace, kernels_required=not host_ops)


def _read_at_most(path: Path, max_bytes: int, source: str) -> bytes:
    """The file's bytes; a pipe or device (no size to check first) is read no further than the cap."""
    with path.open("rb") as f:
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise TraceError(_too_large(source, "holds more than", max_bytes))
    return data


def _too_large(source: str, found: str, max_bytes: int) -> str:
    return (
        f"{source} {found} the {max_bytes:,} bytes a trace may be uncompressed; a decode trace of a few "
        "hundred steps is far smaller: profile fewer steps, or raise the limit (guard analyze --max-trace-mib)"
    )


def _gunzip(data: bytes, source: str, max_bytes: int) -> bytes | memoryview:
    try:
        text = _gunzip_into_place(data, max_bytes)
    except _TooLarge:
        raise TraceError(_too_large(source, "expands to more than", max_bytes)) from None
    except (EOFError, zlib.error) as exc:
        raise TraceError(
            f"{source} is a truncated or corrupt gzip file ({exc}); copy or export the trace again"
        ) from None
    if not len(text):
        raise TraceError(f"{source} is gzip of an empty file; the profiler did not finish writing it, record it again")
    if bytes(text[: len(_SQLITE_MAGIC)]) == _SQLITE_MAGIC:
        raise TraceError(f"{source} is a gzipped SQLite file; decompress it (gunzip) and pass the .sqlite file")
    return text


class _TooLarge(Exception):
    """The gzip stream expands past the cap."""


def _gunzip_into_place(data: bytes, max_bytes: int) -> memoryview:
    """Decompress into one buffer of the uncompressed size: gzip.decompress gathers the
    output in blocks and joins them, which briefly needs twice that.

    The size comes from the gzip trailer (ISIZE, a member's last 4 bytes: its size mod
    2^32), which is wrong for several members or a truncated file; then the stream is
    inflated once only to count, and again into a buffer of the counted size. The buffer is
    anonymous memory, handed out by the kernel a page at a time as it is written, and no
    more than `max_bytes` of it is ever asked for.
    """
    size = int.from_bytes(data[-4:], "little")
    if 0 < size <= max_bytes:
        filled = _inflate_into(data, size)
        if filled is not None:
            return filled
    size = sum(len(piece) for piece in _inflate(data, max_bytes))
    filled = _inflate_into(data, size)
    assert filled is not None  # the same stream, inflated again
    return filled


def _inflate_into(data: bytes, size: int) -> memoryview | None:
    """The stream inflated into a buffer of `size` bytes; None when it holds more."""
    out = mmap.mmap(-1, max(size, 1))
    filled = 0
    try:
        for piece in _inflate(data, size):
            out[filled : filled + len(piece)] = piece
            filled += len(piece)
    except _TooLarge:
        out.close()
        return None
    return memoryview(out)[:filled]


def _inflate(data: bytes, max_bytes: int) -> Iterator[bytes]:
    """Pieces of at most _INFLATE_PIECE_BYTES of every gzip member in `data`, in order;
    _TooLarge once more than `max_bytes` came out, EOFError when the stream is cut short."""
    view = memoryview(data)
    at, total = 0, 0
    while True:
        inflate = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)  # expect a gzip header
        while not inflate.eof:
            if at >= len(view):
                raise EOFError("compressed data ended before the end-of-stream marker")
            # fed a slice at a time: the tail zlib hands back is a copy
            pending: bytes | memoryview = view[at : at + _GUNZIP_INPUT_BYTES]
            at += len(pending)
            while pending and not inflate.eof:
                piece = inflate.decompress(pending, _INFLATE_PIECE_BYTES)
                pending = inflate.unconsumed_tail
                total += len(piece)
                if total > max_bytes:
                    raise _TooLarge
                if piece:
                    yield piece
        at -= len(inflate.unused_data)  # the input past this member's end
        if at >= len(view) or (view[at] == 0 and not bytes(view[at:]).strip(b"\x00")):  # gzip ignores them too
            return


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


def _finished(trace: Trace, kernels_required: bool = True) -> Trace:
    """Drop impossible records, sort every table by start, refuse a trace without kernels
    (without kernels and CPU work when kernels are not required)."""
    warnings = list(trace.warnings)
    gpu_duration = trace.gpu.end_ns - trace.gpu.start_ns
    gpu_bad = (gpu_duration < 0) | (gpu_duration > MAX_GPU_DURATION_NS)
    gpu = _kept(trace.gpu, gpu_bad, TraceWarning(kind="corrupt_records", table="gpu",
                                                why="end_before_start_or_too_long",
                                                limit_s=MAX_GPU_DURATION_NS // 10**9), warnings)
    api = _kept(trace.api, trace.api.end_ns < trace.api.start_ns,
                TraceWarning(kind="corrupt_records", table="api", why="end_before_start"), warnings)
    ranges = _kept(trace.ranges, trace.ranges.end_ns < trace.ranges.start_ns,
                   TraceWarning(kind="corrupt_records", table="range", why="end_before_start"), warnings)
    host_ops = trace.host_ops
    if host_ops is not None:
        host_ops = _kept(host_ops, host_ops.end_ns < host_ops.start_ns,
                         TraceWarning(kind="corrupt_records", table="range", why="end_before_start"), warnings)
    if not np.any(gpu.kind == KERNEL) and kernels_required:
        dropped = int(np.count_nonzero(gpu_bad))
        also = f" ({dropped} GPU record{'s were' if dropped > 1 else ' was'} dropped as corrupt)" if dropped else ""
        raise TraceError(
            f"{trace.source} holds no GPU kernels{also}; record it with GPU activity on "
            "(torch.profiler activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], or nsys --trace cuda)"
        )
    if not np.any(gpu.kind == KERNEL) and (host_ops is None or not len(host_ops)) and not len(ranges):
        raise TraceError(
            f"{trace.source} holds neither GPU kernels nor CPU ops; record it with torch.profiler "
            "activities=[ProfilerActivity.CPU] (and ProfilerActivity.CUDA on a GPU)"
        )
    return dataclasses.replace(trace, gpu=gpu, api=api, ranges=ranges, host_ops=host_ops, warnings=warnings)


def _kept(table: _Table, bad: np.ndarray, said: TraceWarning, warnings: list[TraceWarning]) -> _Table:
    """The table without the `bad` rows, sorted by start_ns (stable, so file order breaks ties);
    `said`, with the count, joins `warnings` when rows are dropped."""
    dropped = int(np.count_nonzero(bad))
    if dropped:
        warnings.append(said.model_copy(update={"count": dropped}))
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
