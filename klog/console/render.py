"""Pure helpers of the console's pages: record values as text, JSON or hex, and inline SVG charts.

No IO: the HTTP layer calls these with data it already has.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

#: ways to show keys and values (the message browser's ``format``)
FORMATS = ("text", "json", "hex")
#: bytes of a key or value shown in full; longer ones are cut with a note (a page stays small)
MAX_SHOWN_BYTES = 16 * 1024
#: colours of the chart series, cycled (readable on white and for common colour blindness)
PALETTE = ("#2563eb", "#d97706", "#059669", "#dc2626", "#7c3aed", "#0891b2", "#be185d", "#4d7c0f")


def format_bytes(data: bytes | None, fmt: str) -> str:
    """``data`` as ``fmt``: text (UTF-8, undecodable bytes escaped), json (pretty when it parses, else the text)
    or hex (spaced pairs). None is shown as ``null``."""
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    if data is None:
        return "null"
    cut = len(data) > MAX_SHOWN_BYTES
    shown = data[:MAX_SHOWN_BYTES]
    if fmt == "hex":
        text = shown.hex(" ")
    else:
        text = shown.decode("utf-8", errors="backslashreplace")
        if fmt == "json" and not cut:
            try:
                text = json.dumps(json.loads(text), indent=2, ensure_ascii=False)
            except ValueError:
                pass
    if cut:
        text += f" ... ({len(data) - MAX_SHOWN_BYTES:,} more bytes)"
    return text


def record_view(record: Any, fmt: str) -> dict[str, Any]:
    """A consumed record (klog.client ConsumerRecord) as the browser shows it and the tail API returns it."""
    return {"partition": record.partition, "offset": record.offset, "timestamp": record.timestamp,
            "timestamp_type": "LogAppendTime" if record.timestamp_type == 1 else "CreateTime",
            "key": format_bytes(record.key, fmt), "value": format_bytes(record.value, fmt),
            "value_size": -1 if record.value is None else len(record.value),
            "headers": [(name, format_bytes(value, "text")) for name, value in record.headers]}


def human_bytes(n: float | None) -> str:
    if n is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def _scale(values: Sequence[float], lo_px: float, hi_px: float, vmin: float, vmax: float) -> list[float]:
    span = vmax - vmin or 1.0
    return [hi_px - (v - vmin) / span * (hi_px - lo_px) for v in values]


def sparkline(values: Sequence[float], *, width: int = 120, height: int = 28, label: str = "") -> str:
    """A small SVG line of ``values`` (oldest first); an empty frame when there are fewer than two."""
    title = f"<title>{_escape(label)}</title>" if label else ""
    frame = (f'<svg class="spark" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
             f'role="img" aria-label="{_escape(label)}">{title}')
    points = [v for v in values if v is not None and math.isfinite(v)]
    if len(points) < 2:
        return frame + f'<line x1="0" y1="{height - 1}" x2="{width}" y2="{height - 1}" class="spark-empty"/></svg>'
    xs = [i * (width - 2) / (len(points) - 1) + 1 for i in range(len(points))]
    ys = _scale(points, 2, height - 2, min(0.0, min(points)), max(points))
    path = " ".join(f"{x:.1f},{y:.1f}" for x, y in zip(xs, ys))
    return frame + f'<polyline fill="none" stroke="{PALETTE[0]}" stroke-width="1.5" points="{path}"/></svg>'


def line_chart(series: dict[str, Sequence[tuple[float, float]]], *, width: int = 860, height: int = 240,
               y_label: str = "") -> str:
    """An SVG chart of named series of (unix time s, value) points, with a legend and y-axis ticks."""
    left, right, top, bottom = 56, 150, 12, 28   # the legend sits in the right margin
    all_points = [p for pts in series.values() for p in pts]
    out = [f'<svg class="chart" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" '
           f'aria-label="{_escape(y_label)}">']
    if not all_points:
        out.append(f'<text x="{width / 2}" y="{height / 2}" text-anchor="middle" class="muted">'
                   'no samples yet</text></svg>')
        return "".join(out)
    t0 = min(t for t, _ in all_points)
    t1 = max(t for t, _ in all_points)
    vmax = max(max(v for _, v in all_points), 1.0)
    plot_w, plot_h = width - left - right, height - top - bottom
    for i in range(5):
        value = vmax * i / 4
        y = top + plot_h - plot_h * i / 4
        out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{width - right}" y2="{y:.1f}" class="grid"/>'
                   f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end" class="tick">{_tick(value)}</text>')
    span = (t1 - t0) or 1.0
    out.append(f'<text x="{left}" y="{height - 8}" class="tick">-{_duration(span)}</text>'
               f'<text x="{width - right}" y="{height - 8}" text-anchor="end" class="tick">now</text>')
    for index, (name, points) in enumerate(sorted(series.items())):
        colour = PALETTE[index % len(PALETTE)]
        coords = " ".join(f"{left + (t - t0) / span * plot_w:.1f},{top + plot_h - v / vmax * plot_h:.1f}"
                          for t, v in points)
        if len(points) == 1:
            cx, cy = coords.split(",")
            out.append(f'<circle cx="{cx}" cy="{cy}" r="3" fill="{colour}"/>')
        else:
            out.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{coords}"/>')
        legend_x = width - right + 12
        out.append(f'<rect x="{legend_x}" y="{top + 4 + index * 16}" width="10" height="10" fill="{colour}"/>'
                   f'<text x="{legend_x + 14}" y="{top + 13 + index * 16}" class="legend">{_escape(name)}</text>')
    out.append("</svg>")
    return "".join(out)


def _tick(value: float) -> str:
    if value >= 1e6:
        return f"{value / 1e6:.1f}M"
    if value >= 1e3:
        return f"{value / 1e3:.1f}k"
    return f"{value:.0f}" if value == int(value) else f"{value:.3g}"


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.1f}h"


def _escape(text: str) -> str:
    return (text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;"))
