"""The picture as an SVG strip plot, written beside report.json: per batch size a panel with
its own axis, base's processes in one column and head's in the next, a dot per process
placed left to right in the order the arm ran them, and a line at each arm's median.

Built with xml.etree, which escapes what it writes; every mark carries its arm, process,
batch size and value as attributes, so the picture can be read back as data."""

from __future__ import annotations

import statistics
import xml.etree.ElementTree as ET

from guard._svg import line, svg_document, text, y_scale, y_ticks
from guard.report._chart import StripChart, StripPanel, decimals

CHART_FILE = "step-times.svg"
_COLOURS = {"base": "#4c72b0", "head": "#dd8452"}
_PANEL_W, _PLOT_H = 220, 220  # one batch size's plot, in px
_LEFT, _GAP, _TOP, _BOTTOM = 64, 72, 56, 40  # margins: tick labels, between panels, title, arm names
_DOT_R = 4.0


def strip_svg(chart: StripChart, metric: str) -> str:
    """The SVG document. `metric` is the guard's own name of the step time."""
    width = _LEFT + len(chart.panels) * (_PANEL_W + _GAP)
    height = _TOP + _PLOT_H + _BOTTOM
    heading = f"{metric} of each process, base beside head"
    svg = svg_document(width, height, heading)
    text(svg, _LEFT, 20, heading, size="13", weight="bold")
    text(svg, _LEFT, 36, "one dot per process, in the order each arm ran them; a line at each arm's median",
          fill="#555555")
    for index, panel in enumerate(chart.panels):
        _panel(svg, panel, _LEFT + index * (_PANEL_W + _GAP))
    return ET.tostring(svg, encoding="unicode") + "\n"


def _panel(svg: ET.Element, panel: StripPanel, left: float) -> None:
    group = ET.SubElement(svg, "g", {"class": "panel", "data-batch-size": str(panel.batch_size)})
    top, bottom = _TOP, _TOP + _PLOT_H
    digits = decimals(panel)
    y = y_scale(panel.low_ms, panel.high_ms, top, _PLOT_H)

    text(group, left + _PANEL_W / 2, top - 6, f"batch size {panel.batch_size}", anchor="middle", weight="bold")
    ET.SubElement(group, "rect", {"x": str(left), "y": str(top), "width": str(_PANEL_W), "height": str(_PLOT_H),
                                  "fill": "none", "stroke": "#bbbbbb"})
    y_ticks(group, left, panel.low_ms, panel.high_ms, y, lambda ms: f"{ms:.{digits}f}")
    column_w = _PANEL_W / 2
    for column, (arm, values) in enumerate((("base", panel.base_ms), ("head", panel.head_ms))):
        x0 = left + column * column_w
        text(group, x0 + column_w / 2, bottom + 16, arm, anchor="middle", fill=_COLOURS[arm], weight="bold")
        median = statistics.median(values)
        line(group, x0 + column_w * 0.1, y(median), x0 + column_w * 0.9, y(median), _COLOURS[arm], "median")
        inner = column_w * 0.8  # dots spread over the middle of the column, in run order
        for number, ms in enumerate(values, start=1):
            cx = x0 + column_w * 0.1 + inner * (number - 0.5) / len(values)
            dot = ET.SubElement(group, "circle", {
                "class": "mark", "data-arm": arm, "data-process": str(number),
                "data-batch-size": str(panel.batch_size), "data-ms": repr(ms),
                "cx": f"{cx:.2f}", "cy": f"{y(ms):.2f}", "r": str(_DOT_R),
                "fill": _COLOURS[arm], "fill-opacity": "0.75", "stroke": "#333333", "stroke-width": "0.5",
            })
            ET.SubElement(dot, "title").text = f"{arm}, process {number}: {ms:.{digits}f} ms"
