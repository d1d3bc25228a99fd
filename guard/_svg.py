"""What the guard's SVG charts draw alike: the document, a line, a label, and a value axis
with its range and ticks. Built with xml.etree, which escapes every string it writes."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from typing import Callable

SVG_NS = "http://www.w3.org/2000/svg"
TICKS = 6  # labelled values on a value axis at most, its ends included
_EPS = 1e-9  # a value this close to a multiple of the step (in steps) is on it: float rounding
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


def round_step(low: float, high: float, most: int = TICKS) -> float:
    """The smallest step of 1, 2 or 5 times a power of ten that marks `low` to `high` with at
    most `most` ticks, its ends rounded out to the step; 0 where they are equal. (A dozen lines,
    where a plotting library would bring its whole weight in for them.)"""
    span = high - low
    if span <= 0:
        return 0.0
    power = 10 ** math.floor(math.log10(span / (most - 1)))
    for factor in (1, 2, 5, 10):
        step = factor * power
        if math.ceil(high / step - _EPS) - math.floor(low / step + _EPS) <= most - 1:
            return step
    return 10 * power  # not reached: 10 x the power always fits


def round_axis(low: float, high: float, most: int = TICKS) -> tuple[float, float, list[float]]:
    """(low, high, ticks): the axis from `low` to `high` rounded out to a round step, never
    below 0, and a tick at every step, its ends included."""
    step = round_step(low, high, most)
    if step == 0:
        return low, high, [low]
    digits = step_digits(step)
    first, last = math.floor(low / step + _EPS), math.ceil(high / step - _EPS)
    ticks = [float(round(k * step, digits)) for k in range(first, last + 1)]
    return ticks[0], ticks[-1], ticks


def step_digits(step: float) -> int:
    """Digits after the point that write every multiple of `step` exactly: 0.05 -> 2, 5 -> 0."""
    return max(0, -math.floor(math.log10(step) + _EPS))


def y_ticks(parent: ET.Element, left: float, ticks: list[float], y: Callable[[float], float]) -> None:
    """A mark left of `left` at each of `ticks` (a round step apart, `round_axis`), labelled with
    the digits the step needs."""
    digits = step_digits(ticks[1] - ticks[0]) if len(ticks) > 1 else 3
    for value in ticks:
        line(parent, left - 4, y(value), left, y(value), "#888888")
        text(parent, left - 6, y(value) + 4, f"{value:.{digits}f}", anchor="end").set("class", "tick")


def line(parent: ET.Element, x1: float, y1: float, x2: float, y2: float, colour: str, kind: str = "") -> None:
    """A thin line; one of a `kind` (its class) is drawn thicker."""
    attrs = {"x1": f"{x1:.2f}", "y1": f"{y1:.2f}", "x2": f"{x2:.2f}", "y2": f"{y2:.2f}", "stroke": colour}
    if kind:
        attrs |= {"class": kind, "stroke-width": "2"}
    ET.SubElement(parent, "line", attrs)


def text(parent: ET.Element, x: float, y: float, words: str, anchor: str = "start", fill: str = "#222222",
         size: str = "", weight: str = "", family: str = "", rotate: bool = False) -> ET.Element:
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
    label = ET.SubElement(parent, "text", attrs)
    label.text = words
    return label
