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

from collections.abc import Mapping, Sequence

from ..ir.graph import Graph


def memory_aware_order(graph: Graph, sizes: Mapping[str, int]) -> tuple[int, ...]:
    """A topological order of ``graph.nodes`` that keeps the live bytes low."""
    producer = {o: k for k, n in enumerate(graph.nodes) for o in n.outputs}
    keep = set(graph.output_names)
    inputs = [tuple(dict.fromkeys(i for i in n.present_inputs() if i in producer))
              for n in graph.nodes]
    remaining: dict[str, int] = {}
    readers: dict[str, list[int]] = {}
    for k, names in enumerate(inputs):
        for name in names:
            remaining[name] = remaining.get(name, 0) + 1
            readers.setdefault(name, []).append(k)
    pending = [len(names) for names in inputs]
    alloc = [sum(sizes.get(o, 0) for o in n.outputs) for n in graph.nodes]

    def key(c: int) -> tuple[int, int, int]:
        freed = sum(sizes.get(n, 0) for n in inputs[c] if remaining[n] == 1 and n not in keep)
        return alloc[c] - freed, -_completes(graph.nodes[c].outputs, readers, inputs, pending), c

    ready = {k for k, p in enumerate(pending) if p == 0}
    order: list[int] = []
    while ready:
        k = min(ready, key=key)
        ready.remove(k)
        order.append(k)
        for name in inputs[k]:
            remaining[name] -= 1
        for out in graph.nodes[k].outputs:
            for r in readers.get(out, ()):
                pending[r] -= 1
                if pending[r] == 0:
                    ready.add(r)
    return tuple(order)


def _completes(outputs: Sequence[str], readers: Mapping[str, list[int]],
               inputs: Sequence[tuple[str, ...]], pending: Sequence[int]) -> int:
    """How many readers of ``outputs`` would become ready: they wait for nothing else."""
    mine = set(outputs)
    found = {r for o in outputs for r in readers.get(o, ())}
    return sum(1 for r in found if pending[r] == sum(1 for i in inputs[r] if i in mine))
