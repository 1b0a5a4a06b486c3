"""The admin page's pictures, drawn on the server as inline SVG (no script, no external file, no inline style:
the studio's Content-Security-Policy allows neither, and SVG presentation attributes need none).

- `results_chart_svg`: one horizontal bar per system: mean rank (rank studies; 1 = best), share of comparisons won
  (pairwise) or mean rating over the statements (Likert), with each system's number of judgements.
"""

from __future__ import annotations

import html
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

BAR = "#0b5cad"
HUMAN = "#4d4d4d"
AXIS = "#555555"
GRID = "#d0d4da"

_COLUMN_PX = 7.5  # width of a 13 px label per terminal column (a wide character counts two)
_MIN_LABEL_PX, _MAX_LABEL_PX = 150, 290  # the label column grows with the longest name, then names are shortened


def _columns(text: str) -> int:
    """Columns ``text`` takes (East Asian wide and full-width characters two)."""
    import unicodedata

    return sum(2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1 for ch in text)


def _shorten(text: str, limit: int) -> str:
    """``text`` shortened in the middle (an ellipsis) to at most ``limit`` columns; as it is when it fits."""
    if _columns(text) <= limit:
        return text
    head, tail = "", ""
    budget = limit - 1
    left, right = 0, len(text) - 1
    while left <= right:  # characters from both ends in turn, while they fit
        take_left = _columns(head) <= _columns(tail)
        ch = text[left] if take_left else text[right]
        if _columns(head) + _columns(tail) + _columns(ch) > budget:
            break
        if take_left:
            head, left = head + ch, left + 1
        else:
            tail, right = ch + tail, right - 1
    return head + "\u2026" + tail


def bar_labels(names: Sequence[str]) -> tuple[list[str], int]:
    """The labels drawn beside the bars and the width of their column (px): names in full when the longest fits in
    `_MAX_LABEL_PX`, else shortened in the middle (a long common part of two names, such as
    ``-finetuned-on-vist-beam5``, no longer hides what tells them apart); names then drawn alike get ``#k``."""
    limit = int((_MAX_LABEL_PX - 8) // _COLUMN_PX)
    shown = [_shorten(n, limit - 3) if _columns(n) > limit else n for n in names]  # room for " #k" (k < 10)
    alike: dict[str, list[str]] = {}
    for name, label in zip(names, shown, strict=True):
        if name not in alike.setdefault(label, []):
            alike[label].append(name)
    shown = [
        f"{label} #{alike[label].index(name) + 1}" if len(alike[label]) > 1 else label
        for name, label in zip(names, shown, strict=True)
    ]
    widest = max((_columns(label) for label in shown), default=0)
    return shown, int(min(max(_MIN_LABEL_PX, 8 + widest * _COLUMN_PX + 4), _MAX_LABEL_PX))


def chart_spec(task: str, results: Sequence[Mapping[str, Any]], *, n_systems: int | None = None) -> dict[str, Any]:
    """What the results chart shows: ``{"title", "axis", "low", "high", "bars": [(system, value, n)]}``.

    rank: mean rank (axis from 1 to the number of systems, lower is better); pairwise: share of the system's
    comparisons it won; likert: mean of its per-statement mean ratings (1-5).
    """
    bars: list[tuple[str, float, int]] = []
    for r in results:
        if task == "rank":
            value = float(r["mean rank"])
        elif task == "pairwise":
            value = float(r["win"])
        else:
            ratings = [float(v) for k, v in r.items() if k not in ("system", "n")]
            value = statistics.fmean(ratings) if ratings else float("nan")
        bars.append((str(r["system"]), value, int(r.get("n", 0))))
    if task == "rank":
        k = max(n_systems or 0, len(bars), 2)
        return {
            "title": "Mean rank per system (1 = best)",
            "axis": "mean rank (lower is better)",
            "low": 1.0,
            "high": float(k),
            "bars": bars,
        }
    if task == "pairwise":
        return {
            "title": "Share of comparisons won per system",
            "axis": "share of comparisons won (ties count as not won)",
            "low": 0.0,
            "high": 1.0,
            "bars": bars,
        }
    return {
        "title": "Mean rating per system (over all statements)",
        "axis": "mean rating (1 = strongly disagree, 5 = strongly agree)",
        "low": 1.0,
        "high": 5.0,
        "bars": bars,
    }


def results_chart_svg(
    task: str,
    results: Sequence[Mapping[str, Any]],
    *,
    reference_system: str = "human",
    n_systems: int | None = None,
    width: int = 640,
) -> str:
    """The results chart as an ``<svg role="img">`` string (every text escaped); "" when there are no results."""
    spec = chart_spec(task, results, n_systems=n_systems)
    bars = spec["bars"]
    if not bars:
        return ""
    esc = html.escape
    labels, label_w = bar_labels([system for system, _, _ in bars])
    right_w, top, row_h, bottom = 120, 34, 30, 46
    plot_w = width - label_w - right_w
    height = top + row_h * len(bars) + bottom
    low, high = spec["low"], spec["high"]

    def x(v: float) -> float:
        v = min(max(v, low), high)
        return label_w + plot_w * (v - low) / (high - low)

    desc = "; ".join(f"{s}: {v:.3f} (n={n})" for s, v, n in bars)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" role="img" aria-labelledby="chart-title chart-desc" '
        f'viewBox="0 0 {width} {height}" width="100%" preserveAspectRatio="xMinYMin meet" '
        f'font-family="system-ui, sans-serif" font-size="13">',
        f'<title id="chart-title">{esc(spec["title"])}</title>',
        f'<desc id="chart-desc">{esc(desc)}</desc>',
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>',
        f'<text x="{label_w}" y="20" font-size="14" font-weight="600" fill="#1b1f24">{esc(spec["title"])}</text>',
    ]
    ticks = 5
    for i in range(ticks + 1):
        v = low + (high - low) * i / ticks
        xi = x(v)
        y_end = top + row_h * len(bars)
        parts.append(f'<line x1="{xi:.1f}" y1="{top - 4}" x2="{xi:.1f}" y2="{y_end}" stroke="{GRID}"/>')
        parts.append(
            f'<text x="{xi:.1f}" y="{y_end + 16}" text-anchor="middle" fill="{AXIS}" font-size="11">{v:.3g}</text>'
        )
    for i, ((system, value, n), label) in enumerate(zip(bars, labels, strict=True)):
        y = top + row_h * i
        color = HUMAN if system == reference_system else BAR
        x0, x1 = x(low), x(value) if value == value else x(low)
        parts.append(
            f'<text x="{label_w - 8}" y="{y + row_h / 2 + 4:.1f}" text-anchor="end" fill="#1b1f24">{esc(label)}</text>'
        )
        parts.append(
            f'<rect class="bar" x="{x0:.1f}" y="{y + 5}" width="{max(x1 - x0, 1.0):.1f}" height="{row_h - 10}" '
            f'fill="{color}"><title>{esc(system)}: {value:.3f} (n={n})</title></rect>'
        )
        parts.append(
            f'<text x="{x1 + 6:.1f}" y="{y + row_h / 2 + 4:.1f}" fill="#1b1f24" font-size="12">'
            f"{value:.3f} (n={n})</text>"
        )
    y_axis = top + row_h * len(bars) + 36
    parts.append(
        f'<text x="{label_w + plot_w / 2:.1f}" y="{y_axis}" text-anchor="middle" fill="{AXIS}">'
        f"{esc(spec['axis'])}</text>"
    )
    parts.append("</svg>")
    return "\n".join(parts)
