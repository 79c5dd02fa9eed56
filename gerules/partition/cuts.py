"""Segment figures for every pair of cut points, and the exact dynamic program over them.

A *segment* ``[a, b)`` is the run of blocks ``a .. b-1`` of a topological order (a block is
one node, or a few neighbouring nodes when the order is too long to cut everywhere; see
``blocks_of``). Every matrix here is indexed ``[a, b]`` with ``0 <= a < b <= m`` for ``m``
blocks; cells with ``b <= a`` are meaningless and hold 0.

Invariants:
- ``needs`` is exact: a value is counted for ``[a, b)`` when a block of the segment reads it
  and no block of the segment (nor any later one) made it, i.e. its producer lies before
  ``a``. Values are counted once per segment, however many nodes of it read them. Each value
  adds one rectangle to a 2-D difference array, so building the matrix is
  ``O(m^2 + reads)``.
- ``peak_live`` is the most bytes of node outputs alive at one node of the segment when the
  segment runs alone in its order: an output is alive from its producer to its last reader
  anywhere (or to the segment's end when a later segment or the graph's outputs need it).
- ``best_cuts`` minimises the slowest segment first and the sum of all segments second, over
  all ways to cut ``m`` blocks into ``k`` non-empty segments: exact for the matrix it is
  given (two vectorised passes of ``O(k m^2)``). Infinite cells are forbidden segments.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

MAX_BLOCKS = 1024  # cut points considered; a longer order is cut every ceil(n / 1024) nodes


@dataclass(frozen=True, slots=True)
class Use:
    """A value a segment may need: its bytes, its producer's block (-1: from outside, e.g.
    a graph input or a weight) and the blocks that read it."""

    nbytes: int
    producer: int
    readers: tuple[int, ...]


def blocks_of(n: int, most: int = MAX_BLOCKS) -> list[int]:
    """Block start positions for ``n`` nodes: every node when ``n <= most``, else groups of
    ``ceil(n / most)`` neighbours (the cut points are then exact over that grid)."""
    step = max(1, -(-n // most))
    return list(range(0, n, step))


def needs(uses: Sequence[Use], m: int) -> np.ndarray:
    """``[a, b]``: bytes of the values segment ``[a, b)`` reads from before ``a``."""
    diff = np.zeros((m + 2, m + 2), dtype=np.int64)
    for u in uses:
        readers = sorted({r for r in u.readers if r > u.producer})
        lo = u.producer + 1
        for r in readers:  # rows a in [lo, r]: the first reader at or after a is r
            diff[lo, r + 1] += u.nbytes
            diff[r + 1, r + 1] -= u.nbytes
            lo = r + 1
    return np.cumsum(np.cumsum(diff, axis=0), axis=1)[:m + 1, :m + 1]


def peak_live(sizes: Sequence[int], producers: Sequence[int], lasts: Sequence[int],
              block_of: Sequence[int], m: int) -> np.ndarray:
    """``[a, b]``: the most bytes of node outputs alive at one node of ``[a, b)``.

    ``producers``/``lasts`` are node positions (``lasts`` inclusive; the order's length for a
    graph output); ``block_of`` maps a node position to its block.
    """
    n = len(block_of)
    if n == 0:
        return np.zeros((m + 1, m + 1), dtype=np.int64)
    alive = np.zeros(n + 1, dtype=np.int64)  # everything alive at each node position
    older = np.zeros((m + 2, n + 2), dtype=np.int64)  # made before block a, alive at t
    for size, p, last in zip(sizes, producers, lasts, strict=True):
        end = min(last, n - 1) + 1
        alive[p] += size
        alive[end] -= size
        older[block_of[p] + 1, p] += size
        older[block_of[p] + 1, end] -= size
    alive = np.cumsum(alive)[:n]
    older = np.cumsum(np.cumsum(older, axis=0), axis=1)[:m + 1, :n]
    own = alive[None, :] - older  # [a, t]: alive at t and made in a block >= a
    starts = np.flatnonzero(np.r_[True, np.diff(np.asarray(block_of)) != 0])
    per_block = np.maximum.reduceat(own, starts, axis=1)  # [a, block]
    mask = np.arange(m)[None, :] < np.arange(m + 1)[:, None]
    per_block = np.where(mask, 0, per_block)
    out = np.zeros((m + 1, m + 1), dtype=np.int64)
    out[:, 1:] = np.maximum.accumulate(per_block, axis=1)
    return out


def prefix_sums(values: Sequence[float] | np.ndarray) -> np.ndarray:
    """``[a, b]``: the sum of ``values[a:b]``."""
    c = np.concatenate([[0.0], np.cumsum(np.asarray(values, dtype=np.float64))])
    out: np.ndarray = c[None, :] - c[:, None]
    return out


def best_cuts(cost: np.ndarray, k: int) -> tuple[list[int], float] | None:
    """Cut points ``0 = c0 < c1 < ... < ck = m`` minimising the slowest segment, then the
    total; ``None`` when no cut into ``k`` allowed segments exists."""
    m = cost.shape[0] - 1
    if not 1 <= k <= m:
        return None
    valid = np.triu(np.ones_like(cost, dtype=bool), 1)
    c = np.where(valid, cost, np.inf)
    worst = _minimax(c, k)
    if not np.isfinite(worst):
        return None
    allowed = np.where(c <= worst * (1 + 1e-9) + 1e-12, c, np.inf)
    return _min_sum(allowed, k), float(worst)


def fewest_segments(cost: np.ndarray, most: int) -> int | None:
    """The fewest segments (at most ``most``) that cut ``[0, m)`` with only finite cells of
    ``cost`` (``None`` when none does): one ``O(m^2)`` pass per segment count."""
    m = cost.shape[0] - 1
    valid = np.triu(np.isfinite(cost), 1)
    reach = valid[0].copy()  # reach[j]: [0, j) can be cut into k segments
    for k in range(1, most + 1):
        if reach[m]:
            return k
        reach = np.any(reach[:, None] & valid, axis=0)
    return None


def _minimax(c: np.ndarray, k: int) -> float:
    """The smallest possible slowest segment over cuts of ``[0, m)`` into ``k`` segments."""
    best = c[0].copy()  # best[j]: cutting [0, j) into 1 segment
    for _ in range(k - 1):
        best = np.min(np.maximum(best[:, None], c), axis=0)
    return float(best[-1])


def _min_sum(c: np.ndarray, k: int) -> list[int]:
    """Cut points of the smallest total over ``k`` segments of finite cost in ``c``."""
    m = c.shape[0] - 1
    best = [c[0].copy()]
    came: list[np.ndarray] = []
    for _ in range(k - 1):
        total = best[-1][:, None] + c
        came.append(np.argmin(total, axis=0))
        best.append(np.min(total, axis=0))
    cuts, j = [m], m
    for step in reversed(came):
        j = int(step[j])
        cuts.append(j)
    cuts.append(0)
    return cuts[::-1]
