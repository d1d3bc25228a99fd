"""One series of main as an SVG chart: a dot per commit in first-parent order, each a link to
the commit, the level of each segment between change points, and a line at every change point
coloured by its state. Built with xml.etree, which escapes every string of git it writes."""

from __future__ import annotations

import statistics
import xml.etree.ElementTree as ET

from guard._markdown import visible
from guard._svg import axis_range, line, round_axis, svg_document, text, y_scale, y_ticks
from guard.dashboard._models import SeriesHistory
from guard.history import ChangePoint, MainPoint

_W, _H = 720, 260  # the whole chart, px
_LEFT, _RIGHT, _TOP, _BOTTOM = 64, 16, 24, 44
# All points at one value: the axis spans this share of it either side.
_FLAT_SHARE = 0.01
_STATE_COLOURS = {"confirmed": "#c0392b", "candidate": "#e67e22", "dismissed": "#999999"}
_DOT = "#4c72b0"


def history_svg(history: SeriesHistory, server_url: str, metric: str) -> str:
    points = history.points
    svg = svg_document(_W, _H, f"{metric} on main, batch size {history.series.batch_size}",
                       {"class": "history", "data-series": history.series.id})
    plot_w, plot_h = _W - _LEFT - _RIGHT, _H - _TOP - _BOTTOM
    ET.SubElement(svg, "rect", {"x": str(_LEFT), "y": str(_TOP), "width": str(plot_w), "height": str(plot_h),
                                "fill": "none", "stroke": "#bbbbbb"})
    if not points:
        text(svg, _LEFT + plot_w / 2, _TOP + plot_h / 2, "no points yet", anchor="middle")
        return ET.tostring(svg, encoding="unicode")
    low, high, ticks = round_axis(*axis_range([p.gpu_ms_per_step for p in points], _FLAT_SHARE))
    index = {p.sha: i for i, p in enumerate(points)}
    y = y_scale(low, high, _TOP, plot_h)

    def x(i: float) -> float:
        return _LEFT + plot_w * (i + 0.5) / len(points)

    y_ticks(svg, _LEFT, ticks, y)
    text(svg, 14, _TOP + plot_h / 2, metric, anchor="middle", rotate=True)
    _levels(svg, points, history.change_points, index, x, y)
    for cp in history.change_points:
        if cp.before_sha in index and cp.after_sha in index:
            _change_point(svg, cp, (x(index[cp.before_sha]) + x(index[cp.after_sha])) / 2)
    every = max(1, len(points) // 8)  # a commit label every few points, so they never overlap
    for i, point in enumerate(points):
        _dot(svg, point, x(i), y(point.gpu_ms_per_step), server_url, history.series.repo)
        if i % every == 0:
            text(svg, x(i), _TOP + plot_h + 14, point.sha[:7], anchor="middle", family="monospace")
    text(svg, _LEFT + plot_w / 2, _H - 8, "commits on main, oldest first (each dot links to its commit)",
          anchor="middle", fill="#555555")
    return ET.tostring(svg, encoding="unicode")


def _dot(svg: ET.Element, point: MainPoint, cx: float, cy: float, server_url: str, repo: str) -> None:
    link = ET.SubElement(svg, "a", {"href": f"{server_url.rstrip('/')}/{repo}/commit/{point.sha}"})
    dot = ET.SubElement(link, "circle", {
        "class": "point", "data-sha": point.sha, "data-ms": repr(point.gpu_ms_per_step),
        "cx": f"{cx:.2f}", "cy": f"{cy:.2f}", "r": "3.5", "fill": _DOT, "stroke": "#223355", "stroke-width": "0.5",
    })
    ET.SubElement(dot, "title").text = f"{point.sha[:12]} {visible(point.subject)}: {point.gpu_ms_per_step:.4g} ms"


def _levels(svg, points, change_points, index, x, y) -> None:  # type: ignore[no-untyped-def]
    """The median of each stretch between change points the chart marks (dismissed ones aside)."""
    cuts = sorted(index[c.after_sha] for c in change_points if c.state != "dismissed" and c.after_sha in index)
    bounds = [0, *cuts, len(points)]
    for start, end in zip(bounds, bounds[1:]):
        values = [p.gpu_ms_per_step for p in points[start:end]]
        if values:
            level = statistics.median(values)
            line(svg, x(start - 0.4), y(level), x(end - 0.6), y(level), "#2a9d8f", "level")


def _change_point(svg: ET.Element, cp: ChangePoint, cx: float) -> None:
    colour = _STATE_COLOURS[cp.state]
    group = ET.SubElement(svg, "g", {"class": f"change-point {cp.state}", "data-state": cp.state,
                                     "data-after-sha": cp.after_sha, "data-change-pct": f"{cp.change_pct:.3f}"})
    ET.SubElement(group, "line", {"x1": f"{cx:.2f}", "y1": str(_TOP), "x2": f"{cx:.2f}", "y2": str(_H - _BOTTOM),
                                  "stroke": colour, "stroke-width": "2", "stroke-dasharray": "5,3"})
    text(group, cx + 3, _TOP + 12, f"{cp.change_pct:+.1f}% {cp.state}", fill=colour, weight="bold")
    ET.SubElement(group, "title").text = (
        f"{cp.state} change point: {cp.before_sha[:12]} -> {cp.after_sha[:12]}, {cp.change_pct:+.2f}%, "
        f"p = {cp.p_value:.2g}")
