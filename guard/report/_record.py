"""The run's record, from what each arm's workload said of itself (describe()) and the mix:
the model and precision, the batch distribution replayed, each arm's capture policy. An arm's
process wrote describe(), so a value of the wrong type is left out and a string is cut short."""

from __future__ import annotations

from typing import Any

from guard.measure import ArmMeasurement, MixReport
from guard.report._schema import DESCRIBED_LIMIT, BatchShare, CapturePolicy, RunRecord


def run_record(measurements: dict[str, ArmMeasurement], arms: list[str], mix: MixReport | None) -> RunRecord:
    """`arms`: base, then head. The head's describe() names the model, or the base's without one."""
    described = {name: _described(measurements.get(name)) for name in arms}
    first = next((d for d in reversed(list(described.values())) if d), {})
    sizes = mix.arms[0].sizes if mix is not None and mix.arms else []
    return RunRecord(
        model=_string(first.get("model")) or _string(first.get("engine")),
        precision=_string(first.get("dtype")) or _string(first.get("precision")),
        batch_distribution=[BatchShare(batch_size=s.batch_size, share=s.share) for s in sizes],
        capture=[_policy(name, d) for name, d in described.items() if d],
    )


def _described(measurement: ArmMeasurement | None) -> dict[str, Any]:
    """The first process's describe(): after the mix's set-up (the largest size) where it ran one."""
    if measurement is None or not measurement.repeats:
        return {}
    first = measurement.repeats[0]
    if first.mix is not None and first.mix.workload:
        return first.mix.workload
    return next((run.workload for run in first.runs if run.workload), {})


def _policy(arm: str, d: dict[str, Any]) -> CapturePolicy:
    sizes = d.get("captured_sizes")
    return CapturePolicy(
        arm=arm,
        mode=_string(d.get("capture_mode")) or _string(d.get("mode")),
        cuda_graphs=_flag(d.get("cuda_graphs")),
        captured_sizes=sorted(sizes)[:4096] if isinstance(sizes, list) and all(
            isinstance(s, int) and not isinstance(s, bool) for s in sizes) else None,
        fallback=_flag(d.get("fallback")),
        moe_dispatch=_string(d.get("moe_dispatch")),
    )


def _string(value: object) -> str | None:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)) or value == "":
        return None
    return str(value)[:DESCRIBED_LIMIT]


def _flag(value: object) -> bool | None:
    return value if isinstance(value, bool) else None
