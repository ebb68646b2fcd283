"""Charts as plain SVG text (no plotting library): a line chart with a legend and horizontal bar
charts, each with axes, ticks, labels and escaped text. Used by `records plot` and
`run --profile-out chart.svg`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

# matplotlib's tab10: distinct in colour and in greyscale order; series past ten get dashes
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
           "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")  # fmt: skip
DASHES = ("", "6,3", "2,2", "8,3,2,3")
FONT = "font-family:DejaVu Sans,Helvetica,Arial,sans-serif"
CHAR_WIDTH = 6.6  # px per character at 11 px: enough room for labels in common sans fonts
MAX_LABEL = 48  # characters of a label before it is cut with an ellipsis
# xml.sax.saxutils.escape's table plus the double quote (importing it loads urllib: 40 ms of
# every `tvmc run`, which imports this module for --profile-out)
_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"})


def escape(text: object) -> str:
    """`text` safe inside an SVG element or a double-quoted attribute."""
    return str(text).translate(_ESCAPES)


def clip(label: str, limit: int = MAX_LABEL) -> str:
    return label if len(label) <= limit else label[: limit - 1] + "…"


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """About `count` round tick values (1, 2, 2.5 or 5 times a power of ten) covering
    [low, high]."""
    if not high > low:
        high = low + 1.0
    raw = (high - low) / max(count, 1)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    first = math.floor(low / step) * step
    ticks, value = [], first
    while value < high + step * 0.5:
        ticks.append(round(value, 12))
        value += step
    return ticks


def tick_label(value: float) -> str:
    """A tick value as short text: 0.25, 12, 1.5k, 2M."""
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:g}{suffix}"
    return f"{value:.4g}"


def text(x: float, y: float, content: str, size: int = 11, anchor: str = "start",
         extra: str = "") -> str:  # fmt: skip
    return (f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}" '
            f'style="{FONT}"{extra}>{escape(content)}</text>')  # fmt: skip


def document(width: float, height: float, body: Sequence[str], title: str) -> str:
    """A standalone SVG document of `body` elements on a white background."""
    return "\n".join([
        '<?xml version="1.0" encoding="UTF-8"?>',
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {width:.0f} {height:.0f}">',
        f"<title>{escape(title)}</title>",
        f'<rect width="{width:.0f}" height="{height:.0f}" fill="white"/>',
        *body,
        "</svg>",
        "",
    ])  # fmt: skip


def line_chart(
    title: str,
    x_label: str,
    y_label: str,
    series: dict[str, list[tuple[float, float]]],
    width: int = 860,
    height: int = 460,
) -> str:
    """Step lines (a value holds until the next point), one per series, legend on the right."""
    legend_width = min(max((len(clip(n)) for n in series), default=0) * CHAR_WIDTH + 40, 340)
    left, top, right, bottom = 70, 40, 20 + legend_width, 50
    height = max(height, top + 22 * len(series) + bottom)
    plot_w, plot_h = width - left - right, height - top - bottom
    points = [p for values in series.values() for p in values]
    x_ticks = nice_ticks(min((x for x, _ in points), default=0), max((x for x, _ in points),
                                                                      default=1))  # fmt: skip
    y_ticks = nice_ticks(0.0, max((y for _, y in points), default=1.0))
    x0, x1, y1 = x_ticks[0], x_ticks[-1], y_ticks[-1]

    def sx(x: float) -> float:
        return left + (x - x0) / ((x1 - x0) or 1) * plot_w

    def sy(y: float) -> float:
        return top + plot_h - y / (y1 or 1) * plot_h

    body = [text(width / 2, 22, title, 14, "middle", ' font-weight="bold"')]
    body += _axes(left, top, plot_w, plot_h, x_label, y_label)
    for x in x_ticks:
        body.append(f'<line x1="{sx(x):.1f}" y1="{top + plot_h}" x2="{sx(x):.1f}" '
                    f'y2="{top + plot_h + 4}" stroke="black"/>')  # fmt: skip
        body.append(text(sx(x), top + plot_h + 16, tick_label(x), 10, "middle"))
    for y in y_ticks:
        body.append(f'<line x1="{left}" y1="{sy(y):.1f}" x2="{left + plot_w}" y2="{sy(y):.1f}" '
                    'stroke="#e0e0e0"/>')  # fmt: skip
        body.append(text(left - 6, sy(y) + 3.5, tick_label(y), 10, "end"))
    for i, (name, values) in enumerate(series.items()):
        colour, dash = PALETTE[i % len(PALETTE)], DASHES[i // len(PALETTE) % len(DASHES)]
        style = f' stroke-dasharray="{dash}"' if dash else ""
        if not values:
            continue
        (fx, fy), last = values[0], values[-1]
        path = [f"M{sx(fx):.1f},{sy(fy):.1f}"]
        path += [f"H{sx(x):.1f} V{sy(y):.1f}" for x, y in values[1:]]
        body.append(f'<path class="series" data-series="{escape(name)}" d="{" ".join(path)}" '
                    f'fill="none" stroke="{colour}" stroke-width="1.8"{style}/>')  # fmt: skip
        body.append(f'<circle cx="{sx(last[0]):.1f}" cy="{sy(last[1]):.1f}" r="3" '
                    f'fill="{colour}"/>')  # fmt: skip
        ly = top + 8 + 22 * i
        lx = width - right + 16
        body.append(f'<line x1="{lx}" y1="{ly}" x2="{lx + 22}" y2="{ly}" stroke="{colour}" '
                    f'stroke-width="2.5"{style}/>')  # fmt: skip
        body.append(text(lx + 28, ly + 4, clip(name), 11, extra=' class="legend"'))
    return document(width, height, body, title)


def _axes(left: float, top: float, w: float, h: float, x_label: str, y_label: str) -> list[str]:
    return [
        f'<line x1="{left}" y1="{top + h}" x2="{left + w}" y2="{top + h}" stroke="black"/>',
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + h}" stroke="black"/>',
        text(left + w / 2, top + h + 36, x_label, 12, "middle"),
        text(18, top + h / 2, y_label, 12, "middle",
             f' transform="rotate(-90 18 {top + h / 2:.1f})"'),
    ]  # fmt: skip


def bar_panel(
    title: str, x_label: str, bars: Sequence[tuple[str, float]], top: float, width: int
) -> tuple[list[str], float]:
    """Horizontal bars, largest first as given, labels on the left and values at the ends:
    (elements, the panel's height)."""
    label_width = min(max((len(clip(n)) for n, _ in bars), default=4) * CHAR_WIDTH + 16, 360)
    left, bar_h, gap = label_width, 16, 6
    plot_w = width - left - 110  # room for the value and share after the longest bar
    plot_top = top + 30
    plot_h = len(bars) * (bar_h + gap) + gap
    ticks = nice_ticks(0.0, max((v for _, v in bars), default=1.0))
    high = ticks[-1] or 1.0
    total = sum(v for _, v in bars)
    body = [text(width / 2, top + 18, title, 14, "middle", ' font-weight="bold"')]
    body += [
        f'<line x1="{left}" y1="{plot_top}" x2="{left}" y2="{plot_top + plot_h}" stroke="black"/>',
        f'<line x1="{left}" y1="{plot_top + plot_h}" x2="{left + plot_w}" '
        f'y2="{plot_top + plot_h}" stroke="black"/>',
        text(left + plot_w / 2, plot_top + plot_h + 34, x_label, 12, "middle"),
    ]  # fmt: skip
    for tick in ticks:
        x = left + tick / high * plot_w
        body.append(f'<line x1="{x:.1f}" y1="{plot_top}" x2="{x:.1f}" y2="{plot_top + plot_h + 4}" '
                    'stroke="#e0e0e0"/>')  # fmt: skip
        body.append(text(x, plot_top + plot_h + 16, tick_label(tick), 10, "middle"))
    for i, (name, value) in enumerate(bars):
        y = plot_top + gap + i * (bar_h + gap)
        w = max(value / high * plot_w, 0.5)
        body.append(f'<rect class="bar" data-label="{escape(name)}" data-value="{value:.6g}" '
                    f'x="{left}" y="{y:.1f}" width="{w:.1f}" height="{bar_h}" '
                    f'fill="{PALETTE[0]}"/>')  # fmt: skip
        body.append(text(left - 6, y + bar_h - 4, clip(name), 11, "end"))
        share = f" ({100 * value / total:.1f}%)" if total > 0 else ""
        body.append(text(left + w + 4, y + bar_h - 4, f"{value:.4g}{share}", 10))
    return body, plot_top + plot_h + 46 - top


def bar_charts(title: str, panels: Sequence[tuple[str, str, Sequence[tuple[str, float]]]],
               width: int = 860) -> str:  # fmt: skip
    """Bar panels (title, x label, bars) stacked in one document."""
    body, at = [], 0.0
    for panel_title, x_label, bars in panels:
        elements, height = bar_panel(panel_title, x_label, bars, at, width)
        body += elements
        at += height + 10
    return document(width, at, body, title)
