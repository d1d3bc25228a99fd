"""Trace analysis of a run: every profiled repeat of every arm, analysed, and the arms diffed."""

from __future__ import annotations

import statistics
from pathlib import Path

from guard._errors import TraceError
from guard.trace._analyze import analyze
from guard.trace._diff import diff
from guard.trace._figures import TraceFigures
from guard.trace._read import read_trace
from guard.trace._sections import ArmTraces, MixTraceSection, TraceSection


def trace_sections(
    traces: dict[str, dict[int, list[tuple[int, Path]]]],
    base: str,
    head: str,
    batch_sizes: list[int],
    profile_steps: int,
    out_dir: Path,
) -> list[TraceSection]:
    """`traces[arm][batch_size]` lists (repeat, trace path). Analyses every trace and shows,
    for each arm, the repeat with the median idle time, so one odd process does not speak
    for the arm."""
    sections = []
    for batch_size in batch_sizes:
        arms = [
            _arm_traces(arm, by_size.get(batch_size, []), out_dir)
            for arm, by_size in traces.items()
            if by_size.get(batch_size)
        ]
        if not arms:
            continue
        by_name = {a.arm: a for a in arms}
        change = None
        if by_name.get(base) and by_name.get(head) and by_name[base].figures and by_name[head].figures:
            change = diff(by_name[base].figures, by_name[head].figures)  # type: ignore[arg-type]
        sections.append(TraceSection(batch_size=batch_size, profile_steps=profile_steps, arms=arms, diff=change))
    return sections


def mix_trace_section(
    traces: dict[str, list[tuple[int, Path]]], base: str, head: str, profile_steps: int, out_dir: Path,
) -> MixTraceSection | None:
    """`traces[arm]` lists (repeat, trace path) of the mix's profiled passes; None without any.
    Each arm shows the repeat with the median idle time, as for a batch size."""
    arms = [_arm_traces(arm, repeats, out_dir) for arm, repeats in traces.items() if repeats]
    if not arms:
        return None
    by_name = {a.arm: a for a in arms}
    change = None
    if by_name.get(base) and by_name.get(head) and by_name[base].figures and by_name[head].figures:
        change = diff(by_name[base].figures, by_name[head].figures)  # type: ignore[arg-type]
    return MixTraceSection(profile_steps=profile_steps, arms=arms, diff=change)


def _arm_traces(arm: str, repeats: list[tuple[int, Path]], out_dir: Path) -> ArmTraces:
    analysed: list[tuple[int, TraceFigures]] = []
    errors = []
    for repeat, path in repeats:
        try:
            analysed.append((repeat, analyze(read_trace(path))))
        except TraceError as exc:
            errors.append(f"repeat {repeat + 1}: {exc.message}")
    rel = [_relative(path, out_dir) for _, path in repeats]
    if not analysed:
        return ArmTraces(arm=arm, traces=rel, error="; ".join(errors) or "no trace")
    idle = [figures.idle_ms_per_step for _, figures in analysed]
    median = statistics.median_low(idle)
    repeat, figures = next((r, f) for r, f in analysed if f.idle_ms_per_step == median)
    return ArmTraces(
        arm=arm,
        traces=rel,
        shown_repeat=repeat,
        shown_trace=rel[[r for r, _ in repeats].index(repeat)],
        figures=figures,
        idle_ms_per_step_by_repeat=idle,
        error="; ".join(errors) or None,
    )


def _relative(path: Path, out_dir: Path) -> str:
    try:
        return str(path.resolve().relative_to(out_dir.resolve()))
    except ValueError:
        return str(path)
