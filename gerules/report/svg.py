"""Inline SVG for the HTML report: paired bars, the arena's lifetime chart, the in-use curve
and layered pictures of a graph (boxes that link to their rows).

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
                   limit: int = 4000, labels: int = 40) -> str:
    """Tensors as rectangles: x = execution step (producer to last reader), y = arena offset;
    the ``labels`` largest blocks with room get their name and size written in (so the
    chart reads on paper, not only on hover); offsets are ticked in MiB."""
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
        if w > 26 and h > 11 and labels > 0:  # printed text for the blocks with room for it
            labels -= 1
            size = _mib(b.size).replace(" MiB", "M").replace(" KiB", "K")
            text = size if w < 90 else f"{_short(b.tensor, int(w / 5.5) - len(size) - 1)} {size}"
            out.append(f'<text x="{num(x + 2)}" y="{num(y + 10)}" class="blk">{esc(text)}'
                       "</text>")
    out += [_axis_text(left - 6, top + 10, "0", "end"),
            _axis_text(left - 6, top + plot_h / 2, _mib(arena // 2), "end"),
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


# ------------------------------------------------------------------ graph pictures

NODE_W, NODE_H, GAP_X, GAP_Y = 124, 28, 14, 18
FILL = {"": "#eef3f9", "fused": "#ffd9a8", "gone": "#fbe3e3"}
STROKE = {"": "#7d93ad", "fused": "#c26a00", "gone": "#c46262"}


@dataclass(frozen=True, slots=True)
class GNode:
    """One box of a graph picture: its text, the boxes it reads, where a click goes."""

    label: str  # first line (the op, or a block name)
    detail: str  # second line (the node name, or the block's op counts)
    preds: tuple[int, ...]
    href: str
    mark: str = ""  # "", "fused" (a rule made it) or "gone" (a fusion replaced it)
    tip: str = ""
    color: str = ""  # a fill that replaces the mark's (the partition picture's stage colour)


def graph_picture(nodes: Sequence[GNode], places: Sequence[tuple[int, int]], *,
                  title: str) -> str:
    """Boxes at (layer, slot) top to bottom, edges as curves, each box a link."""
    if not nodes:
        return ""
    cols = max(s for _, s in places) + 1
    rows = max(lay for lay, _ in places) + 1
    width = max(WIDTH, 20 + cols * (NODE_W + GAP_X))
    height = 20 + rows * (NODE_H + GAP_Y)
    xy = [(10 + s * (NODE_W + GAP_X), 10 + lay * (NODE_H + GAP_Y)) for lay, s in places]
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" role="img" aria-label="{esc(title)}">'
           f"<title>{esc(title)}</title>"]
    for k, n in enumerate(nodes):
        x2, y2 = xy[k][0] + NODE_W / 2, xy[k][1]
        for p in n.preds:
            x1, y1 = xy[p][0] + NODE_W / 2, xy[p][1] + NODE_H
            mid = (y1 + y2) / 2
            out.append(f'<path d="M{num(x1)},{num(y1)} C{num(x1)},{num(mid)} {num(x2)},'
                       f'{num(mid)} {num(x2)},{num(y2)}" fill="none" stroke="#9aa7b5" '
                       'stroke-width="1"/>')
    for k, n in enumerate(nodes):
        x, y = xy[k]
        dash = ' stroke-dasharray="4 2"' if n.mark == "gone" else ""
        out.append(f'<a href="{esc(n.href)}"><rect x="{x}" y="{y}" width="{NODE_W}" '
                   f'height="{NODE_H}" rx="5" fill="{n.color or FILL[n.mark]}" '
                   f'stroke="{STROKE[n.mark]}"'
                   f'{dash}><title>{esc(n.tip or n.detail)}</title></rect>'
                   f'<text x="{x + NODE_W / 2}" y="{y + 12}" text-anchor="middle" '
                   f'class="gop">{esc(_short(n.label, 20))}</text>'
                   f'<text x="{x + NODE_W / 2}" y="{y + 23}" text-anchor="middle" '
                   f'class="gname">{esc(_short(n.detail, 24))}</text></a>')
    out.append("</svg>")
    return "".join(out)


def line_chart(series: Sequence[tuple[str, Sequence[int]]], *, title: str,
               limit: int | None = None) -> str:
    """Bytes over execution steps, one line per series, its peak labelled; ``limit`` (the
    largest arena) as a dashed line. Labels are text, so they print."""
    left, top, plot_w, plot_h = 80, 24, WIDTH - 100, 220
    peak = max([max(s, default=0) for _, s in series] + [limit or 0, 1])
    steps = max([len(s) for _, s in series] + [2]) - 1
    out = [_open(plot_h + 70, title),
           f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="#f7f8fa" '
           'stroke="#c9ced6"/>']
    for frac in (0.0, 0.5, 1.0):
        y = top + plot_h * (1 - frac)
        out.append(_axis_text(left - 6, y + 4, _mib(int(peak * frac)), "end"))
    if limit:
        y = top + plot_h * (1 - limit / peak)
        out.append(f'<line x1="{left}" y1="{num(y)}" x2="{left + plot_w}" y2="{num(y)}" '
                   'stroke="#8a3b00" stroke-dasharray="5 3"/>')
    for k, (name, values) in enumerate(series):
        color = _PALETTE[k % len(_PALETTE)]
        pts = " ".join(f"{num(left + i / max(steps, 1) * plot_w)},"
                       f"{num(top + plot_h * (1 - v / peak))}" for i, v in enumerate(values))
        out.append(f'<polyline points="{pts}" fill="none" stroke="{color}" stroke-width="1.6"/>')
        best = max(range(len(values)), key=values.__getitem__) if values else 0
        px = left + best / max(steps, 1) * plot_w
        py = top + plot_h * (1 - (values[best] if values else 0) / peak)
        out.append(f'<circle cx="{num(px)}" cy="{num(py)}" r="3" fill="{color}"/>')
        out.append(f'<text x="{num(min(px + 6, left + plot_w - 4))}" y="{num(py - 4 - 12 * k)}" '
                   f'class="lbl" text-anchor="{"end" if px > left + plot_w - 160 else "start"}"'
                   f'>{esc(name)}: peak {_mib(values[best] if values else 0)} at step {best}'
                   "</text>")
    out += [_axis_text(left, top + plot_h + 16, "step 0", "start"),
            _axis_text(left + plot_w, top + plot_h + 16, f"step {steps}", "end"),
            _axis_text(left + plot_w / 2, top + plot_h + 34, "execution order \u2192 "
                       "(y: arena bytes holding live tensors)", "middle")]
    out.append("</svg>")
    return "".join(out)


_PALETTE = ("#2f6db5", "#c26a00", "#2e8b57", "#8e44ad", "#b03a2e", "#5d6d7e")


def stage_color(stage: int) -> str:
    """The fill of pipeline stage ``stage`` (light, so box text stays readable)."""
    return _STAGE_FILLS[stage % len(_STAGE_FILLS)]


_STAGE_FILLS = ("#cfe0f5", "#ffe0b8", "#cdebd8", "#e6d5f0", "#f6d0cc", "#dfe4e8", "#fff1a8",
                "#d2f0ee")


def timeline_chart(stages: int, events: Sequence[tuple[int, int, str, float, float]], *,
                   title: str) -> str:
    """A pipeline's schedule: one row per stage, time to the right; each micro-batch's
    compute is a box in its own colour with its number written in, transfers of its inputs
    are grey boxes before it; idle time is the empty track (the bubble)."""
    left, top, row_h, plot_w = 70, 24, 26, WIDTH - 90
    span = max([e[4] for e in events] + [1e-9])
    sx = plot_w / span
    height = top + stages * (row_h + 6) + 44
    out = [_open(height, title)]
    for s in range(stages):
        y = top + s * (row_h + 6)
        out.append(f'<rect x="{left}" y="{y}" width="{plot_w}" height="{row_h}" '
                   'fill="#f7f8fa" stroke="#c9ced6"/>')
        out.append(_axis_text(left - 6, y + row_h / 2 + 4, f"stage {s}", "end"))
    for stage, mb, kind, start, end in events:
        x, w = left + start * sx, max((end - start) * sx, 0.8)
        y = top + stage * (row_h + 6)
        fill = "#9aa3ad" if kind == "transfer" else _PALETTE[mb % len(_PALETTE)]
        h = row_h if kind == "compute" else row_h / 2
        yy = y if kind == "compute" else y + row_h / 4
        out.append(f'<rect x="{num(x)}" y="{num(yy)}" width="{num(w)}" height="{num(h)}" '
                   f'fill="{fill}" stroke="#ffffff" stroke-width="0.5"><title>stage {stage}, '
                   f"micro-batch {mb}: {kind} {start:.1f}-{end:.1f} us</title></rect>")
        if kind == "compute" and w > 12:
            out.append(f'<text x="{num(x + w / 2)}" y="{num(y + row_h / 2 + 4)}" '
                       f'text-anchor="middle" class="tl">{mb}</text>')
    base = top + stages * (row_h + 6)
    out += [_axis_text(left, base + 12, "0 us", "start"),
            _axis_text(left + plot_w / 2, base + 12, f"{span / 2:.1f} us", "middle"),
            _axis_text(left + plot_w, base + 12, f"{span:.1f} us", "end"),
            _axis_text(left + plot_w / 2, base + 30, "estimated time \u2192 (numbers: "
                       "micro-batches; grey: receiving inputs; empty: idle)", "middle"),
            "</svg>"]
    return "".join(out)
