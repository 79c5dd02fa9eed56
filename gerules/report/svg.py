"""Inline SVG charts for the HTML report: paired bars and the arena's lifetime chart.

Invariants:
- Pure functions from numbers and names to SVG text; no scripts, no external references, so
  the charts render wherever the HTML does (a browser offline, a headless screenshot).
- Every name that came from a model is escaped (``esc``); numbers are formatted, never
  interpolated raw.
- Output is well-formed XML (every element closed), so the report parses as XHTML too.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

WIDTH = 760
BEFORE, AFTER = "#b8c2cc", "#2f6db5"


def esc(text: object) -> str:
    return escape(str(text), quote=True)


def num(x: float) -> str:
    return f"{x:.1f}"


@dataclass(frozen=True, slots=True)
class Pair:
    label: str
    before: float
    after: float


def paired_bars(rows: Sequence[Pair], *, unit: str, title: str, top: int = 18) -> str:
    """Horizontal bars, two per row (before grey, after blue), largest rows first."""
    rows = sorted(rows, key=lambda r: -max(r.before, r.after))
    if len(rows) > top:
        rest = rows[top - 1:]
        rows = [*rows[:top - 1], Pair(f"{len(rest)} other op types", sum(r.before for r in rest),
                                      sum(r.after for r in rest))]
    label_w, value_w, bar_h, gap = 190, 90, 11, 8
    scale = max([r.before for r in rows] + [r.after for r in rows] + [1e-9])
    plot = WIDTH - label_w - value_w
    height = 34 + len(rows) * (2 * bar_h + gap)
    out = [_open(height, title), _legend(label_w)]
    for k, r in enumerate(rows):
        y = 34 + k * (2 * bar_h + gap)
        out.append(f'<text x="{label_w - 8}" y="{y + bar_h + 3}" text-anchor="end" '
                   f'class="lbl">{esc(_short(r.label, 28))}<title>{esc(r.label)}</title></text>')
        for j, (value, color) in enumerate(((r.before, BEFORE), (r.after, AFTER))):
            w = max(0.0, value / scale * plot)
            yy = y + j * bar_h
            out.append(f'<rect x="{label_w}" y="{yy}" width="{num(w)}" height="{bar_h - 1}" '
                       f'fill="{color}"><title>{esc(r.label)}: {value:.1f} {unit}</title></rect>')
            out.append(f'<text x="{num(label_w + w + 4)}" y="{yy + bar_h - 2}" class="val">'
                       f'{value:.1f} {unit}</text>')
    out.append("</svg>")
    return "".join(out)


def _open(height: int, title: str) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
            f'viewBox="0 0 {WIDTH} {height}" role="img" aria-label="{esc(title)}">'
            f"<title>{esc(title)}</title>")


def _legend(x: int) -> str:
    return (f'<rect x="{x}" y="6" width="12" height="12" fill="{BEFORE}"/>'
            f'<text x="{x + 16}" y="16" class="lbl">before</text>'
            f'<rect x="{x + 80}" y="6" width="12" height="12" fill="{AFTER}"/>'
            f'<text x="{x + 96}" y="16" class="lbl">after (estimate)</text>')


def _short(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "\u2026"


@dataclass(frozen=True, slots=True)
class Block:
    tensor: str
    offset: int
    size: int
    first: int
    last: int


def lifetime_chart(blocks: Sequence[Block], arena: int, steps: int, *, title: str,
                   limit: int = 4000) -> str:
    """Tensors as rectangles: x = execution step (producer to last reader), y = arena offset."""
    left, top, plot_w, plot_h = 70, 10, WIDTH - 80, 300
    arena, steps = max(arena, 1), max(steps, 1)
    sx, sy = plot_w / (steps + 1), plot_h / arena
    out = [_open(plot_h + 50, title),
           f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="#f7f8fa" '
           'stroke="#c9ced6"/>']
    for b in sorted(blocks, key=lambda b: -b.size)[:limit]:
        x, w = left + b.first * sx, max((b.last - b.first + 1) * sx, 1.0)
        y, h = top + b.offset * sy, max(b.size * sy, 0.5)
        out.append(f'<rect x="{num(x)}" y="{num(y)}" width="{num(w)}" height="{num(h)}" '
                   f'fill="{_color(b.tensor)}" stroke="#ffffff" stroke-width="0.3">'
                   f"<title>{esc(b.tensor)}: {b.size} bytes at offset {b.offset}, steps "
                   f"{b.first}-{b.last}</title></rect>")
    out += [_axis_text(left - 6, top + 10, "0", "end"),
            _axis_text(left - 6, top + plot_h, _mib(arena), "end"),
            _axis_text(left, top + plot_h + 16, "step 0", "start"),
            _axis_text(left + plot_w, top + plot_h + 16, f"step {steps}", "end"),
            _axis_text(left + plot_w / 2, top + plot_h + 34,
                       "execution order \u2192 (y: offset in the arena)", "middle")]
    if len(blocks) > limit:
        out.append(_axis_text(left + plot_w, top + 12, f"largest {limit} of {len(blocks)} "
                              "tensors", "end"))
    out.append("</svg>")
    return "".join(out)


def _axis_text(x: float, y: float, text: str, anchor: str) -> str:
    return f'<text x="{num(x)}" y="{num(y)}" text-anchor="{anchor}" class="lbl">{esc(text)}</text>'


def _mib(n: int) -> str:
    if n >= 1 << 20:
        return f"{n / (1 << 20):.1f} MiB"
    return f"{n / 1024:.1f} KiB" if n >= 1024 else f"{n} B"


def _color(name: str) -> str:
    """A stable, readable colour per tensor name."""
    h = int.from_bytes(hashlib.sha1(name.encode("utf-8", "replace")).digest()[:2], "big")
    return f"hsl({h % 360}, 55%, {52 + (h >> 9) % 16}%)"
