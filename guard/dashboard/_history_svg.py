"""One series of main as an SVG chart: a dot per commit in first-parent order, each a link to
the commit, the level of each segment between change points, and a line at every change point
coloured by its state. Built with xml.etree, which escapes every string of git it writes."""

from __future__ import annotations

import statistics
import xml.etree.ElementTree as ET

from guard.dashboard._models import SeriesHistory
from guard.history import ChangePoint, MainPoint

_SVG_NS = "http://www.w3.org/2000/svg"
_W, _H = 720, 260  # the whole chart, px
_LEFT, _RIGHT, _TOP, _BOTTOM = 64, 16, 24, 44
_TICKS = 5
_STATE_COLOURS = {"confirmed": "#c0392b", "candidate": "#e67e22", "dismissed": "#999999"}
_DOT = "#4c72b0"


def history_svg(history: SeriesHistory, server_url: str, metric: str) -> str:
    points = history.points
    svg = ET.Element("svg", {
        "xmlns": _SVG_NS, "width": str(_W), "height": str(_H), "viewBox": f"0 0 {_W} {_H}", "role": "img",
        "font-family": "sans-serif", "font-size": "11", "class": "history",
        "data-series": history.series.id,
    })
    ET.SubElement(svg, "title").text = f"{metric} on main, batch size {history.series.batch_size}"
    ET.SubElement(svg, "rect", {"width": "100%", "height": "100%", "fill": "#ffffff"})
    plot_w, plot_h = _W - _LEFT - _RIGHT, _H - _TOP - _BOTTOM
    ET.SubElement(svg, "rect", {"x": str(_LEFT), "y": str(_TOP), "width": str(plot_w), "height": str(plot_h),
                                "fill": "none", "stroke": "#bbbbbb"})
    if not points:
        _text(svg, _LEFT + plot_w / 2, _TOP + plot_h / 2, "no points yet", anchor="middle")
        return ET.tostring(svg, encoding="unicode")
    low, high = _axis([p.gpu_ms_per_step for p in points])
    index = {p.sha: i for i, p in enumerate(points)}

    def x(i: float) -> float:
        return _LEFT + plot_w * (i + 0.5) / len(points)

    def y(ms: float) -> float:
        return _TOP + plot_h - (ms - low) / (high - low) * plot_h

    for tick in range(_TICKS):
        ms = low + (high - low) * tick / (_TICKS - 1)
        _line(svg, _LEFT - 4, y(ms), _LEFT, y(ms), "#888888")
        _text(svg, _LEFT - 6, y(ms) + 4, f"{ms:.3g}", anchor="end")
    _text(svg, 14, _TOP + plot_h / 2, metric, anchor="middle", rotate=True)
    _levels(svg, points, history.change_points, index, x, y)
    for cp in history.change_points:
        if cp.before_sha in index and cp.after_sha in index:
            _change_point(svg, cp, (x(index[cp.before_sha]) + x(index[cp.after_sha])) / 2)
    every = max(1, len(points) // 8)  # a commit label every few points, so they never overlap
    for i, point in enumerate(points):
        _dot(svg, point, x(i), y(point.gpu_ms_per_step), server_url, history.series.repo)
        if i % every == 0:
            _text(svg, x(i), _TOP + plot_h + 14, point.sha[:7], anchor="middle", family="monospace")
    _text(svg, _LEFT + plot_w / 2, _H - 8, "commits on main, oldest first (each dot links to its commit)",
          anchor="middle", fill="#555555")
    return ET.tostring(svg, encoding="unicode")


def _dot(svg: ET.Element, point: MainPoint, cx: float, cy: float, server_url: str, repo: str) -> None:
    link = ET.SubElement(svg, "a", {"href": f"{server_url.rstrip('/')}/{repo}/commit/{point.sha}"})
    dot = ET.SubElement(link, "circle", {
        "class": "point", "data-sha": point.sha, "data-ms": repr(point.gpu_ms_per_step),
        "cx": f"{cx:.2f}", "cy": f"{cy:.2f}", "r": "3.5", "fill": _DOT, "stroke": "#223355", "stroke-width": "0.5",
    })
    ET.SubElement(dot, "title").text = f"{point.sha[:12]} {point.subject}: {point.gpu_ms_per_step:.4g} ms"


def _levels(svg, points, change_points, index, x, y) -> None:  # type: ignore[no-untyped-def]
    """The median of each stretch between change points the chart marks (dismissed ones aside)."""
    cuts = sorted(index[c.after_sha] for c in change_points if c.state != "dismissed" and c.after_sha in index)
    bounds = [0, *cuts, len(points)]
    for start, end in zip(bounds, bounds[1:]):
        values = [p.gpu_ms_per_step for p in points[start:end]]
        if values:
            level = statistics.median(values)
            _line(svg, x(start - 0.4), y(level), x(end - 0.6), y(level), "#2a9d8f", "level")


def _change_point(svg: ET.Element, cp: ChangePoint, cx: float) -> None:
    colour = _STATE_COLOURS[cp.state]
    group = ET.SubElement(svg, "g", {"class": f"change-point {cp.state}", "data-state": cp.state,
                                     "data-after-sha": cp.after_sha, "data-change-pct": f"{cp.change_pct:.3f}"})
    ET.SubElement(group, "line", {"x1": f"{cx:.2f}", "y1": str(_TOP), "x2": f"{cx:.2f}", "y2": str(_H - _BOTTOM),
                                  "stroke": colour, "stroke-width": "2", "stroke-dasharray": "5,3"})
    _text(group, cx + 3, _TOP + 12, f"{cp.change_pct:+.1f}% {cp.state}", fill=colour, weight="bold")
    ET.SubElement(group, "title").text = (
        f"{cp.state} change point: {cp.before_sha[:12]} -> {cp.after_sha[:12]}, {cp.change_pct:+.2f}%, "
        f"p = {cp.p_value:.2g}")


def _axis(values: list[float]) -> tuple[float, float]:
    low, high = min(values), max(values)
    pad = (high - low) * 0.08 or high * 0.01 or 1.0
    return max(0.0, low - pad), high + pad


def _line(parent: ET.Element, x1: float, y1: float, x2: float, y2: float, colour: str, kind: str = "") -> None:
    attrs = {"x1": f"{x1:.2f}", "y1": f"{y1:.2f}", "x2": f"{x2:.2f}", "y2": f"{y2:.2f}", "stroke": colour}
    if kind:
        attrs |= {"class": kind, "stroke-width": "2"}
    ET.SubElement(parent, "line", attrs)


def _text(parent: ET.Element, x: float, y: float, words: str, anchor: str = "start", fill: str = "#222222",
          weight: str = "", family: str = "", rotate: bool = False) -> None:
    attrs = {"x": f"{x:.2f}", "y": f"{y:.2f}", "text-anchor": anchor, "fill": fill}
    if weight:
        attrs["font-weight"] = weight
    if family:
        attrs["font-family"] = family
    if rotate:
        attrs["transform"] = f"rotate(-90 {x:.2f} {y:.2f})"
    ET.SubElement(parent, "text", attrs).text = words
