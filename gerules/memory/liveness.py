"""Tensor lifetimes over a node order, and the alias edges a plan may use.

Invariants:
- Only node outputs live in the arena. Graph inputs belong to the caller and weights to the
  ``.om`` file's memory map; both are read in place and never written, so neither has a block
  and neither is ever an alias source.
- Positions index the execution order ``0..n-1``; ``END == n`` stands for the copy-out of the
  graph outputs after the last node, so every graph output is accessed at ``END``.
- A tensor's accesses are its producer's position, every reader's position and ``END`` for a
  graph output, sorted and unique; ``size`` is its byte size rounded up to the alignment.
- Planning needs static shapes: a node output whose type is unknown or symbolic raises
  ``ModelError`` naming the tensor (fix the shapes first: the compile step does).
- Alias edges: output 0 of a view op (Reshape, Flatten, Squeeze, Unsqueeze, Identity: the same
  bytes in the same order) may share input 0's block; output 0 of an ``INPLACE`` op may
  overwrite input 0 (or input 1 when the op is also ``COMMUTATIVE``) of the same byte size.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from ..errors import ModelError
from ..ir.graph import Graph, Node
from ..ir.infer import schema_for
from ..ir.registry import COMMUTATIVE, INPLACE, Registry

ALIGNMENT = 64
VIEW_OPS = frozenset({"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"})
AliasKind = Literal["view", "inplace"]


def align(nbytes: int, alignment: int = ALIGNMENT) -> int:
    """``nbytes`` rounded up to a multiple of ``alignment``."""
    return -(-nbytes // alignment) * alignment


@dataclass(frozen=True, slots=True)
class Live:
    """One arena tensor: its size and when it is touched."""

    name: str
    nbytes: int
    size: int  # nbytes rounded up to the alignment
    first: int  # the producer's position
    accesses: tuple[int, ...]  # sorted unique positions; END for graph outputs

    @property
    def last(self) -> int:
        return self.accesses[-1]


@dataclass(frozen=True, slots=True)
class Liveness:
    """The arena tensors of a graph in one execution order."""

    order: tuple[int, ...]  # node indices of ``graph.nodes`` in execution order
    tensors: tuple[Live, ...]  # in production order
    index: Mapping[str, int]  # tensor name -> position in ``tensors``

    @property
    def end(self) -> int:
        return len(self.order)

    def __getitem__(self, name: str) -> Live:
        return self.tensors[self.index[name]]


def static_nbytes(graph: Graph, name: str) -> int:
    """Byte size of a tensor whose type must be known and static."""
    t = graph.type_of(name)
    if t is None or t.shape is None:
        raise ModelError("memory planning needs the shape of every tensor, this one has none "
                         "(run shape inference first)", tensor=name)
    size = t.nbytes()
    if size is None:
        raise ModelError(f"memory planning needs static shapes, but the type is {t} (fix the "
                         "input shapes, e.g. --input_shape)", tensor=name)
    return size


def analyze(graph: Graph, order: Sequence[int], alignment: int = ALIGNMENT) -> Liveness:
    """Lifetimes of every node output when ``graph.nodes`` run in ``order``."""
    produced: dict[str, int] = {}
    accesses: dict[str, set[int]] = {}
    for pos, k in enumerate(order):
        node = graph.nodes[k]
        for name in node.present_inputs():
            if name in accesses:
                accesses[name].add(pos)
        for name in node.outputs:
            produced[name] = pos
            accesses[name] = {pos}
    for name in graph.output_names:
        if name in accesses:
            accesses[name].add(len(order))
    tensors = []
    for name, pos in produced.items():
        nbytes = static_nbytes(graph, name)
        tensors.append(Live(name, nbytes, align(nbytes, alignment), pos,
                            tuple(sorted(accesses[name]))))
    return Liveness(tuple(order), tuple(tensors), {t.name: i for i, t in enumerate(tensors)})


def alias_sources(node: Node, graph: Graph, registry: Registry
                  ) -> tuple[tuple[int, AliasKind], ...]:
    """Input slots whose block output 0 may take, in order of preference."""
    if not node.domain and node.op in VIEW_OPS:
        return ((0, "view"),)
    schema = schema_for(node, graph, registry)
    if not schema.has(INPLACE):
        return ()
    if schema.has(COMMUTATIVE) and len(node.inputs) > 1:
        return ((0, "inplace"), (1, "inplace"))
    return ((0, "inplace"),)
