"""The GPU class of a report: which series its points join. A different GPU model, driver or
power/clock limit is a different series; a different card of the same model is not."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from guard.history._models import GpuClass
from guard.report import Environment

# GPU fingerprint keys (guard/compare/_fingerprint.py) that decide the class, and the field each fills
_STATE_FIELDS = {
    "name": "gpu",
    "driver_version": "driver",
    "cuda_driver_version": "cuda_driver",
    "mig_mode_current": "mig_mode",
    "power_limit_w": "power_limit_w",
    "max_sm_clock_mhz": "max_sm_clock_mhz",
    "max_mem_clock_mhz": "max_mem_clock_mhz",
}
_NUMBERS = ("power_limit_w", "max_sm_clock_mhz", "max_mem_clock_mhz")


def gpu_class(environment: Environment, gpu_fingerprint: dict[str, Any]) -> GpuClass:
    """`gpu_fingerprint`: the report's, the NVML state every repeat shared."""
    fields: dict[str, Any] = {"gpu": environment.gpu, "gpu_capability": environment.gpu_capability,
                              "driver": environment.driver}
    for state_key, field in _STATE_FIELDS.items():
        value = gpu_fingerprint.get(state_key)
        if value is not None and fields.get(field) is None:
            fields[field] = value
    for field in _NUMBERS:  # read back from a report: keep a number or nothing
        if not isinstance(fields.get(field), (int, float)) or isinstance(fields.get(field), bool):
            fields[field] = None
    for field, value in list(fields.items()):
        if value is not None and field not in _NUMBERS:
            fields[field] = str(value)
    if fields["gpu"] is None:
        fields["cpu"] = environment.cpu
    digest = hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:10]
    stem = _slug(fields["gpu"] or f"cpu {fields.get('cpu') or 'unknown'}")
    return GpuClass(key=f"{stem}-{digest}", **fields)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:40] or "unknown"
