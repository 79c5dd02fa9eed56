"""Happens-before between positions of a schedule, and who may share memory with whom.

Invariants:
- With one stream, position ``a`` happens before ``b`` exactly when ``a < b`` (``Linear``).
- With several streams (``StreamOrder``), ``a`` happens before ``b`` when a path of edges
  leads from ``a`` to ``b``; the edges are data dependencies (producer -> reader) and program
  order on each stream (one position -> the next on the same stream). The runtime enforces
  both (threads run their stream in order; events cover cross-stream reads), so whatever this
  relation orders is ordered at run time. ``END`` (the copy-out) comes after everything.
- Two entities (tensors or blocks) are *ordered* when every access of one happens before the
  first access (the producer) of the other; only ordered entities may share memory, unless
  they are aliases that the plan verifier accepts.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..ir.graph import Graph


class StreamOrder:
    """The happens-before relation of a multi-stream schedule, as a reachability matrix."""

    def __init__(self, graph: Graph, order: Sequence[int], streams: Sequence[int]) -> None:
        n = len(order)
        self.end = n
        # anc[b, a]: position a happens strictly before position b (row END: everything).
        self.anc = np.zeros((n + 1, n + 1), dtype=bool)
        for pos, preds in enumerate(stream_preds(graph, order, streams)):
            for p in preds:
                self.anc[pos] |= self.anc[p]
                self.anc[pos, p] = True
        self.anc[n, :n] = True

    def before(self, a: int, b: int) -> bool:
        return bool(self.anc[b, a])


def stream_preds(graph: Graph, order: Sequence[int], streams: Sequence[int]
                 ) -> list[tuple[int, ...]]:
    """Per position: its data producers and the previous position on its stream."""
    where: dict[str, int] = {}
    last_on: dict[int, int] = {}
    preds: list[tuple[int, ...]] = []
    for pos, k in enumerate(order):
        node = graph.nodes[k]
        mine = {where[i] for i in node.present_inputs() if i in where}
        if streams[pos] in last_on:
            mine.add(last_on[streams[pos]])
        preds.append(tuple(sorted(mine)))
        last_on[streams[pos]] = pos
        for out in node.outputs:
            where[out] = pos
    return preds


class Timeline:
    """Entities (each a first access and a set of accesses) and their ordering.

    ``hb is None`` means one stream: an entity is summarised by its last access. With streams,
    ``after[i, p]`` says that every access of entity ``i`` happens before position ``p``, so
    ordering two entities is two lookups.
    """

    def __init__(self, firsts: Sequence[int], accesses: Sequence[Sequence[int]],
                 hb: StreamOrder | None = None) -> None:
        self.first = np.asarray(firsts, dtype=np.int64)
        self.last = np.asarray([max(a) for a in accesses], dtype=np.int64)
        self.hb = hb
        self.accesses = [tuple(a) for a in accesses]
        if hb is not None:
            descendants = hb.anc.T  # row a: the positions that a happens before
            self.after = np.stack([np.logical_and.reduce(descendants[list(a)], axis=0)
                                   for a in accesses]) if accesses else np.zeros(
                (0, hb.end + 1), dtype=bool)

    def ordered(self, i: int, js: np.ndarray) -> np.ndarray:
        """For each ``j`` in ``js``: are ``i`` and ``j`` ordered (one done before the other)?"""
        if self.hb is None:
            out: np.ndarray = (self.last[i] < self.first[js]) | (self.last[js] < self.first[i])
            return out
        both: np.ndarray = self.after[i, self.first[js]] | self.after[js, self.first[i]]
        return both

    def done_by(self, i: int, pos: int, *, inclusive: bool = False) -> bool:
        """Does every access of ``i`` happen before ``pos`` (or at ``pos`` when inclusive)?"""
        if self.hb is None:
            return bool(self.last[i] < pos or (inclusive and self.last[i] <= pos))
        anc = self.hb.anc[pos]
        return all(anc[a] or (inclusive and a == pos) for a in self.accesses[i])
