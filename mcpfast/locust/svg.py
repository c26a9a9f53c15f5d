"""A chart specification of :mod:`mcpfast.locust.webui_view` drawn as inline SVG (pure Python):
what the report page shows where the web UI's script draws the same specifications live.

A specification is ``{title, x, y, series, hlines, empty}``; an axis is ``{lo, hi, log, title,
ticks: [[value, label]]}`` with its labels already written (latencies by
:func:`mcpfast.locust.units.latency_text`); a series is ``{label, color, points: [[x, y]],
dash?, symbols?}``. ``empty`` set: the sentence is shown and no axis is drawn, so an empty chart is
never taken for data. Every text is escaped: a request name is text here, never markup.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from html import escape
from typing import Any

__all__ = ["chart"]

WIDTH, HEIGHT = 600, 300
LEFT, RIGHT, TOP, BOTTOM = 66, 14, 10, 44


def _scale(axis: dict[str, Any], start: float, end: float) -> Callable[[float], float]:
    log = bool(axis.get("log"))

    def f(v: float) -> float:
        return math.log10(max(v, 1e-9)) if log else v

    lo, hi = f(float(axis["lo"])), f(float(axis["hi"]))
    span = (hi - lo) or 1.0
    return lambda v: start + (f(float(v)) - lo) / span * (end - start)


def _text(x: float, y: float, content: str, anchor: str = "middle", extra: str = "") -> str:
    return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}"{extra}>{escape(content)}</text>'


def _marks(x: float, y: float, kind: str, color: str) -> str:
    if kind == "cross":
        d = f"M{x - 4:.1f} {y - 4:.1f}L{x + 4:.1f} {y + 4:.1f}M{x - 4:.1f} {y + 4:.1f}L{x + 4:.1f} {y - 4:.1f}"
        return f'<path d="{d}" stroke="{color}" stroke-width="2"/>'
    if kind == "square":
        return f'<rect x="{x - 4:.1f}" y="{y - 4:.1f}" width="8" height="8" fill="none" stroke="{color}" stroke-width="1.5"/>'
    return f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.5" fill="{color}"/>'


def chart(spec: dict[str, Any]) -> str:
    """One chart as a ``<figure>``: its title, the SVG and a legend (or the empty sentence)."""
    title = escape(str(spec.get("title") or ""))
    if spec.get("empty"):
        return f'<figure class="chart"><h3>{title}</h3><p class="empty">{escape(str(spec["empty"]))}</p></figure>'
    sx = _scale(spec["x"], LEFT, WIDTH - RIGHT)
    sy = _scale(spec["y"], HEIGHT - BOTTOM, TOP)
    out = [f'<svg viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{title}">']
    for value, label in spec["y"]["ticks"]:
        y = sy(value)
        out.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>')
        out.append(_text(LEFT - 6, y + 4, str(label), "end"))
    for value, label in spec["x"]["ticks"]:
        x = sx(value)
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{TOP}" y2="{HEIGHT - BOTTOM}" class="grid"/>')
        out.append(_text(x, HEIGHT - BOTTOM + 15, str(label)))
    out.append(f'<line x1="{LEFT}" x2="{LEFT}" y1="{TOP}" y2="{HEIGHT - BOTTOM}" class="axis"/>')
    out.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{HEIGHT - BOTTOM}" y2="{HEIGHT - BOTTOM}" class="axis"/>')
    out.append(_text((LEFT + WIDTH - RIGHT) / 2, HEIGHT - 6, str(spec["x"].get("title") or "")))
    middle = (TOP + HEIGHT - BOTTOM) / 2
    out.append(_text(12, middle, str(spec["y"].get("title") or ""), extra=f' transform="rotate(-90 12 {middle:.1f})"'))
    for h in spec.get("hlines") or []:
        y, color = sy(h["y"]), escape(str(h.get("color") or "#b00020"))
        out.append(
            f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" stroke="{color}" stroke-width="1.5" stroke-dasharray="6 4"/>'
        )
        out.append(_text(WIDTH - RIGHT - 4, y + 13 if y - 4 < TOP + 10 else y - 4, str(h.get("label") or ""), "end", f' fill="{color}"'))
    legend = []
    for s in spec.get("series") or []:
        pts = s.get("points") or []
        if not pts:
            continue
        color, label = escape(str(s.get("color") or "#333")), escape(str(s.get("label") or ""))
        group = [f'<g class="series" data-label="{label}">']
        if len(pts) > 1:
            d = " ".join(f"{'L' if i else 'M'}{sx(x):.1f} {sy(y):.1f}" for i, (x, y) in enumerate(pts))
            dash = ' stroke-dasharray="5 3"' if s.get("dash") else ""
            group.append(f'<path d="{d}" fill="none" stroke="{color}" stroke-width="1.8"{dash}/>')
        symbols = s.get("symbols")
        if symbols or len(pts) == 1:
            group += [_marks(sx(x), sy(y), symbols[i] if symbols else "circle", color) for i, (x, y) in enumerate(pts)]
        group.append("</g>")
        out.append("".join(group))
        swatch = "swatch dash" if s.get("dash") else "swatch"
        legend.append(f'<span><span class="{swatch}" style="border-top-color:{color}"></span>{label}</span>')
    out.append("</svg>")
    return f'<figure class="chart"><h3>{title}</h3>{"".join(out)}<div class="legend">{"".join(legend)}</div></figure>'
