"""A layered drawing of a graph (Sugiyama style), and blocks for graphs too large to draw.

Invariants:
- Pure functions of node lists: ``layered(preds)`` gives each node a layer (its longest path
  from an input) and a position in its layer (barycenter sweeps that reduce crossings, ties
  kept in graph order), so the same graph always gets the same picture.
- ``blocks(names, most)`` groups nodes by the longest common name prefix (``/`` or ``.``
  separated, as exporters name them: ``/layers.3/attn/MatMul``) that gives at most ``most``
  groups; a graph small enough is returned one node per block.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

SWEEPS = 4
_SEP = re.compile(r"[/.]")


@dataclass(frozen=True, slots=True)
class Placed:
    layer: int
    slot: int  # position inside its layer


def layered(preds: Sequence[Sequence[int]]) -> list[Placed]:
    """Layer and slot per node; ``preds[k]`` are the (earlier) nodes node ``k`` reads."""
    layer: list[int] = []
    for k, ps in enumerate(preds):
        layer.append(1 + max((layer[p] for p in ps if p < k), default=-1))
    rows: dict[int, list[int]] = {}
    for k, lay in enumerate(layer):
        rows.setdefault(lay, []).append(k)
    succs: list[list[int]] = [[] for _ in preds]
    for k, ps in enumerate(preds):
        for p in ps:
            if p < k:
                succs[p].append(k)
    slot = {k: i for row in rows.values() for i, k in enumerate(row)}
    for sweep in range(SWEEPS):
        down = sweep % 2 == 0
        for lay in sorted(rows, reverse=not down):
            near = preds if down else succs
            row = rows[lay]
            key = {k: _barycenter(near[k], slot, slot[k]) for k in row}
            row.sort(key=lambda k: (key[k], slot[k]))
            for i, k in enumerate(row):
                slot[k] = i
    return [Placed(layer[k], slot[k]) for k in range(len(preds))]


def _barycenter(near: Sequence[int], slot: dict[int, int], own: int) -> float:
    return sum(slot[n] for n in near) / len(near) if near else float(own)


def blocks(names: Sequence[str], most: int) -> list[str]:
    """A block name per node: the shortest name prefix depth that keeps at most ``most``
    blocks but still splits the graph (names without a separator are their own block)."""
    if len(names) <= most:
        return list(names)
    parts = [[p for p in _SEP.split(n) if p] for n in names]
    best = ["graph"] * len(names)
    for depth in range(1, max((len(p) for p in parts), default=1) + 1):
        groups = ["/".join(p[:depth]) if len(p) > depth else "/".join(p[:-1]) or n
                  for p, n in zip(parts, names, strict=True)]
        if len(set(groups)) > most:
            break
        best = groups
    return best
