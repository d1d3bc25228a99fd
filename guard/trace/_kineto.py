"""Kineto (PyTorch profiler) Chrome-trace JSON -> the columnar Trace, in exact integer ns.

Kineto writes times as decimal microseconds ("ts": 1712195495519689.047). A float64 holds
only about 16 significant digits, so an absolute timestamp would lose its nanoseconds;
the timestamps are therefore taken as raw number text and converted digit by digit.

Memory stays near the size of the file: the event list is cut into slices of about 2 MB
at the gaps between events, and each slice is decoded into structs holding only the
fields used here and folded into numpy columns before the next is decoded. A plain file is
read through a map of it (`read_kineto_mapped`), the slices already folded let go of, so
that the file is never resident whole either.
"""

from __future__ import annotations

import mmap
import re
from collections.abc import Callable, Iterator
from dataclasses import fields
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation
from pathlib import Path
from typing import Any, TypeVar

import msgspec
import numpy as np

from guard._errors import TraceError
from guard.trace._figures import TraceWarning
from guard.trace._model import KERNEL, MEMCPY, MEMSET, ApiTable, GpuTable, RangeTable, Trace

# Category spellings of current (lower case) and older Kineto versions
_GPU_KIND = {
    "kernel": KERNEL,
    "Kernel": KERNEL,
    "gpu_memcpy": MEMCPY,
    "Memcpy": MEMCPY,
    "gpu_memset": MEMSET,
    "Memset": MEMSET,
}
_API_CATS = frozenset({"cuda_runtime", "Runtime", "cuda_driver", "Driver"})
_STEP_PREFIX = "ProfilerStep#"
_STEP_CATS = frozenset({"cpu_op", "user_annotation"})

# Bytes of event text decoded at a time: large enough to amortise a decode call, small
# enough that a chunk's structs stay a few MB
_CHUNK_BYTES = 2 << 20
# The gap between two events: `}`, a comma, `{` opening an object with a key. Never inside
# a string (a quote there is escaped), but also found in nested lists of objects: a cut
# there leaves invalid JSON, which the decoder reports, and the next gap is tried
_EVENT_GAP = re.compile(rb'\}\s*,\s*\{(?=\s*")')
_MAX_WRONG_CUTS = 64  # per chunk; past these, the rest of the list is decoded in one piece

_MAX_POWER = 18
_POW10 = 10 ** np.arange(_MAX_POWER + 1, dtype=np.int64)
_NS_DECIMALS = 3  # microsecond text with 3 decimals is whole nanoseconds


class _Args(msgspec.Struct, gc=False):
    stream: int = -1
    device: int = -1
    correlation: int = -1


class _Event(msgspec.Struct, gc=False):
    ph: str = ""
    cat: str = ""
    name: str = ""
    pid: int | str = -1
    tid: int | str = -1
    ts: msgspec.Raw = None  # type: ignore[assignment]  # number text, converted exactly
    dur: msgspec.Raw = None  # type: ignore[assignment]
    args: _Args | None = None


class _LooseEvent(msgspec.Struct, gc=False):
    """Any type accepted: for chunks where some event (of a kind not read here, mostly)
    carries one of these keys with another type than Kineto's own events do."""

    ph: Any = None
    cat: Any = None
    name: Any = None
    pid: Any = None
    tid: Any = None
    ts: msgspec.Raw = None  # type: ignore[assignment]
    dur: msgspec.Raw = None  # type: ignore[assignment]
    args: Any = None


class _File(msgspec.Struct):
    traceEvents: msgspec.Raw  # noqa: N815  # the key Kineto writes; its text, validated as JSON


_NO_ARGS = _Args()
_FILE_DECODER = msgspec.json.Decoder(_File)
_CHUNK_DECODER = msgspec.json.Decoder(list[_Event])
_LOOSE_CHUNK_DECODER = msgspec.json.Decoder(list[_LooseEvent])


class _WrongCut(Exception):
    """A chunk was cut inside an event rather than between two."""


def _chunks(
    text: memoryview, at: int, end: int, source: str, done_before: Callable[[int], None] = lambda at: None,
) -> Iterator[list[_Event]]:
    """The events of the list whose items lie in text[at:end] (inside its brackets), a chunk
    of about _CHUNK_BYTES at a time; `done_before(at)` once the text before `at` is no longer read."""
    while at < end:
        done_before(at)
        search_from = at + _CHUNK_BYTES
        wrong_cuts = 0
        while True:
            gap = _EVENT_GAP.search(text, search_from, end) if search_from < end else None
            cut = gap.start() + 1 if gap else end
            chunk = bytearray(cut - at + 2)
            chunk[0], chunk[-1] = 0x5B, 0x5D  # [ ]
            chunk[1:-1] = text[at:cut]
            try:
                events = _decode_chunk(chunk, at, source)
            except _WrongCut:
                if gap is None:  # the whole rest failed: cannot be, the file was validated
                    raise TraceError(f"{source}: traceEvents could not be decoded; the file is damaged") from None
                wrong_cuts += 1
                search_from = gap.end() if wrong_cuts < _MAX_WRONG_CUTS else end
                continue
            break
        del chunk
        yield events
        at = gap.end() - 1 if gap else end


def _too_deep(source: str) -> str:
    # msgspec stops at Python's recursion limit, about a thousand levels; Kineto nests four
    return f"{source} nests JSON arrays or objects about a thousand levels deep; no profiler writes that: not a trace"


def _decode_chunk(chunk: bytearray, at: int, source: str) -> list[_Event]:
    # ValidationError (a wrong type) is a subclass of DecodeError (invalid JSON): caught first
    try:
        return _CHUNK_DECODER.decode(chunk)
    except msgspec.ValidationError:
        pass
    except msgspec.DecodeError:
        raise _WrongCut from None
    except RecursionError:
        raise TraceError(_too_deep(source)) from None
    try:
        loose = _LOOSE_CHUNK_DECODER.decode(chunk)
    except msgspec.ValidationError as exc:
        raise TraceError(
            f"{source}: an entry of traceEvents {at:,} bytes into the list is not an event object "
            f"({exc}); the file is not a Kineto trace"
        ) from None
    except msgspec.DecodeError:
        raise _WrongCut from None
    except RecursionError:
        raise TraceError(_too_deep(source)) from None
    return [_tidied(e) for e in loose]


def _tidied(e: _LooseEvent) -> _Event:
    """A loose event with every field of an unexpected type replaced by its default."""
    args = e.args if isinstance(e.args, dict) else {}
    return _Event(
        ph=_of(e.ph, str, ""),
        cat=_of(e.cat, str, ""),
        name=_of(e.name, str, ""),
        pid=_of(e.pid, (int, str), -1),
        tid=_of(e.tid, (int, str), -1),
        ts=e.ts,
        dur=e.dur,
        args=_Args(
            stream=_of(args.get("stream"), int, -1),
            device=_of(args.get("device"), int, -1),
            correlation=_of(args.get("correlation"), int, -1),
        ),
    )


def _of(value: Any, kind: type | tuple[type, ...], default: Any) -> Any:
    return value if isinstance(value, kind) and not isinstance(value, bool) else default


def _ints(values: list[int | str]) -> np.ndarray:
    """pid and tid are ints in GPU and API events, but strings ("Spans") elsewhere."""
    try:
        return np.array(values, dtype=np.int64)
    except (TypeError, ValueError):
        return np.array([v if type(v) is int else -1 for v in values], dtype=np.int64)


_T = TypeVar("_T", GpuTable, ApiTable, RangeTable)
# the dtypes of the columns that are not int64, as add() makes them
_EMPTY_DTYPE = {"kind": np.int8, "name_id": np.int32}


class _Table:
    """One table's columns, gathered chunk by chunk as numpy arrays."""

    def __init__(self) -> None:
        self.parts: dict[str, list[np.ndarray]] = {}
        self.name_ids: dict[str, int] = {}

    def add(self, events: list[_Event], source: str, **columns: np.ndarray) -> None:
        if not events:
            return
        start = microseconds_text_to_ns([e.ts for e in events], source)
        ids = self.name_ids
        columns["start_ns"] = start
        columns["end_ns"] = start + microseconds_text_to_ns([e.dur for e in events], source)
        columns["name_id"] = np.array([ids.setdefault(e.name, len(ids)) for e in events], dtype=np.int32)
        for key, values in columns.items():
            self.parts.setdefault(key, []).append(values)

    def table(self, kind: type[_T]) -> _T:
        """The `kind` these columns make, a column for each of its fields (an empty one with
        its dtype where no event had it)."""
        columns = {
            f.name: np.concatenate(self.parts[f.name]) if self.parts.get(f.name)
            else np.empty(0, dtype=_EMPTY_DTYPE.get(f.name, np.int64))
            for f in fields(kind) if f.name != "names"
        }
        return kind(**columns, names=self.names)

    @property
    def names(self) -> list[str]:
        return list(self.name_ids)


def read_kineto(data: bytes | memoryview, source: str, host_ops: bool = False) -> Trace:
    """Parse a Kineto trace held in `data` (uncompressed JSON). Tables come back in file
    order and unfiltered; read_trace sorts them and drops corrupt records. With `host_ops`,
    the CPU ops are kept too (Trace.host_ops)."""
    try:
        events_text = _FILE_DECODER.decode(data).traceEvents
    except msgspec.ValidationError as exc:
        raise TraceError(
            f"{source} is JSON but not a profiler trace ({exc}): expected an object with a "
            "'traceEvents' list, as torch.profiler's export_chrome_trace writes"
        ) from None
    except msgspec.DecodeError as exc:
        raise TraceError(
            f"{source} is not valid JSON ({exc}); the file may be truncated: export the trace again"
        ) from None
    except RecursionError:
        raise TraceError(_too_deep(source)) from None

    text = memoryview(events_text)  # a view into the file's buffer: no copy
    if text[:1] != b"[":
        raise TraceError(f"{source}: traceEvents is not a list; the file is not a Kineto trace")
    return _trace(_chunks(text, 1, len(text) - 1, source), source, host_ops)  # inside the brackets


_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
_NOT_SPACE = re.compile(rb"\S")


def read_kineto_mapped(path: Path, source: str, host_ops: bool = False) -> Trace | None:
    """A plain Kineto file read through a read-only map of it, the pages of each slice dropped
    once it is folded; None where the quick outline does not hold (not a regular file, no
    `"traceEvents": [` key, an outline that is not JSON, a slice that does not decode), for
    read_kineto on the whole file to read or to refuse with its message.

    The outline: the file with the list's items left out (before its `[`, after its last `]`)
    must decode as an object whose traceEvents is that empty list, and every slice decodes as
    a list of events, so the file as a whole is the JSON read_kineto would have decoded."""
    try:
        with path.open("rb") as f:
            mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):  # a pipe, a device: no map
        return None
    view = memoryview(mapped)
    try:
        first = _NOT_SPACE.search(view)
        found = _EVENTS_KEY.search(view) if first and first.group() == b"{" else None
        close = mapped.rfind(b"]")
        if found is None or close < found.end():
            return None
        start = found.end() - 1
        try:
            outline = _FILE_DECODER.decode(b"".join((view[:start], b"[]", view[close + 1:])))
        except (msgspec.DecodeError, RecursionError):
            return None
        if bytes(outline.traceEvents) != b"[]":  # another traceEvents key, later: the decoder's would win
            return None
        page = mmap.PAGESIZE

        def done_before(at: int) -> None:
            if at >= page:
                mapped.madvise(mmap.MADV_DONTNEED, 0, at - at % page)  # only the RSS: the file is unchanged

        try:
            return _trace(_chunks(view, start + 1, close, source, done_before), source, host_ops)
        except TraceError:
            return None
    finally:
        view.release()
        mapped.close()


def _trace(chunks: Iterator[list[_Event]], source: str, host_ops: bool = False) -> Trace:
    """The tables of the events `chunks` yield, in file order; the CPU ops too with `host_ops`."""
    gpu, api, ranges, ops = _Table(), _Table(), _Table(), _Table()
    untimed = 0
    for events in chunks:
        complete = [e for e in events if e.ph == "X"]
        del events
        untimed += _add_complete(complete, source, gpu, api, ranges, ops if host_ops else None)
    warnings = []
    if untimed:
        warnings.append(TraceWarning(kind="untimed_events", count=untimed))
    return Trace(
        gpu=gpu.table(GpuTable),
        api=api.table(ApiTable),
        ranges=ranges.table(RangeTable),
        source=source,
        format="kineto",
        warnings=warnings,
        host_ops=ops.table(RangeTable) if host_ops else None,
    )


def _add_complete(
    complete: list[_Event], source: str, gpu: _Table, api: _Table, ranges: _Table, ops: _Table | None
) -> int:
    """Add one chunk's complete events to the table each belongs in (the CPU ops only where `ops`
    is given); returns how many of them were left out for want of a start or a duration."""
    # Comprehensions, not one loop with branches: each is a tight loop, several times faster
    on_gpu = [e for e in complete if e.cat in _GPU_KIND]
    calls = [e for e in complete if e.cat in _API_CATS]
    marks = [
        e
        for e in complete
        if e.cat == "user_annotation" or (e.cat in _STEP_CATS and e.name.startswith(_STEP_PREFIX))
    ]
    # a ProfilerStep# op is a mark already: a step, not work done in one
    cpu = [e for e in complete if e.cat == "cpu_op" and not e.name.startswith(_STEP_PREFIX)] if ops is not None else []
    kept = len(on_gpu) + len(calls) + len(marks) + len(cpu)
    on_gpu, calls, marks, cpu = (
        [e for e in group if e.ts is not None and e.dur is not None] for group in (on_gpu, calls, marks, cpu)
    )

    gpu_args = [e.args or _NO_ARGS for e in on_gpu]
    stream = np.array([a.stream for a in gpu_args], dtype=np.int64)
    device = np.array([a.device for a in gpu_args], dtype=np.int64)
    # Kineto puts a GPU event's device in pid and its stream in tid, should args lack them
    stream = np.where(stream < 0, _ints([e.tid for e in on_gpu]), stream)
    device = np.where(device < 0, _ints([e.pid for e in on_gpu]), device)
    gpu.add(
        on_gpu,
        source,
        stream=stream,
        device=device,
        correlation=np.array([a.correlation for a in gpu_args], dtype=np.int64),
        kind=np.array([_GPU_KIND[e.cat] for e in on_gpu], dtype=np.int8),
    )
    api.add(
        calls,
        source,
        tid=_ints([e.tid for e in calls]),
        correlation=np.array([(e.args or _NO_ARGS).correlation for e in calls], dtype=np.int64),
    )
    ranges.add(marks, source, tid=_ints([e.tid for e in marks]))
    if ops is not None:
        ops.add(cpu, source, tid=_ints([e.tid for e in cpu]))
    return kept - len(on_gpu) - len(calls) - len(marks) - len(cpu)


def microseconds_text_to_ns(numbers: list[msgspec.Raw], source: str) -> np.ndarray:
    """Decimal microsecond texts (JSON numbers) -> int64 nanoseconds, exactly.

    Vectorised over the numbers: for each power of ten of a nanosecond, the digit holding
    it is found at a fixed offset from each number's decimal point, and added in int64.
    """
    if not numbers:
        return np.empty(0, dtype=np.int64)
    text = b" ".join(numbers) + b" "
    c = np.frombuffer(text, dtype=np.uint8)
    is_space = c == 0x20
    is_dot = c == 0x2E
    if not np.all((c - 0x30 < 10) | is_dot | is_space | (c == 0x2D)):
        # exponents ("1e-05"), strings or nulls: rare, so taken one by one
        return np.array([_ns_one(n, source) for n in numbers], dtype=np.int64)
    ends = np.flatnonzero(is_space)  # one past each number
    starts = np.empty_like(ends)
    starts[0] = 0
    starts[1:] = ends[:-1] + 1
    negative = c[starts] == 0x2D
    first_digit = starts + negative
    dots = np.flatnonzero(is_dot)
    if len(dots) == len(ends):
        point = dots  # JSON allows one point per number, so here each has exactly one
    else:
        point = ends.copy()  # a number without a decimal point has it at its end
        point[np.searchsorted(ends, dots)] = dots
    decimals = np.maximum(ends - point - 1, 0)
    if decimals.max() > _NS_DECIMALS:
        # finer than a nanosecond: rounded one by one
        return np.array([_ns_one(n, source) for n in numbers], dtype=np.int64)
    top_power = int((point - first_digit).max()) - 1 + _NS_DECIMALS
    if top_power > _MAX_POWER:
        raise TraceError(
            f"{source}: a timestamp is too large to be microseconds ({_first_large(numbers)}); the trace is corrupt"
        )
    ns = np.zeros(len(ends), dtype=np.int64)
    for power in range(top_power + 1):
        if power < _NS_DECIMALS:
            at = point + (_NS_DECIMALS - power)
            present = at < ends
        else:
            at = point - (power - _NS_DECIMALS + 1)
            present = at >= first_digit
        digit = np.where(present, c[np.where(present, at, 0)].astype(np.int64) - 0x30, 0)
        if power == _MAX_POWER and digit.max() > 8:
            # int64 ns end near 9.2e18
            raise TraceError(
                f"{source}: a timestamp is too large to be microseconds ({_first_large(numbers)}); the trace is corrupt"
            )
        ns += digit * _POW10[power]
    ns[negative] = -ns[negative]
    return ns


def _ns_one(number: msgspec.Raw, source: str) -> int:
    text = bytes(number).decode("utf-8", "replace")
    try:
        value = Decimal(text)
    except InvalidOperation:
        value = Decimal("NaN")
    if not value.is_finite():
        raise TraceError(f"{source}: a timestamp or duration is not a number ({text[:40]}); the trace is corrupt")
    ns = int((value * 1000).to_integral_value(ROUND_HALF_EVEN))
    if abs(ns) >= 9 * 10**_MAX_POWER:
        raise TraceError(f"{source}: a timestamp is too large to be microseconds ({text[:40]}); the trace is corrupt")
    return ns


def _first_large(numbers: list[msgspec.Raw]) -> str:
    return max((bytes(n) for n in numbers), key=len).decode("utf-8", "replace")[:40]
