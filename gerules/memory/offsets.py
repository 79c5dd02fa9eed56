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
           gap: Callable[[np.ndarray, np.ndarray, int], int]) -> list[int]:
    offsets = [0] * len(sizes)
    placed = np.empty(len(sizes), dtype=np.int64)
    starts = np.zeros(len(sizes), dtype=np.int64)
    ends = np.zeros(len(sizes), dtype=np.int64)
    count = 0
    for i in order:
        if sizes[i] == 0:
            continue
        others = placed[:count]
        busy = others[clash(i, others)] if count else others
        lo, hi = starts[busy], ends[busy]
        by_start = np.lexsort((hi, lo))  # the blocks in address order
        offsets[i] = gap(lo[by_start], hi[by_start], sizes[i])
        starts[i], ends[i] = offsets[i], offsets[i] + sizes[i]
        placed[count] = i
        count += 1
    return offsets


def _gaps(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """For blocks in address order: the top of everything below each block, the free gap
    under each block, and the overall top (NumPy, so many live blocks stay fast)."""
    below = np.zeros(len(lo), dtype=np.int64)
    if len(lo) > 1:
        below[1:] = np.maximum.accumulate(hi[:-1])
    top = int(hi.max()) if len(hi) else 0
    return below, lo - below, top


def _best_gap(lo: np.ndarray, hi: np.ndarray, size: int) -> int:
    """The start of the smallest free gap of at least ``size`` below the top, else the top."""
    below, gaps, top = _gaps(lo, hi)
    fits = gaps >= size
    if not fits.any():
        return top
    k = int(np.argmin(np.where(fits, gaps, np.iinfo(np.int64).max)))  # the first smallest
    return int(below[k])


def _first_gap(lo: np.ndarray, hi: np.ndarray, size: int) -> int:
    below, gaps, top = _gaps(lo, hi)
    fits = np.flatnonzero(gaps >= size)
    return int(below[fits[0]]) if len(fits) else top
