"""The columnar form every trace reader produces: integer nanoseconds, one array per field.

Readers (Kineto JSON, Nsight Systems SQLite) fill these tables; the analysis reads only
them. Times are int64 nanoseconds on the trace's own clock; only differences matter.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from guard.trace._figures import TraceWarning

# Kinds of GPU activity in GpuTable.kind
KERNEL = 0
MEMCPY = 1
MEMSET = 2


@dataclass(frozen=True)
class GpuTable:
    """GPU activities (kernels, memcpy, memset), sorted by start_ns."""

    start_ns: np.ndarray  # int64
    end_ns: np.ndarray  # int64
    stream: np.ndarray  # int64
    device: np.ndarray  # int64
    correlation: np.ndarray  # int64; links to ApiTable.correlation, -1 when unknown
    kind: np.ndarray  # int8: KERNEL, MEMCPY, MEMSET
    name_id: np.ndarray  # int32 index into `names`
    names: list[str]

    def __len__(self) -> int:
        return len(self.start_ns)


@dataclass(frozen=True)
class ApiTable:
    """CUDA runtime and driver API calls on the host, sorted by start_ns."""

    start_ns: np.ndarray  # int64
    end_ns: np.ndarray  # int64
    tid: np.ndarray  # int64 host thread
    correlation: np.ndarray  # int64, -1 when unknown
    name_id: np.ndarray  # int32 index into `names`
    names: list[str]

    def __len__(self) -> int:
        return len(self.start_ns)


@dataclass(frozen=True)
class RangeTable:
    """Host-side ranges that may mark steps: `ProfilerStep#N`, user annotations
    (record_function, NVTX), sorted by start_ns."""

    start_ns: np.ndarray  # int64
    end_ns: np.ndarray  # int64
    tid: np.ndarray  # int64
    name_id: np.ndarray  # int32 index into `names`
    names: list[str]

    def __len__(self) -> int:
        return len(self.start_ns)


@dataclass(frozen=True)
class Trace:
    gpu: GpuTable
    api: ApiTable
    ranges: RangeTable
    source: str  # the file it was read from
    format: str  # "kineto" or "nsys-sqlite"
    warnings: list[TraceWarning] = field(default_factory=list)  # records filtered out, and why
    # CPU ops (aten::mm, c10d::allreduce_, ...), read only when asked for: a CPU-only trace's work
    host_ops: RangeTable | None = None
