"""Assign the nodes of a schedule to streams so independent branches can run concurrently.

Invariants:
- The result has one stream id in ``range(count)`` per position of the order; with
  ``count == 1`` every node is on stream 0.
- Any assignment is *correct* (the runtime waits on an event for every cross-stream input and
  each stream runs its nodes in schedule order); this module only decides what is *useful*:
  a node continues the stream of its first producer that has not yet handed its stream on, so a
  chain stays on one stream, and at a fork the other branches start on the least loaded stream.
- Load is counted in output bytes, a cheap stand-in for work.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..errors import UsageError
from ..ir.graph import Graph

MAX_STREAMS = 64


def assign_streams(graph: Graph, order: Sequence[int], count: int,
                   sizes: Mapping[str, int] | None = None) -> tuple[int, ...]:
    """One stream per position of ``order``; ``sizes`` weighs the load (default 1 per node)."""
    if not 1 <= count <= MAX_STREAMS:
        raise UsageError(f"--streams must be between 1 and {MAX_STREAMS}, got {count}")
    if count == 1:
        return (0,) * len(order)
    sizes = sizes or {}
    where: dict[str, int] = {}  # tensor -> position of its producer
    handed: set[int] = set()  # positions whose stream a consumer already continued
    load = [0] * count
    streams: list[int] = []
    for pos, k in enumerate(order):
        node = graph.nodes[k]
        stream = _inherit(node.present_inputs(), where, handed, streams)
        if stream is None:
            stream = min(range(count), key=lambda s: (load[s], s))
        streams.append(stream)
        load[stream] += max(1, sum(sizes.get(o, 0) for o in node.outputs))
        for out in node.outputs:
            where[out] = pos
    return tuple(streams)


def _inherit(inputs: Sequence[str], where: Mapping[str, int], handed: set[int],
             streams: Sequence[int]) -> int | None:
    for name in inputs:
        pos = where.get(name)
        if pos is not None and pos not in handed:
            handed.add(pos)
            return streams[pos]
    return None
