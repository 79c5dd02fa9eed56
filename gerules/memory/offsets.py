"""Offset assignment: place blocks in one arena so that blocks alive together never overlap.

Two strategies, as GE runs two assigners and keeps the smaller arena:
- ``greedy_by_size``: largest block first, each into the smallest gap that fits between the
  blocks it clashes with (best fit), else on top of them (Pisarchyk & Lee, 2020; TFLite's
  "greedy by size").
- ``first_fit``: blocks in order of their first access, each at the lowest offset that fits.

Invariants: sizes are multiples of the alignment, so every offset is too; a block of size 0
gets offset 0 and clashes with nothing; ``clash(i, js)`` is symmetric and says, for each ``j``
in ``js``, whether blocks ``i`` and ``j`` are alive at the same time. The result never places
two clashing blocks on overlapping bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

Clash = Callable[[int, np.ndarray], np.ndarray]


def greedy_by_size(sizes: Sequence[int], clash: Clash) -> list[int]:
    """Offsets by decreasing size, best-fit gaps."""
    order = sorted(range(len(sizes)), key=lambda i: (-sizes[i], i))
    return _place(order, sizes, clash, _best_gap)


def first_fit(sizes: Sequence[int], firsts: Sequence[int], clash: Clash) -> list[int]:
    """Offsets in order of first access, first-fit gaps."""
    order = sorted(range(len(sizes)), key=lambda i: (firsts[i], -sizes[i], i))
    return _place(order, sizes, clash, _first_gap)


def arena_size(sizes: Sequence[int], offsets: Sequence[int]) -> int:
    return max((o + s for o, s in zip(offsets, sizes, strict=True)), default=0)


def _place(order: Sequence[int], sizes: Sequence[int], clash: Clash,
           gap: Callable[[list[tuple[int, int]], int], int]) -> list[int]:
    offsets = [0] * len(sizes)
    placed = np.empty(len(sizes), dtype=np.int64)
    count = 0
    for i in order:
        if sizes[i] == 0:
            continue
        others = placed[:count]
        busy = others[clash(i, others)] if count else others
        blocks = sorted((offsets[j], offsets[j] + sizes[j]) for j in busy.tolist())
        offsets[i] = gap(blocks, sizes[i])
        placed[count] = i
        count += 1
    return offsets


def _best_gap(blocks: list[tuple[int, int]], size: int) -> int:
    """The start of the smallest free gap of at least ``size`` below the top, else the top."""
    best, best_gap, top = -1, -1, 0
    for lo, hi in blocks:
        gap = lo - top
        if gap >= size and (best < 0 or gap < best_gap):
            best, best_gap = top, gap
        top = max(top, hi)
    return top if best < 0 else best


def _first_gap(blocks: list[tuple[int, int]], size: int) -> int:
    top = 0
    for lo, hi in blocks:
        if lo - top >= size:
            return top
        top = max(top, hi)
    return top
