"""Like for like on the hardware: the arms must have run on the same GPU, driver and software,
and a repeat that ran on a throttled or shared GPU is flagged.

The input is the "fingerprint" each harness process writes ({"before": {...}, "after": {...}},
see guard/harness/_fingerprint.py), per arm in the order the repeats ran.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from guard.compare._reasons import Reason, SeenValue
from guard.compare._warnings import (
    ClocksHeld, GpuProcess, HeldDown, NoFingerprint, OtherProcesses, PersistenceOff, RunWarning, SmClockFell,
)
from guard.measure import ArmMeasurement

# Fields that change timing when they differ: (key, what to call it).
IDENTITY_FIELDS: tuple[tuple[str, str], ...] = (
    ("name", "GPU model"),
    ("uuid", "GPU (UUID)"),
    ("mig_device_uuid", "MIG instance"),
    ("driver_version", "driver version"),
    ("cuda_driver_version", "CUDA driver version"),
    ("torch_version", "torch version"),
    ("torch_cuda", "torch's CUDA version"),
    ("mig_mode_current", "MIG mode"),
    ("power_limit_w", "power limit (W)"),
    ("enforced_power_limit_w", "enforced power limit (W)"),
    ("max_sm_clock_mhz", "max SM clock (MHz)"),
    ("max_mem_clock_mhz", "max memory clock (MHz)"),
)

# Reasons that lower clocks without meaning the GPU was held back by heat or power.
BENIGN_CLOCK_REASONS = frozenset({"gpu_idle", "applications_clocks_setting"})

# An SM clock at the end this much below the start's is a throttled GPU, not noise.
SM_CLOCK_DROP_FRACTION = 0.15

# Time held below clocks by the power or thermal policy, as a share of the run, worth a warning.
VIOLATION_SHARE = 0.01

# What holds clocks down, each with its NVML counter of time held (`<by>_violation_ns`).
HELD_BY: tuple[Literal["power", "thermal"], ...] = ("power", "thermal")

# Readings of the moment and bookkeeping: not a description of the environment, even when equal.
_NOT_SUMMARISED = frozenset({
    "collected_at", "errors", "own_process_listed", "cuda_device_index", "matched_by",
    "sm_clock_mhz", "mem_clock_mhz", "clock_event_reasons_mask", "clock_event_reasons",
    "power_violation_ns", "thermal_violation_ns", "power_draw_w", "temperature_c", "other_processes",
})


class GpuFingerprint(BaseModel):
    """One snapshot from harness/_fingerprint.py, fields in the order it writes them; a field it
    could not read is None, and keys this model does not know are kept."""

    model_config = ConfigDict(extra="allow", frozen=True)

    available: bool = False
    reason: str | None = None  # why not available
    collected_at: float | None = None  # unix time
    matched_by: str | None = None  # how the CUDA device was found in NVML: uuid, pci_bus_id, only_device
    cuda_device_index: int | None = None
    cuda_visible_devices: str | None = None
    name: str | None = None
    uuid: str | None = None
    mig_device_uuid: str | None = None
    pci_bus_id: str | None = None
    driver_version: str | None = None
    cuda_driver_version: str | None = None
    torch_version: str | None = None
    torch_cuda: str | None = None
    sm_clock_mhz: int | None = None
    mem_clock_mhz: int | None = None
    max_sm_clock_mhz: int | None = None
    max_mem_clock_mhz: int | None = None
    app_sm_clock_mhz: int | None = None
    app_mem_clock_mhz: int | None = None
    clock_event_reasons_mask: int | None = None
    clock_event_reasons: list[str] | None = None
    power_violation_ns: int | None = None  # cumulative since the driver loaded
    thermal_violation_ns: int | None = None
    power_limit_w: float | None = None
    enforced_power_limit_w: float | None = None
    power_draw_w: float | None = None
    temperature_c: int | None = None
    persistence_mode: bool | None = None
    compute_mode: str | None = None
    mig_mode_current: bool | None = None
    mig_mode_pending: bool | None = None
    ecc_mode_current: bool | None = None
    ecc_mode_pending: bool | None = None
    other_processes: list[dict[str, Any]] | None = None  # {"pid", "used_memory_mib", "kind"}
    own_process_listed: bool | None = None
    errors: dict[str, str] = {}  # field -> the NVML error that left it None


class RepeatFingerprint(BaseModel):
    """The snapshots of one harness process, at its start and at its end."""

    model_config = ConfigDict(frozen=True)

    arm: str
    repeat: int  # 1-based, as the comment shows it
    before: GpuFingerprint
    after: GpuFingerprint

    def snapshots(self) -> list[tuple[str, GpuFingerprint]]:
        return [("start", self.before), ("end", self.after)]


class FingerprintCheck(BaseModel):
    """`invalid_reasons`: the arms are not like for like, so no timing verdict holds;
    `warnings`: repeats whose timings may be off; `summary`: what every repeat shares."""

    invalid_reasons: list[Reason] = []
    warnings: list[RunWarning] = []
    summary: dict[str, Any] = {}

    @property
    def invalid(self) -> bool:
        return bool(self.invalid_reasons)


def check_measurements(measurements: dict[str, ArmMeasurement]) -> FingerprintCheck:
    """check_fingerprints over the repeats each arm finished, numbered as they ran."""
    return check_fingerprints(
        {name: [r.fingerprint | {"repeat": r.repeat} for r in m.repeats] for name, m in measurements.items()}
    )


def check_fingerprints(by_arm: dict[str, list[dict[str, Any]]]) -> FingerprintCheck:
    """by_arm: per arm, the fingerprint of each repeat ({"before", "after"}), in the order they ran.
    A 0-based "repeat" key, where present, numbers the repeat; else its position does."""
    repeats = {arm: [_parse(arm, i, raw) for i, raw in enumerate(items)] for arm, items in by_arm.items()}
    every = [r for items in repeats.values() for r in items]
    known = [snap for r in every for _, snap in r.snapshots() if snap.available]
    if not known:  # no GPU anywhere (or an older harness): nothing to compare
        reasons = {snap.reason for r in every for _, snap in r.snapshots() if snap.reason}
        summary: dict[str, Any] = {"available": False}
        if len(reasons) == 1:
            summary["reason"] = reasons.pop()
        return FingerprintCheck(summary=summary)
    return FingerprintCheck(
        invalid_reasons=_identity_reasons(repeats),
        warnings=_unavailable_warnings(repeats) + [w for r in every for w in _repeat_warnings(r)],
        summary=_summary(known),
    )


def _parse(arm: str, position: int, raw: dict[str, Any]) -> RepeatFingerprint:
    missing = {"available": False, "reason": "not recorded (a harness without fingerprints)"}
    repeat = raw.get("repeat")
    return RepeatFingerprint(
        arm=arm,
        repeat=(repeat if isinstance(repeat, int) else position) + 1,
        before=GpuFingerprint.model_validate(raw.get("before") or missing),
        after=GpuFingerprint.model_validate(raw.get("after") or missing),
    )


def _identity_reasons(repeats: dict[str, list[RepeatFingerprint]]) -> list[Reason]:
    reasons = []
    for key, _ in IDENTITY_FIELDS:
        # arm -> value -> repeats that saw it; unknown values are left out (nothing to compare)
        seen: dict[str, dict[Any, list[int]]] = {}
        for arm, items in repeats.items():
            for r in items:
                for _, snap in r.snapshots():
                    value = getattr(snap, key, None)
                    if snap.available and value is not None:
                        where = seen.setdefault(arm, {}).setdefault(value, [])
                        if r.repeat not in where:
                            where.append(r.repeat)
        for arm, values in seen.items():
            if len(values) > 1:
                reasons.append(Reason(kind="arm_changed_between_repeats", arm=arm, field=key, seen=[
                    SeenValue(value=_show(v), repeats=sorted(n)) for v, n in values.items()]))
        single = {arm: next(iter(values)) for arm, values in seen.items() if len(values) == 1}
        if len(set(single.values())) > 1:
            reasons.append(Reason(kind="arms_differ", field=key, seen=[
                SeenValue(value=_show(value), arm=arm) for arm, value in single.items()]))
    return reasons


def _unavailable_warnings(repeats: dict[str, list[RepeatFingerprint]]) -> list[RunWarning]:
    warnings: list[RunWarning] = []
    for arm, items in repeats.items():
        missing = [r for r in items if not (r.before.available or r.after.available)]
        if missing:
            reason = missing[0].before.reason or missing[0].after.reason or "unknown"
            warnings.append(NoFingerprint(arm=arm, repeats=sorted(r.repeat for r in missing),
                                          every=len(missing) == len(items), reason=reason))
    return warnings


def _repeat_warnings(r: RepeatFingerprint) -> list[RunWarning]:
    where = {"arm": r.arm, "repeat": r.repeat}
    warnings: list[RunWarning] = []
    for phase, snap in r.snapshots():
        held = [name for name in snap.clock_event_reasons or [] if name not in BENIGN_CLOCK_REASONS]
        if held:
            warnings.append(ClocksHeld(**where, phase=phase, reasons=held))
    before, after = r.before, r.after
    if before.sm_clock_mhz and after.sm_clock_mhz is not None:
        if after.sm_clock_mhz < before.sm_clock_mhz * (1 - SM_CLOCK_DROP_FRACTION):
            warnings.append(SmClockFell(**where, start_mhz=before.sm_clock_mhz, end_mhz=after.sm_clock_mhz))
    if before.collected_at is not None and after.collected_at is not None:
        run_s = after.collected_at - before.collected_at
        for by in HELD_BY:
            start, end = getattr(before, f"{by}_violation_ns"), getattr(after, f"{by}_violation_ns")
            if start is None or end is None or end < start or run_s <= 0:
                continue  # unknown, or the counter was reset
            held_s = (end - start) / 1e9
            if held_s > VIOLATION_SHARE * run_s:
                warnings.append(HeldDown(**where, by=by, held_s=held_s, run_s=run_s))
    if others := _other_processes(before, after):
        warnings.append(OtherProcesses(**where, processes=[
            GpuProcess(pid=p["pid"], used_memory_mib=p.get("used_memory_mib")) for p in others]))
    if False in (before.persistence_mode, after.persistence_mode):
        warnings.append(PersistenceOff(**where))
    return warnings


def _other_processes(before: GpuFingerprint, after: GpuFingerprint) -> list[dict[str, Any]]:
    """Processes other than the harness, at its start or end. At the end the harness holds the GPU
    itself; where NVML did not list it under its own pid (a PID namespace), a pid first seen then
    may be the harness, so only pids also seen at the start count."""
    found = {p["pid"]: p for p in before.other_processes or [] if isinstance(p.get("pid"), int)}
    start_pids = set(found)
    for p in after.other_processes or []:
        if isinstance(p.get("pid"), int) and (after.own_process_listed or p["pid"] in start_pids):
            found.setdefault(p["pid"], p)
    return list(found.values())


def _summary(known: list[GpuFingerprint]) -> dict[str, Any]:
    """The fields every available snapshot records with the same value."""
    dumps = [snap.model_dump(exclude_unset=True) for snap in known]
    return {
        key: value
        for key, value in dumps[0].items()
        if key not in _NOT_SUMMARISED and all(key in d and d[key] == value for d in dumps[1:])
    }


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    return f"{value:g}" if isinstance(value, float) else str(value)
