"""The picture as an SVG strip plot, written beside report.json: per batch size a panel with
its own axis marked at a round step, base's processes in one column, head's in the next and
each ablation arm's after them, a dot per process placed left to right in the order the arm
ran them, a line at each arm's geometric mean (the figure its change compares) and, above
each column but base's, its change against base.

Built with xml.etree, which escapes what it writes; every mark carries its arm, process,
batch size and value as attributes, so the picture can be read back as data."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from guard._svg import line, svg_document, text, y_scale, y_ticks
from guard.report._chart import StripArm, StripChart, StripPanel, decimals
from guard.report._words import pct

CHART_FILE = "step-times.svg"
_COLOURS = {"base": "#4c72b0", "head": "#dd8452"}
_ABLATION_COLOURS = ("#55a868", "#8172b3", "#937860")  # ablation arms, in turn
_COLUMN_W, _PLOT_H = 110, 220  # one arm's column of a batch size's plot, in px
_LEFT, _GAP, _TOP, _BOTTOM = 64, 72, 96, 40  # margins: tick labels, between panels, titles, arm names
_DOT_R = 4.0


def strip_svg(chart: StripChart, metric: str) -> str:
    """The SVG document. `metric` is the guard's own name of the step time."""
    widths = [len(panel.arms) * _COLUMN_W for panel in chart.panels]
    width = _LEFT + sum(w + _GAP for w in widths)
    height = _TOP + _PLOT_H + _BOTTOM
    ablated = any(len(panel.arms) > 2 for panel in chart.panels)
    heading = f"{metric} of each process, base beside head" + (" and the ablation arms" if ablated else "")
    svg = svg_document(width, height, heading)
    text(svg, _LEFT, 20, heading, size="13", weight="bold")
    text(svg, _LEFT, 36, "one dot per process, in the order each arm ran them; a line at each arm's geometric mean",
         fill="#555555")
    text(svg, _LEFT, 50, "above each column, its change against base (of the geometric means)", fill="#555555")
    left = float(_LEFT)
    for panel, panel_w in zip(chart.panels, widths):
        _panel(svg, panel, left, panel_w)
        left += panel_w + _GAP
    return ET.tostring(svg, encoding="unicode") + "\n"


def _colour(arm: StripArm, ablation: int) -> str:
    return _COLOURS.get(arm.label, _ABLATION_COLOURS[ablation % len(_ABLATION_COLOURS)])


def _panel(svg: ET.Element, panel: StripPanel, left: float, panel_w: float) -> None:
    group = ET.SubElement(svg, "g", {"class": "panel", "data-batch-size": str(panel.batch_size)})
    top, bottom = _TOP, _TOP + _PLOT_H
    digits = decimals(panel)
    y = y_scale(panel.low_ms, panel.high_ms, top, _PLOT_H)

    text(group, left + panel_w / 2, top - 24, f"batch size {panel.batch_size}", anchor="middle", weight="bold")
    ET.SubElement(group, "rect", {"x": str(left), "y": str(top), "width": str(panel_w), "height": str(_PLOT_H),
                                  "fill": "none", "stroke": "#bbbbbb"})
    y_ticks(group, left, panel.ticks_ms, y)
    ablations = 0
    for column, arm in enumerate(panel.arms):
        colour = _colour(arm, ablations)
        ablations += arm.label not in _COLOURS
        x0 = left + column * _COLUMN_W
        middle = x0 + _COLUMN_W / 2
        text(group, middle, bottom + 16, arm.label, anchor="middle", fill=colour, weight="bold")
        if arm.change_pct is not None:
            label = ET.SubElement(group, "text", {
                "class": "change", "data-arm": arm.label, "data-change-pct": repr(arm.change_pct),
                "x": f"{middle:.2f}", "y": f"{top - 8:.2f}", "text-anchor": "middle", "fill": colour,
                "font-weight": "bold"})
            label.text = pct(arm.change_pct)
        line(group, x0 + _COLUMN_W * 0.1, y(arm.mean_ms), x0 + _COLUMN_W * 0.9, y(arm.mean_ms), colour, "mean")
        inner = _COLUMN_W * 0.8  # dots spread over the middle of the column, in run order
        for number, ms in enumerate(arm.values_ms, start=1):
            cx = x0 + _COLUMN_W * 0.1 + inner * (number - 0.5) / len(arm.values_ms)
            dot = ET.SubElement(group, "circle", {
                "class": "mark", "data-arm": arm.label, "data-process": str(number),
                "data-batch-size": str(panel.batch_size), "data-ms": repr(ms),
                "cx": f"{cx:.2f}", "cy": f"{y(ms):.2f}", "r": str(_DOT_R),
                "fill": colour, "fill-opacity": "0.75", "stroke": "#333333", "stroke-width": "0.5",
            })
            ET.SubElement(dot, "title").text = f"{arm.label}, process {number}: {ms:.{digits}f} ms"
