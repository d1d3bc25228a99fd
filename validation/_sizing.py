"""Size the injections on this machine: measure GPU ms per step of the base engine and of a
few idle_us and long_kv_layers settings, then pick by interpolation the settings that add
the target slowdowns to the unsplit base, and check that the chosen long_kv_layers keeps
base's tokens."""

from __future__ import annotations

import functools
import math
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Literal

from guard._errors import HarnessError
from guard.checkout import BuiltArm
from guard.measure import ArmMeasurement, ArmTarget, HarnessSpec, run_interleaved
from guard.sandbox import Box

from ._models import SPLIT_ONLY, InjectionSize, Kind, Sizing, SizingPoint, TokenCheck

IDLE_US_STEP = 0.1  # chosen idle_us are rounded to this
TOKEN_CHECK_TRIES = 2  # long_kv_layers values tried on each side of the chosen one when its tokens differ

Progress = Callable[[str], None]


@dataclass(frozen=True)
class PointSpec:
    label: str
    setting: Literal["base", "split", "idle", "kernel"]
    idle_us: float | None = None
    long_kv_layers: int | None = None

    def options(self) -> dict[str, Any]:
        if self.setting == "split":
            return {"split": True}
        if self.setting == "idle":
            return {"idle_us": self.idle_us}
        if self.setting == "kernel":
            return {"long_kv_layers": self.long_kv_layers}
        return {}


def sizing_points(idle_grid_us: list[float], long_kv_grid: list[int]) -> list[PointSpec]:
    """The unsplit base first, then the split alone, then each grid setting."""
    return [
        PointSpec("base", "base"),
        PointSpec("split", "split"),
        *(PointSpec(f"idle-{us:g}us", "idle", idle_us=us) for us in idle_grid_us),
        *(PointSpec(f"long-kv-{n}", "kernel", long_kv_layers=n) for n in long_kv_grid),
    ]


class Measurer:
    """Runs the harness of the base build once per call, with a point's options on top."""

    def __init__(self, arm: BuiltArm, box: Box, spec: HarnessSpec, run_dir: Path, timeout_s: float,
                 progress: Progress):
        self.arm, self.box, self.spec, self.run_dir = arm, box, spec, run_dir
        self.timeout_s, self.progress = timeout_s, progress
        self.environment: dict[str, Any] = {}  # what the first process that ran reported

    def once(self, point: PointSpec, repeat: int) -> tuple[ArmMeasurement, float]:
        target = ArmTarget(name=point.label, python=self.arm.python, worktree=self.arm.worktree, box=self.box,
                           env=self.arm.env)
        spec = self.spec.model_copy(update={"options": self.spec.options | point.options()})
        started = time.perf_counter()
        result = run_interleaved([target], spec, 1, self.run_dir, self.timeout_s, self.progress, first_repeat=repeat)
        measurement = result[point.label]
        if measurement.repeats and not self.environment:
            self.environment = measurement.repeats[0].environment
        return measurement, time.perf_counter() - started


def measure_points(measurer: Measurer, points: list[PointSpec], repeats: int) -> list[SizingPoint]:
    """Every point `repeats` times, in rounds (each round runs every point once), so drift in
    the machine hits all points alike."""
    found = {p.label: SizingPoint(label=p.label, setting=p.setting, idle_us=p.idle_us,
                                  long_kv_layers=p.long_kv_layers)
             for p in points}
    for repeat in range(repeats):
        for point in points:
            record = found[point.label]
            if record.error is not None:
                continue
            measurement, seconds = measurer.once(point, repeat)
            _add(record, measurement, seconds)
    base = found[points[0].label]
    if base.error is not None or not base.gpu_ms_per_step:
        raise HarnessError("base", f"the sizing run of the unsplit base failed: {base.error}")
    for record in found.values():
        _compare_to_base(record, base)
    return list(found.values())


def _add(record: SizingPoint, measurement: ArmMeasurement, seconds: float) -> None:
    if measurement.error is not None or not measurement.repeats:
        record.error = measurement.error or "no result"
        return
    run = measurement.repeats[0].runs[0]
    record.gpu_ms_per_step.append(run.gpu_ms_per_step)
    if run.end_to_end_gpu_ms_per_step is not None:
        record.end_to_end_gpu_ms_per_step.append(run.end_to_end_gpu_ms_per_step)
        record.unheld_steps.append(run.unheld_steps)
    record.process_s.append(round(seconds, 2))
    record.timer = run.timer
    if record.sha256 is not None and record.sha256 != run.sha256:
        record.error = "its repeats generated different tokens: the workload is not deterministic"
    record.sha256 = run.sha256


def _compare_to_base(record: SizingPoint, base: SizingPoint) -> None:
    if record.error is not None or not record.gpu_ms_per_step:
        return
    base_ms = statistics.median(base.gpu_ms_per_step)
    record.change_pct = (statistics.median(record.gpu_ms_per_step) / base_ms - 1) * 100
    record.tokens_match_base = record.sha256 == base.sha256


# --- choosing settings --------------------------------------------------------------------

How = Literal["interpolated", "extrapolated", "clamped", "none"]


def interpolate(curve: list[tuple[float, float]], target_pct: float) -> tuple[float | None, How, str]:
    """The setting at which the piecewise-linear curve through (setting, change %) first rises
    through `target_pct`, as (setting, how, note)."""
    points = sorted(curve)
    if len(points) < 2:
        return None, "none", "fewer than two usable sizing points; give the grid at least two values"
    for (x0, y0), (x1, y1) in zip(points, points[1:]):
        if y0 <= target_pct <= y1 and y1 > y0:
            return x0 + (target_pct - y0) * (x1 - x0) / (y1 - y0), "interpolated", ""
    x_first, y_first = points[0]
    if target_pct < y_first:
        return x_first, "clamped", (
            f"the smallest setting measured, {x_first:g}, already adds {y_first:+.2f}%: "
            f"+{target_pct:g}% is out of reach of this injection, so the pairs run at that setting"
        )
    (x0, y0), (x1, y1) = points[-2], points[-1]
    if y1 > y0:
        x = x1 + (target_pct - y1) * (x1 - x0) / (y1 - y0)
        return x, "extrapolated", (
            f"+{target_pct:g}% lies beyond the largest setting measured ({x1:g}: {y1:+.2f}%); "
            "extended the line through the last two points: widen the grid to interpolate instead"
        )
    return None, "none", "the measured changes do not rise with the setting; widen the grid or raise the repeats"


def curve_at(curve: list[tuple[float, float]], x: float) -> float:
    """The piecewise-linear curve's change at `x`; the end segments extended beyond it."""
    points = sorted(curve)
    segments = list(zip(points, points[1:]))
    chosen = next(((a, b) for a, b in segments if a[0] <= x <= b[0]), None)
    if chosen is None:
        chosen = segments[0] if x < points[0][0] else segments[-1]
    (x0, y0), (x1, y1) = chosen
    return y0 if x1 == x0 else y0 + (y1 - y0) * (x - x0) / (x1 - x0)


def idle_curve(points: list[SizingPoint]) -> list[tuple[float, float]]:
    """(idle_us, change %) of the idle points; the unsplit base is not on this curve."""
    return [(p.idle_us, p.change_pct) for p in points
            if p.setting == "idle" and p.idle_us is not None and p.change_pct is not None]


def kernel_curve(points: list[SizingPoint]) -> list[tuple[float, float]]:
    """(long_kv_layers, change %), starting at the base: 0% at none."""
    return [(0.0, 0.0)] + [
        (float(p.long_kv_layers), p.change_pct) for p in points
        if p.setting == "kernel" and p.long_kv_layers is not None and p.change_pct is not None
    ]


def choose_idle(kind: Kind, points: list[SizingPoint]) -> InjectionSize:
    """idle_us against the unsplit base; every idle point includes what the split and the
    host's wait for the GPU cost. Below the smallest idle point, the split alone (two graphs,
    no wait) is the other candidate, and the nearer of the two is taken."""
    if any(p.tokens_match_base is False for p in points if p.setting in ("split", "idle")):
        return _none(kind, "the split engine generated other tokens than base; the guard would refuse to compare")
    curve = idle_curve(points)
    setting, how, note = interpolate(curve, kind.target_pct)
    if setting is None:
        return _none(kind, note)
    split = next((p for p in points if p.setting == "split" and p.change_pct is not None), None)
    if how == "clamped" and split is not None and split.change_pct is not None:
        smallest = curve_at(curve, setting)
        if off_by(split.change_pct, kind.target_pct) < off_by(smallest, kind.target_pct):
            return InjectionSize(
                kind=kind.name, injection="idle", target_pct=kind.target_pct, setting=SPLIT_ONLY,
                predicted_pct=split.change_pct, how="measured",
                note=(f"below the smallest idle_us measured ({setting:g}: {smallest:+.2f}%); the split alone, "
                      f"two graphs with no wait ({split.change_pct:+.2f}%), is nearer +{kind.target_pct:g}%"),
            )
    setting = round(max(IDLE_US_STEP, round(setting / IDLE_US_STEP) * IDLE_US_STEP), 3)
    return InjectionSize(
        kind=kind.name, injection="idle", target_pct=kind.target_pct, setting=setting,
        predicted_pct=curve_at(curve, setting), how=how, note=note,
    )


def off_by(predicted_pct: float, target_pct: float) -> float:
    """How far a predicted change is from the target, as a ratio: +0.25% and +1% are as far
    from +0.5%, and a change of nothing is infinitely far."""
    if predicted_pct <= 0:
        return math.inf
    return abs(math.log(predicted_pct / target_pct))


def choose_long_kv(kind: Kind, points: list[SizingPoint]) -> InjectionSize:
    """A whole number of layers: of every count up to the largest measured, the one whose
    change on the curve is nearest the target (the curve need not rise evenly: which layers
    get the longer cache changes how much of their attention overlaps other work)."""
    curve = kernel_curve(points)
    setting, how, note = interpolate(curve, kind.target_pct)
    if setting is None:
        return _none(kind, note)
    largest = max(int(x) for x, _ in curve)
    candidates = range(1, max(largest, int(setting) + 1) + 1)
    layers = min(candidates, key=lambda n: off_by(curve_at(curve, n), kind.target_pct))
    how = "measured" if layers in {int(x) for x, _ in curve} else how
    return InjectionSize(
        kind=kind.name, injection="kernel", target_pct=kind.target_pct, setting=layers,
        predicted_pct=curve_at(curve, layers), how=how, note=note,
    )


def keep_tokens(
    size: InjectionSize, points: list[SizingPoint], run_once: Callable[[int], TokenCheck]
) -> InjectionSize:
    """The chosen long_kv_layers, or the nearest that generates base's tokens: first the values
    around it (run once each), then the grid points whose tokens matched."""
    if size.setting is None:
        return size
    chosen = int(size.setting)
    known = {p.long_kv_layers: p.tokens_match_base for p in points
             if p.setting == "kernel" and p.long_kv_layers is not None and p.tokens_match_base is not None}
    checks: list[TokenCheck] = []
    near = [chosen + sign * k for k in range(1, TOKEN_CHECK_TRIES + 1) for sign in (-1, 1)]
    for candidate in [chosen, *near]:
        if candidate < 1:
            continue
        if candidate in known:
            match = known[candidate]
        else:
            check = run_once(candidate)
            checks.append(check)
            match = check.tokens_match_base
        if match:
            return _moved(size, candidate, chosen, points, checks)
    matching = sorted((n for n, match in known.items() if match), key=lambda n: abs(n - chosen))
    if matching:
        return _moved(size, matching[0], chosen, points, checks)
    return size.model_copy(update={
        "setting": None, "how": "none", "token_checks": checks,
        "note": f"no long_kv_layers near {chosen} keeps base's tokens "
                f"(tried {', '.join(str(c.long_kv_layers) for c in checks)}); "
                "the guard would refuse to compare, so this kind is not run",
    })


def _moved(
    size: InjectionSize, setting: int, chosen: int, points: list[SizingPoint], checks: list[TokenCheck],
) -> InjectionSize:
    if setting == chosen:
        return size.model_copy(update={"token_checks": checks})
    note = f"long_kv_layers {chosen} changes the tokens; {setting} is the nearest that keeps them"
    return size.model_copy(update={
        "setting": setting, "predicted_pct": curve_at(kernel_curve(points), setting),
        "token_checks": checks, "note": "; ".join(n for n in (size.note, note) if n),
    })


def _none(kind: Kind, note: str) -> InjectionSize:
    return InjectionSize(
        kind=kind.name, injection=kind.injection, target_pct=kind.target_pct, setting=None,
        predicted_pct=None, how="none", note=note,
    )


def token_check(measurer: Measurer, layers: int, base: SizingPoint) -> TokenCheck:
    """One process at long_kv_layers = `layers`: do its tokens match the base's?"""
    measurement, _ = measurer.once(PointSpec(f"check-long-kv-{layers}", "kernel", long_kv_layers=layers), 0)
    if measurement.error is not None or not measurement.repeats:
        return TokenCheck(long_kv_layers=layers, tokens_match_base=None, change_pct=None, error=measurement.error)
    run = measurement.repeats[0].runs[0]
    return TokenCheck(
        long_kv_layers=layers,
        tokens_match_base=run.sha256 == base.sha256,
        change_pct=(run.gpu_ms_per_step / statistics.median(base.gpu_ms_per_step) - 1) * 100,
    )


def size_injections(
    measurer: Measurer, kinds: list[Kind], points: list[PointSpec], repeats: int, long_kv_len: int
) -> Sizing:
    started = time.perf_counter()
    measured = measure_points(measurer, points, repeats)
    base = measured[0]
    split = next((p for p in measured if p.setting == "split"), None)
    # one process per long_kv_layers, however many kinds land on it
    run_once = functools.cache(lambda layers: token_check(measurer, layers, base))
    sizes = []
    for kind in kinds:
        if kind.injection == "idle":
            sizes.append(choose_idle(kind, measured))
        elif kind.injection == "kernel":
            size = choose_long_kv(kind, measured)
            sizes.append(keep_tokens(size, measured, run_once))
    return Sizing(
        long_kv_len=long_kv_len,
        base_ms_per_step=statistics.median(base.gpu_ms_per_step),
        split_pct=split.change_pct if split is not None else None,
        repeats=repeats,
        points=measured,
        injections=sizes,
        environment=measurer.environment,
        duration_s=round(time.perf_counter() - started, 1),
    )
