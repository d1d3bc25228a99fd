"""The picture as Mermaid, which GitHub draws from a ```mermaid code block in a comment or a
job summary: one `xychart-beta` bar chart per batch size, a bar per process of base, head and
each ablation arm, its axis at round ends and each arm's change against base in its title.

Mermaid's xychart has bars and lines, no dots; a bar per process, labelled with its arm
and its place in the order the arm ran, shows every process's own value, which a line
through them would blur. Every word in the block is the guard's own and every number is
formatted here from a checked float, so nothing from a report reaches Mermaid's parser."""

from __future__ import annotations

from guard._markdown import block
from guard._svg import step_digits
from guard.report._chart import StripChart, StripPanel, decimals
from guard.report._words import pct


def mermaid_charts(chart: StripChart, metric: str) -> list[str]:
    """One fenced ```mermaid block per batch size. `metric` is the guard's own name of the step time."""
    return [block(_xychart(panel, metric), "mermaid") for panel in chart.panels]


def _xychart(panel: StripPanel, metric: str) -> str:
    digits = decimals(panel)
    labels = [f'"{arm.label} {i}"' for arm in panel.arms for i in range(1, len(arm.values_ms) + 1)]
    values = ", ".join(f"{v:.{digits}f}" for arm in panel.arms for v in arm.values_ms)
    changes = ", ".join(f"{arm.label} {pct(arm.change_pct)}" for arm in panel.arms if arm.change_pct is not None)
    axis = step_digits(panel.ticks_ms[1] - panel.ticks_ms[0]) if len(panel.ticks_ms) > 1 else digits
    return "\n".join([
        "xychart-beta",
        f'    title "Batch size {panel.batch_size}: {_quoted(metric)} of each process'
        + (f"; {changes} against base" if changes else "") + '"',
        f"    x-axis [{', '.join(labels)}]",
        f'    y-axis "{_quoted(metric)}" {panel.low_ms:.{axis}f} --> {panel.high_ms:.{axis}f}',
        f"    bar [{values}]",
    ])


def _quoted(words: str) -> str:
    """Inside a Mermaid string: a double quote would end it."""
    return words.replace('"', "'")
