"""The picture as Mermaid, which GitHub draws from a ```mermaid code block in a comment or a
job summary: one `xychart-beta` bar chart per batch size, a bar per process.

Mermaid's xychart has bars and lines, no dots; a bar per process, labelled with its arm
and its place in the order the arm ran, shows every process's own value, which a line
through them would blur. Every word in the block is the guard's own and every number is
formatted here from a checked float, so nothing from a report reaches Mermaid's parser."""

from __future__ import annotations

from guard._markdown import block
from guard.report._chart import StripChart, StripPanel, decimals


def mermaid_charts(chart: StripChart, metric: str) -> list[str]:
    """One fenced ```mermaid block per batch size. `metric` is the guard's own name of the step time."""
    return [block(_xychart(panel, metric), "mermaid") for panel in chart.panels]


def _xychart(panel: StripPanel, metric: str) -> str:
    digits = decimals(panel)
    labels = [f'"base {i}"' for i in range(1, len(panel.base_ms) + 1)]
    labels += [f'"head {i}"' for i in range(1, len(panel.head_ms) + 1)]
    values = ", ".join(f"{v:.{digits}f}" for v in panel.base_ms + panel.head_ms)
    return "\n".join([
        "xychart-beta",
        f'    title "Batch size {panel.batch_size}: {_quoted(metric)} of each process"',
        f"    x-axis [{', '.join(labels)}]",
        f'    y-axis "{_quoted(metric)}" {panel.low_ms:.{digits}f} --> {panel.high_ms:.{digits}f}',
        f"    bar [{values}]",
    ])


def _quoted(words: str) -> str:
    """Inside a Mermaid string: a double quote would end it."""
    return words.replace('"', "'")
