"""Charts as inline SVG, drawn on the server: no script draws them, so the console's CSP stays as strict as it is.

Only SVG elements and presentation attributes (no `style` attribute, no script, no external reference); colours
come from classes the console's style sheet defines (`.chart .line-*`). Every text through `html.escape`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from html import escape

WIDTH, HEIGHT = 390, 130
_LEFT, _RIGHT, _TOP, _BOTTOM = 46, 8, 18, 20
"""Margins: the value axis on the left, the time axis below."""

STATE_CLASS = {
    "up": "up",
    "starting": "warn",
    "restarting": "warn",
    "down": "bad",
    "disabled": "muted",
    "stopped": "muted",
}


_WORST_FIRST = ("down", "restarting", "starting", "disabled", "stopped", "up")
"""Which state a slot that saw several is drawn in."""


def _e(value: object) -> str:
    return escape(str(value), quote=True)


def _scale(values: Sequence[float | None]) -> float:
    """A round top for the value axis: 1, 2 or 5 times a power of ten at or above the largest value."""
    top = max((v for v in values if v is not None), default=0.0)
    if top <= 0:
        return 1.0
    base = 10.0 ** math.floor(math.log10(top))
    for factor in (1, 2, 5, 10):
        if factor * base >= top * (1 - 1e-9):
            return factor * base
    return 10 * base


def _label(value: float, unit: str) -> str:
    if unit == "s":
        if value >= 1:
            return f"{value:.1f} s"
        return f"{value * 1000:.1f} ms".replace(".0 ms", " ms") if value < 0.01 else f"{value * 1000:.0f} ms"
    if unit == "%":
        return f"{value:.1f} %".replace(".0 %", " %") if value < 10 else f"{value:.0f} %"
    return f"{value:.2f}".rstrip("0").rstrip(".") + unit


def line_chart(
    chart_id: str,
    title: str,
    series: Mapping[str, Sequence[float | None]],
    first_slot_time: float,
    slot: float,
    unit: str = "",
    now_value: str = "",
) -> str:
    """Lines over time, one per entry of `series` (its values one per slot, oldest first; None: no point), with
    the latest value in the title. `first_slot_time`: the unix time of the first point."""
    count = max((len(values) for values in series.values()), default=0)
    plot_w, plot_h = WIDTH - _LEFT - _RIGHT, HEIGHT - _TOP - _BOTTOM
    top = _scale([v for values in series.values() for v in values])
    parts = [
        f'<svg class="chart" id="{_e(chart_id)}" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" '
        f'role="img" aria-label="{_e(title)}" xmlns="http://www.w3.org/2000/svg">',
        f'<text class="title" x="{_LEFT}" y="12">{_e(title)}'
        f"{f' · <tspan class=now>{_e(now_value)}</tspan>' if now_value else ''}</text>",
    ]
    for fraction in (0.0, 0.5, 1.0):
        y = _TOP + plot_h * (1 - fraction)
        parts.append(f'<line class="grid" x1="{_LEFT}" x2="{WIDTH - _RIGHT}" y1="{y:.1f}" y2="{y:.1f}"/>')
        parts.append(
            f'<text class="axis" x="{_LEFT - 4}" y="{y + 4:.1f}" text-anchor="end">'
            f"{_e(_label(top * fraction, unit))}</text>"
        )
    if count > 1:
        for index in (0, count // 2, count - 1):
            x = _LEFT + plot_w * index / (count - 1)
            when = datetime.fromtimestamp(first_slot_time + index * slot, UTC).strftime("%H:%M")
            anchor = "start" if index == 0 else "end" if index == count - 1 else "middle"
            parts.append(f'<text class="axis" x="{x:.1f}" y="{HEIGHT - 5}" text-anchor="{anchor}">{when}</text>')
    for number, (name, values) in enumerate(series.items()):
        segments: list[list[str]] = [[]]
        for index, value in enumerate(values):
            if value is None:
                if segments[-1]:
                    segments.append([])
                continue
            x = _LEFT + (plot_w * index / (count - 1) if count > 1 else 0)
            y = _TOP + plot_h * (1 - min(value, top) / top)
            segments[-1].append(f"{x:.1f},{y:.1f}")
        for points in segments:
            if len(points) == 1:
                x, y = points[0].split(",")
                parts.append(f'<circle class="line-{number}" cx="{x}" cy="{y}" r="1.6"/>')
            elif points:
                parts.append(f'<polyline class="line-{number}" data-series="{_e(name)}" points="{" ".join(points)}"/>')
    if len(series) > 1:
        x = WIDTH - _RIGHT
        for number, name in reversed(list(enumerate(series))):
            parts.append(f'<text class="legend line-{number}" x="{x}" y="12" text-anchor="end">{_e(name)}</text>')
            x -= 10 + 6 * len(name)
    parts.append("</svg>")
    return "".join(parts)


def timeline(
    chart_id: str, name: str, slots: Sequence[tuple[set[str], int]], first_slot_time: float, slot: float
) -> str:
    """A mount's states over time, one band per slot (the worst state seen in it), a tick where it restarted."""
    width, height, left = 3 * WIDTH + 20, 26, 120
    plot_w = width - left - _RIGHT
    count = max(len(slots), 1)
    step = plot_w / count
    parts = [
        f'<svg class="chart timeline" id="{_e(chart_id)}" viewBox="0 0 {width} {height}" width="{width}" '
        f'height="{height}" role="img" aria-label="{_e(name)} states" xmlns="http://www.w3.org/2000/svg">',
        f'<text class="title" x="0" y="16">{_e(name[:18])}</text>',
    ]
    for index, (states, restarts) in enumerate(slots):
        x = left + index * step
        if states:
            worst = next((s for s in _WORST_FIRST if s in states), sorted(states)[0])
            when = datetime.fromtimestamp(first_slot_time + index * slot, UTC).strftime("%H:%M:%S")
            parts.append(
                f'<rect class="state-{STATE_CLASS.get(worst, "muted")}" data-state="{_e(worst)}" x="{x:.1f}" y="4" '
                f'width="{step + 0.3:.1f}" height="14"><title>{when} {_e(", ".join(sorted(states)))}</title></rect>'
            )
        if restarts:
            parts.append(
                f'<path class="restart" d="M{x + step / 2:.1f} 18 l-4 7 h8 z">'
                f"<title>{restarts} restart(s)</title></path>"
            )
    parts.append("</svg>")
    return "".join(parts)
