"""The state of the GPU this process uses, read through NVML: what it is and how it is clocked.

Runs inside the arm's environment, so it imports only the standard library and, when it
is installed, pynvml (the nvidia-ml-py package). Nothing here raises: a query that fails
is recorded as null and named in "errors"; without pynvml or NVML the result is
{"available": False, "reason": ...}.
"""

from __future__ import annotations

import os
import time
from typing import Any, Callable

# Clock event ("throttle") reason bits, as nvml.h defines them (nvmlClocksEventReason*).
CLOCK_EVENT_REASONS: dict[int, str] = {
    0x001: "gpu_idle",
    0x002: "applications_clocks_setting",
    0x004: "sw_power_cap",
    0x008: "hw_slowdown",
    0x010: "sync_boost",
    0x020: "sw_thermal_slowdown",
    0x040: "hw_thermal_slowdown",
    0x080: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
    0x200: "board_limit",  # older throttle-reason names only (nvmlClocksThrottleReason*)
    0x400: "reliability",
}

COMPUTE_MODES = {0: "default", 1: "exclusive_thread", 2: "prohibited", 3: "exclusive_process"}

# nvmlPerfPolicyType_t values; their violation counters add up time spent held below clocks.
_PERF_POLICY_POWER = 0
_PERF_POLICY_THERMAL = 1


def decode_clock_event_reasons(mask: int) -> list[str]:
    """The names of the bits set in an NVML clock event reasons mask, lowest bit first;
    a bit this file does not know is named by its value (e.g. "0x200")."""
    names = []
    bit = 1
    while bit <= mask:
        if mask & bit:
            names.append(CLOCK_EVENT_REASONS.get(bit, f"{bit:#x}"))
        bit <<= 1
    return names


def gpu_fingerprint(torch: Any) -> dict[str, Any]:
    """The fingerprint of the CUDA device torch uses now. Never raises."""
    try:
        import pynvml  # nvidia-ml-py; optional in the arm's environment
    except Exception as exc:  # ImportError, or a broken install
        return {"available": False, "reason": f"pynvml is not importable ({type(exc).__name__}: {exc})"}
    try:
        pynvml.nvmlInit()
    except Exception as exc:
        return {"available": False, "reason": f"NVML did not initialise ({_error_text(exc)})"}
    try:
        return _collect(pynvml, torch)
    except Exception as exc:  # a bug here must not cost the run its result
        return {"available": False, "reason": f"fingerprint failed ({type(exc).__name__}: {exc})"}
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass


def _collect(nvml: Any, torch: Any) -> dict[str, Any]:
    if torch is None:
        return {"available": False, "reason": "torch is not importable, so no CUDA device is in use"}
    try:
        if not torch.cuda.is_available():
            return {"available": False, "reason": "torch sees no CUDA device"}
        index = torch.cuda.current_device()
        props = torch.cuda.get_device_properties(index)
    except Exception as exc:
        return {"available": False, "reason": f"torch could not describe its CUDA device ({exc})"}

    handle, matched_by, mig_handle = _find_handle(nvml, props)
    if handle is None:
        return {"available": False, "reason": f"no NVML device matches CUDA device {index} ({matched_by})"}

    errors: dict[str, str] = {}

    def get(field: str, call: Callable[[], Any]) -> Any:
        try:
            return call()
        except Exception as exc:  # NotSupported, NoPermission, or a call this pynvml lacks
            errors[field] = _error_text(exc)
            return None

    clock_sm = getattr(nvml, "NVML_CLOCK_SM", 1)
    clock_mem = getattr(nvml, "NVML_CLOCK_MEM", 2)
    mask = get("clock_event_reasons", lambda: _clock_event_mask(nvml, handle))
    mig = get("mig_mode", lambda: nvml.nvmlDeviceGetMigMode(handle))
    ecc = get("ecc_mode", lambda: nvml.nvmlDeviceGetEccMode(handle))
    persistence = get("persistence_mode", lambda: nvml.nvmlDeviceGetPersistenceMode(handle))
    compute_mode = get("compute_mode", lambda: nvml.nvmlDeviceGetComputeMode(handle))
    processes = get("other_processes", lambda: _processes(nvml, handle))
    own = _own_pids()
    fingerprint: dict[str, Any] = {
        "available": True,
        "collected_at": time.time(),
        "matched_by": matched_by,
        "cuda_device_index": index,
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "name": get("name", lambda: _text(nvml.nvmlDeviceGetName(handle))),
        "uuid": get("uuid", lambda: _text(nvml.nvmlDeviceGetUUID(handle))),
        "mig_device_uuid": (
            get("mig_device_uuid", lambda: _text(nvml.nvmlDeviceGetUUID(mig_handle))) if mig_handle else None
        ),
        "pci_bus_id": get("pci_bus_id", lambda: _text(nvml.nvmlDeviceGetPciInfo(handle).busId)),
        "driver_version": get("driver_version", lambda: _text(nvml.nvmlSystemGetDriverVersion())),
        "cuda_driver_version": get(
            "cuda_driver_version", lambda: _cuda_version(nvml.nvmlSystemGetCudaDriverVersion())
        ),
        "torch_version": getattr(torch, "__version__", None),
        "torch_cuda": getattr(getattr(torch, "version", None), "cuda", None),
        "sm_clock_mhz": get("sm_clock_mhz", lambda: nvml.nvmlDeviceGetClockInfo(handle, clock_sm)),
        "mem_clock_mhz": get("mem_clock_mhz", lambda: nvml.nvmlDeviceGetClockInfo(handle, clock_mem)),
        "max_sm_clock_mhz": get("max_sm_clock_mhz", lambda: nvml.nvmlDeviceGetMaxClockInfo(handle, clock_sm)),
        "max_mem_clock_mhz": get("max_mem_clock_mhz", lambda: nvml.nvmlDeviceGetMaxClockInfo(handle, clock_mem)),
        "app_sm_clock_mhz": get("app_sm_clock_mhz", lambda: nvml.nvmlDeviceGetApplicationsClock(handle, clock_sm)),
        "app_mem_clock_mhz": get(
            "app_mem_clock_mhz", lambda: nvml.nvmlDeviceGetApplicationsClock(handle, clock_mem)
        ),
        "clock_event_reasons_mask": mask,
        "clock_event_reasons": decode_clock_event_reasons(mask) if mask is not None else None,
        "power_violation_ns": get(
            "power_violation_ns",
            lambda: nvml.nvmlDeviceGetViolationStatus(handle, _PERF_POLICY_POWER).violationTime,
        ),
        "thermal_violation_ns": get(
            "thermal_violation_ns",
            lambda: nvml.nvmlDeviceGetViolationStatus(handle, _PERF_POLICY_THERMAL).violationTime,
        ),
        "power_limit_w": get("power_limit_w", lambda: nvml.nvmlDeviceGetPowerManagementLimit(handle) / 1000),
        "enforced_power_limit_w": get(
            "enforced_power_limit_w", lambda: nvml.nvmlDeviceGetEnforcedPowerLimit(handle) / 1000
        ),
        "power_draw_w": get("power_draw_w", lambda: nvml.nvmlDeviceGetPowerUsage(handle) / 1000),
        "temperature_c": get(
            "temperature_c",
            lambda: nvml.nvmlDeviceGetTemperature(handle, getattr(nvml, "NVML_TEMPERATURE_GPU", 0)),
        ),
        "persistence_mode": bool(persistence) if persistence is not None else None,
        "compute_mode": COMPUTE_MODES.get(compute_mode, str(compute_mode)) if compute_mode is not None else None,
        "mig_mode_current": bool(mig[0]) if mig is not None else None,
        "mig_mode_pending": bool(mig[1]) if mig is not None else None,
        "ecc_mode_current": bool(ecc[0]) if ecc is not None else None,
        "ecc_mode_pending": bool(ecc[1]) if ecc is not None else None,
        "other_processes": [p for p in processes if p["pid"] not in own] if processes is not None else None,
        # NVML lists host pids; inside a PID namespace this process is not found under its own.
        "own_process_listed": any(p["pid"] in own for p in processes) if processes is not None else None,
        "errors": errors,
    }
    return fingerprint


def _find_handle(nvml: Any, props: Any) -> tuple[Any, str, Any]:
    """(device handle, how it was matched, MIG instance handle or None). CUDA and NVML number
    devices differently (CUDA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER), so match by UUID or PCI address."""
    uuid = getattr(props, "uuid", None)
    if uuid is not None:
        text = str(uuid)
        candidates = [text] if text.startswith(("GPU-", "MIG-")) else [f"GPU-{text}", f"MIG-{text}"]
        for candidate in candidates:
            try:
                handle = nvml.nvmlDeviceGetHandleByUUID(candidate)
            except Exception:
                continue
            try:
                if nvml.nvmlDeviceIsMigDeviceHandle(handle):
                    return nvml.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(handle), "uuid", handle
            except Exception:
                pass
            return handle, "uuid", None
    bus = getattr(props, "pci_bus_id", None)
    if bus is not None:
        address = f"{getattr(props, 'pci_domain_id', 0):08x}:{bus:02x}:{getattr(props, 'pci_device_id', 0):02x}.0"
        try:
            return nvml.nvmlDeviceGetHandleByPciBusId(address), "pci_bus_id", None
        except Exception:
            pass
    try:
        if nvml.nvmlDeviceGetCount() == 1:  # one device: no numbering to get wrong
            return nvml.nvmlDeviceGetHandleByIndex(0), "only_device", None
    except Exception:
        pass
    return None, f"uuid {uuid}, pci bus {bus}", None


def _clock_event_mask(nvml: Any, handle: Any) -> int:
    # Drivers before r535 and older pynvml know only the older name of the same call.
    query = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
    if query is not None:
        try:
            return int(query(handle))
        except Exception:
            pass
    return int(nvml.nvmlDeviceGetCurrentClocksThrottleReasons(handle))


def _processes(nvml: Any, handle: Any) -> list[dict[str, Any]]:
    seen: dict[int, dict[str, Any]] = {}
    for kind, query in (
        ("compute", nvml.nvmlDeviceGetComputeRunningProcesses),
        ("graphics", nvml.nvmlDeviceGetGraphicsRunningProcesses),
    ):
        try:
            listed = query(handle)
        except Exception:
            if kind == "compute":
                raise
            continue  # graphics listing is unsupported on many datacenter GPUs
        for proc in listed:
            used = getattr(proc, "usedGpuMemory", None)
            entry = seen.setdefault(int(proc.pid), {"pid": int(proc.pid), "used_memory_mib": None, "kind": kind})
            if used is not None:
                entry["used_memory_mib"] = round(used / 2**20, 1)
    return list(seen.values())


def _own_pids() -> set[int]:
    """This process' pid in every PID namespace the kernel shows it in (NSpid), and os.getpid()."""
    pids = {os.getpid()}
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("NSpid:"):
                    pids.update(int(p) for p in line.split()[1:])
    except (OSError, ValueError):
        pass
    return pids


def _cuda_version(value: int) -> str:
    return f"{value // 1000}.{value % 1000 // 10}"


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _error_text(exc: Exception) -> str:
    return f"{type(exc).__name__}: {exc}"
