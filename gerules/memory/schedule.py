"""A memory-aware node order: a greedy list scheduler that prefers nodes freeing the most bytes.

Invariants:
- The result is a permutation of ``range(len(graph.nodes))`` in which every node comes after
  the producers of its inputs (a topological order), whatever the sizes.
- Among the ready nodes it picks the one with the smallest ``allocated - freed`` bytes (outputs
  it creates minus inputs whose last reader it is; graph outputs are never freed); among equals,
  the one that makes the most readers ready (it completes work already started, so its inputs
  can die soon), then the node's position in the graph.
- It is a heuristic: the planner compares the arena it gives against the file order's and keeps
  the smaller, so it can only help.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..ir.graph import Graph


def memory_aware_order(graph: Graph, sizes: Mapping[str, int]) -> tuple[int, ...]:
    """A topological order of ``graph.nodes`` that keeps the live bytes low."""
    return _Scheduler(graph, sizes).run()


class _Scheduler:
    """List scheduling with cached keys; a key is recomputed only when its inputs change."""

    def __init__(self, graph: Graph, sizes: Mapping[str, int]) -> None:
        self.graph, self.sizes = graph, sizes
        self.producer = {o: k for k, n in enumerate(graph.nodes) for o in n.outputs}
        self.keep = set(graph.output_names)
        self.inputs = [tuple(dict.fromkeys(i for i in n.present_inputs() if i in self.producer))
                       for n in graph.nodes]
        self.remaining: dict[str, int] = {}
        self.readers: dict[str, list[int]] = {}
        for k, names in enumerate(self.inputs):
            for name in names:
                self.remaining[name] = self.remaining.get(name, 0) + 1
                self.readers.setdefault(name, []).append(k)
        self.pending = [len(names) for names in self.inputs]
        self.alloc = [sum(sizes.get(o, 0) for o in n.outputs) for n in graph.nodes]

    def key(self, c: int) -> tuple[int, int, int]:
        freed = sum(self.sizes.get(n, 0) for n in self.inputs[c]
                    if self.remaining[n] == 1 and n not in self.keep)
        return self.alloc[c] - freed, -self._completes(c), c

    def _completes(self, c: int) -> int:
        """How many readers of c's outputs would become ready: they wait for nothing else."""
        mine = set(self.graph.nodes[c].outputs)
        found = {r for o in mine for r in self.readers.get(o, ())}
        return sum(1 for r in found
                   if self.pending[r] == sum(1 for i in self.inputs[r] if i in mine))

    def run(self) -> tuple[int, ...]:
        ready = {k: self.key(k) for k, p in enumerate(self.pending) if p == 0}
        order: list[int] = []
        while ready:
            k = min(ready, key=ready.__getitem__)
            del ready[k]
            order.append(k)
            for r in self._step(k):
                ready[r] = self.key(r)
            for r in self._touched(k, ready):
                ready[r] = self.key(r)
        return tuple(order)

    def _step(self, k: int) -> list[int]:
        """Account for running ``k``; returns the nodes that became ready."""
        for name in self.inputs[k]:
            self.remaining[name] -= 1
        now: list[int] = []
        for out in self.graph.nodes[k].outputs:
            for r in self.readers.get(out, ()):
                self.pending[r] -= 1
                if self.pending[r] == 0:
                    now.append(r)
        return now

    def _touched(self, k: int, ready: Mapping[int, object]) -> set[int]:
        """Ready nodes whose key may have changed by running ``k``."""
        hit = {r for name in self.inputs[k] for r in self.readers.get(name, ()) if r in ready}
        for out in self.graph.nodes[k].outputs:
            for r in self.readers.get(out, ()):
                hit.update(self.producer[i] for i in self.inputs[r]
                           if self.producer[i] in ready)
        return hit
