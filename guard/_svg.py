"""What the guard's SVG charts draw alike: the document, a line, a label, and a value axis
with its range and ticks. Built with xml.etree, which escapes every string it writes."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Callable

SVG_NS = "http://www.w3.org/2000/svg"
TICKS = 5  # labelled values on a value axis, its ends included
# The axis reaches this share of the values' range past them, so no mark sits on its edge.
PAD_SHARE = 0.08


def svg_document(width: int, height: int, title: str, attrs: dict[str, str] | None = None) -> ET.Element:
    """The root on a white ground, titled; `attrs` are set after the common ones, in order."""
    svg = ET.Element("svg", {
        "xmlns": SVG_NS, "width": str(width), "height": str(height), "viewBox": f"0 0 {width} {height}",
        "role": "img", "font-family": "sans-serif", "font-size": "11", **(attrs or {}),
    })
    ET.SubElement(svg, "title").text = title
    ET.SubElement(svg, "rect", {"width": "100%", "height": "100%", "fill": "#ffffff"})
    return svg


def axis_range(values: list[float], flat_share: float) -> tuple[float, float]:
    """(low, high) of a value axis holding `values`, never below 0; when they are all equal it
    spans `flat_share` of them either side (1 when they are all 0)."""
    low, high = min(values), max(values)
    pad = (high - low) * PAD_SHARE or high * flat_share or 1.0
    return max(0.0, low - pad), high + pad


def y_scale(low: float, high: float, top: float, height: float) -> Callable[[float], float]:
    """The y of a value on an axis from `low` at the plot's bottom to `high` at its top."""
    bottom = top + height

    def y(value: float) -> float:
        return bottom - (value - low) / (high - low) * height

    return y


def y_ticks(parent: ET.Element, left: float, low: float, high: float, y: Callable[[float], float],
            label: Callable[[float], str]) -> None:
    """TICKS marks left of `left`, evenly from `low` to `high`, each with its label."""
    for tick in range(TICKS):
        value = low + (high - low) * tick / (TICKS - 1)
        line(parent, left - 4, y(value), left, y(value), "#888888")
        text(parent, left - 6, y(value) + 4, label(value), anchor="end")


def line(parent: ET.Element, x1: float, y1: float, x2: float, y2: float, colour: str, kind: str = "") -> None:
    """A thin line; one of a `kind` (its class) is drawn thicker."""
    attrs = {"x1": f"{x1:.2f}", "y1": f"{y1:.2f}", "x2": f"{x2:.2f}", "y2": f"{y2:.2f}", "stroke": colour}
    if kind:
        attrs |= {"class": kind, "stroke-width": "2"}
    ET.SubElement(parent, "line", attrs)


def text(parent: ET.Element, x: float, y: float, words: str, anchor: str = "start", fill: str = "#222222",
         size: str = "", weight: str = "", family: str = "", rotate: bool = False) -> None:
    """A label at (x, y); `rotate` turns it to read bottom to top about that point."""
    attrs = {"x": f"{x:.2f}", "y": f"{y:.2f}", "text-anchor": anchor, "fill": fill}
    if size:
        attrs["font-size"] = size
    if weight:
        attrs["font-weight"] = weight
    if family:
        attrs["font-family"] = family
    if rotate:
        attrs["transform"] = f"rotate(-90 {x:.2f} {y:.2f})"
    ET.SubElement(parent, "text", attrs).text = words
