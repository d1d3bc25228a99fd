"""The record of one commit: its build, the workload as it ran, the machine, and per batch size
the figures of every process, in the form a report's arms hold them."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel

from guard.compare import ArmStats
from guard.report import ArmInfo, Environment, WorkloadInfo

RECORD_FILE = "record.json"
RECORD_SCHEMA_VERSION = 1


class RecordedBatch(BaseModel):
    batch_size: int
    stats: ArmStats  # every process that measured it (guard.compare.arm_stats), none set aside


class Record(BaseModel):
    schema_version: Literal[1] = RECORD_SCHEMA_VERSION
    tool_version: str
    arm: ArmInfo  # its status says whether it built and ran
    workload: WorkloadInfo
    environment: Environment
    # the NVML state every process shared (guard.compare.check_measurements' summary, as a report
    # keeps it): with the environment, the GPU class whose series main's history puts it in
    gpu_fingerprint: dict[str, Any] = {}
    batch_sizes: list[RecordedBatch] = []  # none where the arm did not build or run
    started_at: str  # ISO 8601, UTC
    duration_s: float

    @property
    def measured(self) -> bool:
        return self.arm.status == "ok" and bool(self.batch_sizes)

    def gpu_timed(self) -> bool:
        """Steps were timed with CUDA events (on a GPU), not the host clock."""
        return any(b.stats.timer == "cuda_event" for b in self.batch_sizes)
