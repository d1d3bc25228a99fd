"""Trace analysis across ranks of a run: per batch size, every profiled repeat's traces of
every rank analysed together (guard/trace/_ranks.py), and base's passes diffed with head's."""

from __future__ import annotations

from pathlib import Path

from guard._errors import TraceError
from guard.trace._rank_figures import RankTraces
from guard.trace._rank_sections import ArmRankTraces, RankTraceSection, rank_section_diff
from guard.trace._ranks import analyze_ranks
from guard.trace._run import _relative

RankTracePaths = dict[str, dict[int, list[tuple[int, list[Path]]]]]


def rank_trace_sections(
    traces: RankTracePaths,
    base: str,
    head: str,
    batch_sizes: list[int],
    profile_steps: dict[int, int],
    out_dir: Path,
) -> list[RankTraceSection]:
    """`traces[arm][batch_size]` lists (repeat, each rank's trace in rank order), as
    guard.measure.rank_trace_paths gives them; `profile_steps[batch_size]`: the steps each
    profiled pass of that size ran. Sizes without a pass of several ranks have no section."""
    sections = []
    for batch_size in batch_sizes:
        steps = profile_steps.get(batch_size, 0)
        arms = [_arm(arm, by_size[batch_size], steps, out_dir) for arm, by_size in traces.items()
                if by_size.get(batch_size)]
        if arms and steps > 0:
            sections.append(RankTraceSection(batch_size=batch_size, profile_steps=steps, arms=arms,
                                             diff=rank_section_diff(arms, base, head)))
    return sections


def _arm(arm: str, repeats: list[tuple[int, list[Path]]], profile_steps: int, out_dir: Path) -> ArmRankTraces:
    passes: list[RankTraces] = []
    analysed: list[int] = []
    errors = []
    for repeat, paths in repeats:
        try:
            passes.append(analyze_ranks(dict(enumerate(paths)), profile_steps))
            analysed.append(repeat)
        except TraceError as exc:
            errors.append(f"repeat {repeat + 1}: {exc.message}")
    return ArmRankTraces(
        arm=arm,
        traces=[[_relative(path, out_dir) for path in paths] for _, paths in repeats],
        repeats=analysed,
        passes=passes,
        error="; ".join(errors) or None,
    )
