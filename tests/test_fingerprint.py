"""GPU fingerprints: the harness records one at process start and end, and the comparison
refuses arms that ran on different GPUs or software and flags throttled or shared repeats."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from guard.compare._fingerprint import FingerprintCheck, check_fingerprints, check_measurements
from guard.harness import HARNESS_SCRIPT
from guard.measure import ArmMeasurement, RepeatResult
from guard.report import warning_text
from guard.report._reason_text import reason_sentence

REPO = Path(__file__).resolve().parents[1]


def _load_harness_fingerprint() -> Any:
    # Loaded by path, as run.py loads it: guard/harness is not imported as a package there.
    spec = importlib.util.spec_from_file_location("_test_fingerprint", HARNESS_SCRIPT.with_name("_fingerprint.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


harness_fp = _load_harness_fingerprint()


def run_harness(tmp_path: Path, env: dict[str, str] | None = None) -> dict[str, Any]:
    spec = {
        "entry": "guard.engine:make",
        "root": str(REPO),
        "options": {"layers": 1, "max_len": 64},
        "batch_sizes": [1],
        "steps": 2,
        "warmup_steps": 1,
        "arm": "base",
        "repeat": 0,
    }
    spec_path = tmp_path / "spec.json"
    result_path = tmp_path / "result.json"
    spec_path.write_text(json.dumps(spec))
    proc = subprocess.run(
        [sys.executable, str(HARNESS_SCRIPT), str(spec_path), str(result_path)],
        cwd=tmp_path,  # not the repo: run.py must find its sibling file by itself
        env=os.environ | (env or {}),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(result_path.read_text())
    RepeatResult.model_validate(result)  # the orchestrator still reads it
    return result


def _assert_unavailable(result: dict[str, Any], reason: str) -> None:
    for phase in ("before", "after"):
        snap = result["fingerprint"][phase]
        assert snap["available"] is False
        assert re.search(reason, snap["reason"]), snap["reason"]


# --- the harness, on this machine ----------------------------------------------------------


def test_harness_records_unavailable_fingerprint_with_pynvml(tmp_path: Path) -> None:
    pytest.importorskip("pynvml", reason="install nvidia-ml-py")
    try:
        import torch
    except ImportError:
        pytest.skip("needs torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: test_harness_fingerprint_on_gpu covers it")
    result = run_harness(tmp_path)
    _assert_unavailable(result, "NVML|CUDA")  # no driver library, or torch sees no device
    assert result["runs"][0]["steps"] == 2


def test_harness_records_unavailable_fingerprint_without_pynvml(tmp_path: Path) -> None:
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    # Found before site-packages, so the arm's environment looks as if nvidia-ml-py were missing.
    (shadow / "pynvml.py").write_text("raise ImportError('pynvml hidden by the test')\n")
    path = os.pathsep.join(p for p in (str(shadow), os.environ.get("PYTHONPATH")) if p)
    result = run_harness(tmp_path, env={"PYTHONPATH": path})
    _assert_unavailable(result, "pynvml is not importable.*hidden by the test")
    assert "runs" in result


def test_harness_fingerprint_does_not_raise_when_pynvml_breaks(monkeypatch: pytest.MonkeyPatch) -> None:
    class Broken:
        def __getattr__(self, name: str) -> Any:
            raise RuntimeError(f"{name} is broken")

    monkeypatch.setitem(sys.modules, "pynvml", Broken())
    snap = harness_fp.gpu_fingerprint(None)
    assert snap == {"available": False, "reason": snap["reason"]}
    assert "broken" in snap["reason"]


@pytest.mark.gpu
def test_harness_fingerprint_on_gpu(tmp_path: Path) -> None:
    pytest.importorskip("pynvml", reason="install nvidia-ml-py")
    import torch

    torch.zeros(1, device="cuda")  # this process now holds a context: to the harness, another process
    result = run_harness(tmp_path)
    for phase in ("before", "after"):
        snap = result["fingerprint"][phase]
        assert snap["available"] is True, snap
        assert "NVIDIA" in snap["name"]
        assert snap["uuid"].startswith(("GPU-", "MIG-"))
        assert snap["matched_by"] in ("uuid", "pci_bus_id")
        assert snap["driver_version"] and re.fullmatch(r"\d+\.\d+", snap["cuda_driver_version"])
        assert snap["sm_clock_mhz"] > 0 and snap["mem_clock_mhz"] > 0
        assert snap["max_sm_clock_mhz"] >= snap["sm_clock_mhz"]
        assert snap["power_limit_w"] > 0
        assert isinstance(snap["clock_event_reasons"], list)
        assert isinstance(snap["other_processes"], list)
        others = {p["pid"] for p in snap["other_processes"]}
        assert result["pid"] not in others  # the harness never lists itself
        if phase == "after" and snap["own_process_listed"]:  # NVML's pids are this namespace's
            assert os.getpid() in others
    check = check_fingerprints({"base": [result["fingerprint"]]})
    assert check.invalid_reasons == []
    assert check.summary["name"] == result["fingerprint"]["before"]["name"]


# --- decoding the clock event reasons --------------------------------------------------------


def _snake(camel: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", camel).lower()


def _nvml_reason_names() -> dict[int, set[str]]:
    """Single-bit reason constants of pynvml, as bit -> snake_case names of its constants."""
    pynvml = pytest.importorskip("pynvml", reason="install nvidia-ml-py")
    names: dict[int, set[str]] = {}
    for attr in dir(pynvml):
        match = re.fullmatch(r"nvmlClocks(?:Throttle|Event)Reason(\w+)", attr)
        value = getattr(pynvml, attr)
        if match and isinstance(value, int) and value and value & (value - 1) == 0:
            names.setdefault(value, set()).add(_snake(match.group(1)))
    return names


def test_every_nvml_reason_bit_decodes_to_its_nvml_name() -> None:
    nvml_names = _nvml_reason_names()
    assert len(nvml_names) >= 9
    for bit, names in nvml_names.items():
        assert harness_fp.decode_clock_event_reasons(bit) == [harness_fp.CLOCK_EVENT_REASONS[bit]]
        assert harness_fp.CLOCK_EVENT_REASONS[bit] in names


def test_decode_a_combined_mask_against_pynvml_constants() -> None:
    pynvml = pytest.importorskip("pynvml", reason="install nvidia-ml-py")
    prefix = "nvmlClocksEventReason" if hasattr(pynvml, "nvmlClocksEventReasonGpuIdle") else "nvmlClocksThrottleReason"
    parts = ["GpuIdle", "SwPowerCap", "HwSlowdown", "SwThermalSlowdown", "HwThermalSlowdown", "HwPowerBrakeSlowdown"]
    mask = 0
    for part in parts:
        mask |= getattr(pynvml, prefix + part)
    assert harness_fp.decode_clock_event_reasons(mask) == [_snake(p) for p in parts]
    everything = harness_fp.decode_clock_event_reasons(getattr(pynvml, prefix + "All"))
    assert {"applications_clocks_setting", "sync_boost", "display_clock_setting"} <= set(everything)
    assert harness_fp.decode_clock_event_reasons(getattr(pynvml, prefix + "None")) == []


def test_unknown_reason_bits_are_named_by_value() -> None:
    assert harness_fp.decode_clock_event_reasons(0x1 | 0x8000) == ["gpu_idle", "0x8000"]


# --- the comparison rule -----------------------------------------------------------------------


def snap(**changes: Any) -> dict[str, Any]:
    """An H200 at rest, as the harness records it."""
    base: dict[str, Any] = {
        "available": True,
        "collected_at": 1000.0,
        "matched_by": "uuid",
        "cuda_device_index": 0,
        "cuda_visible_devices": None,
        "name": "NVIDIA H200",
        "uuid": "GPU-0b6b5a1e-2c3d-4e5f-8a9b-0c1d2e3f4a5b",
        "mig_device_uuid": None,
        "pci_bus_id": "00000000:19:00.0",
        "driver_version": "570.133.20",
        "cuda_driver_version": "12.8",
        "torch_version": "2.13.0+cu128",
        "torch_cuda": "12.8",
        "sm_clock_mhz": 1980,
        "mem_clock_mhz": 3201,
        "max_sm_clock_mhz": 1980,
        "max_mem_clock_mhz": 3201,
        "app_sm_clock_mhz": 1980,
        "app_mem_clock_mhz": 3201,
        "clock_event_reasons_mask": 0,
        "clock_event_reasons": [],
        "power_violation_ns": 5_000_000_000,
        "thermal_violation_ns": 0,
        "power_limit_w": 700.0,
        "enforced_power_limit_w": 700.0,
        "power_draw_w": 120.5,
        "temperature_c": 34,
        "persistence_mode": True,
        "compute_mode": "default",
        "mig_mode_current": False,
        "mig_mode_pending": False,
        "ecc_mode_current": True,
        "ecc_mode_pending": True,
        "other_processes": [],
        "own_process_listed": False,
        "errors": {},
    }
    return base | changes


def repeat(before: dict[str, Any] | None = None, after: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"before": before or snap(), "after": after or snap(collected_at=1030.0, temperature_c=51)}


def _words(check: FingerprintCheck) -> list[str]:
    """The warnings as the report words them: the check keeps their kinds and figures."""
    return [warning_text(w) for w in check.warnings]


def two_arms(head: list[dict[str, Any]] | None = None, base: list[dict[str, Any]] | None = None) -> FingerprintCheck:
    return check_fingerprints({"base": base or [repeat(), repeat()], "head": head or [repeat(), repeat()]})


def test_same_everything_gives_no_reasons_and_a_common_summary() -> None:
    check = two_arms()
    assert check.invalid_reasons == [] and check.warnings == []
    assert not check.invalid
    assert check.summary["name"] == "NVIDIA H200"
    assert check.summary["driver_version"] == "570.133.20"
    assert check.summary["power_limit_w"] == 700.0
    assert "temperature_c" not in check.summary  # differs between start and end
    assert "collected_at" not in check.summary


def test_different_driver_is_invalid_and_names_both_values() -> None:
    head = [repeat(snap(driver_version="575.51.03"), snap(driver_version="575.51.03", collected_at=1030.0))] * 2
    check = two_arms(head=head)
    assert len(check.invalid_reasons) == 1
    reason = check.invalid_reasons[0]
    assert (reason.kind, reason.field) == ("arms_differ", "driver_version")
    assert [(s.arm, s.value) for s in reason.seen] == [("base", "570.133.20"), ("head", "575.51.03")]
    assert "same runner" in reason_sentence(reason) and "driver version" in reason_sentence(reason)


def test_different_power_limit_is_invalid() -> None:
    capped = snap(power_limit_w=600.0, enforced_power_limit_w=600.0)
    check = two_arms(head=[repeat(capped, capped)] * 2)
    assert len(check.invalid_reasons) == 2  # the set limit and the enforced one
    assert any(r.field == "power_limit_w" and [(s.arm, s.value) for s in r.seen] == [("base", "700"), ("head", "600")]
               for r in check.invalid_reasons)


def test_different_gpu_and_torch_are_invalid() -> None:
    other = snap(name="NVIDIA H100 80GB HBM3", uuid="GPU-ffffffff-0000-0000-0000-000000000000", torch_version="2.12.0")
    check = two_arms(head=[repeat(other, other)])
    text = " ".join(reason_sentence(r) for r in check.invalid_reasons)
    assert "GPU model" in text and "NVIDIA H100 80GB HBM3" in text
    assert "torch version" in text and "head 2\\.12.0" in text  # the version as Markdown text


def test_unknown_max_clock_on_one_side_is_not_a_difference() -> None:
    check = two_arms(head=[repeat(snap(max_sm_clock_mhz=None), snap(max_sm_clock_mhz=None))])
    assert check.invalid_reasons == []


def test_a_change_within_one_arm_is_invalid() -> None:
    check = two_arms(head=[repeat(), repeat(snap(driver_version="575.51.03"), snap(driver_version="575.51.03"))])
    assert any(r.kind == "arm_changed_between_repeats" and r.arm == "head" and r.field == "driver_version"
               and [s.repeats for s in r.seen] == [[1], [2]] for r in check.invalid_reasons)


def test_throttle_during_one_repeat_warns_naming_arm_and_repeat() -> None:
    hot = snap(collected_at=1030.0, clock_event_reasons=["sw_thermal_slowdown", "hw_slowdown"], sm_clock_mhz=1400)
    check = two_arms(head=[repeat(), repeat(after=hot)])
    assert check.invalid_reasons == []
    throttled = [w for w in _words(check) if "sw_thermal_slowdown" in w]
    assert len(throttled) == 1
    assert "arm 'head' repeat 2" in throttled[0] and "hw_slowdown" in throttled[0]
    assert any("arm 'head' repeat 2" in w and "1980 MHz" in w and "1400 MHz" in w for w in _words(check))


def test_idle_and_application_clock_reasons_do_not_warn() -> None:
    idle = snap(clock_event_reasons=["gpu_idle", "applications_clocks_setting"])
    assert two_arms(head=[repeat(idle, idle)]).warnings == []


def test_time_held_by_the_power_limit_during_the_run_warns() -> None:
    after = snap(collected_at=1030.0, power_violation_ns=5_000_000_000 + 3_000_000_000)
    check = two_arms(base=[repeat(after=after)])
    assert any("arm 'base' repeat 1" in w and "power limit for 3.00 s" in w for w in _words(check))


def test_other_process_on_the_gpu_warns_with_its_pid() -> None:
    busy = snap(other_processes=[{"pid": 4242, "used_memory_mib": 2048.0, "kind": "compute"}])
    check = two_arms(base=[repeat(), repeat(before=busy)])
    assert check.invalid_reasons == []
    assert any("arm 'base' repeat 2" in w and "pid 4242 (2048 MiB)" in w for w in _words(check))


def test_a_pid_seen_only_at_the_end_counts_only_when_the_harness_can_see_itself() -> None:
    # In a PID namespace the harness' own context shows up under a host pid at the end.
    maybe_self = snap(collected_at=1030.0, other_processes=[{"pid": 901, "used_memory_mib": 500.0}])
    assert not any("pid 901" in w for w in _words(two_arms(head=[repeat(after=maybe_self)])))
    seen = maybe_self | {"own_process_listed": True}
    assert any("pid 901" in w for w in _words(two_arms(head=[repeat(after=seen)])))


def test_persistence_mode_off_warns() -> None:
    off = snap(persistence_mode=False)
    check = two_arms(head=[repeat(off, off)])
    assert any("arm 'head' repeat 1" in w and "persistence mode is off" in w for w in _words(check))


def test_unavailable_everywhere_gives_nothing() -> None:
    none = {"available": False, "reason": "pynvml is not importable"}
    check = two_arms(base=[repeat(none, none)], head=[repeat(none, none)])
    assert check.invalid_reasons == [] and check.warnings == []
    assert check.summary == {"available": False, "reason": "pynvml is not importable"}


def test_unavailable_on_one_arm_warns() -> None:
    none = {"available": False, "reason": "NVML did not initialise"}
    check = two_arms(head=[repeat(none, none), repeat(none, none)])
    assert check.invalid_reasons == []
    assert len(check.warnings) == 1
    assert "arm 'head' repeats 1, 2" in _words(check)[0] and "NVML did not initialise" in _words(check)[0]


def test_check_measurements_reads_repeat_results() -> None:
    def result(arm: str, n: int, fingerprint: dict[str, Any]) -> RepeatResult:
        return RepeatResult(arm=arm, repeat=n, environment={}, runs=[], fingerprint=fingerprint)

    hot = snap(clock_event_reasons=["hw_power_brake_slowdown"])
    measurements = {
        "base": ArmMeasurement(arm="base", repeats=[result("base", 0, repeat()), result("base", 1, repeat())]),
        "head": ArmMeasurement(arm="head", repeats=[result("head", 0, repeat()), result("head", 1, repeat(hot))]),
    }
    check = check_measurements(measurements)
    assert check.invalid_reasons == []
    assert len(check.warnings) == 1 and "arm 'head' repeat 2" in _words(check)[0]
    old = {"base": ArmMeasurement(arm="base", repeats=[result("base", 0, {})])}  # an older harness
    assert check_measurements(old).summary["available"] is False
