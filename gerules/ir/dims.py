"""Binding symbolic dims to sizes (one gear of a dynamic-shape model).

Invariant: ``bind_dims`` only rewrites the graph's input and output types; inferred types are
dropped (run ``verify`` for the bound graph's; the formats of weights held in one stay), nodes
and weights are shared.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..errors import ModelError
from .graph import Graph, TensorType, Value


def bind_dims(graph: Graph, dims: Mapping[str, int]) -> Graph:
    """The graph with symbolic input dims replaced by sizes; inferred types are dropped."""
    unknown = set(dims) - {d for v in graph.inputs for d in v.shape or () if isinstance(d, str)}
    if unknown:
        raise ModelError(f"no graph input has the dim(s) {', '.join(sorted(unknown))}")

    def fix(v: Value) -> Value:
        if v.shape is None:
            return v
        shape = tuple(dims.get(d, d) if isinstance(d, str) else d for d in v.shape)
        return Value(v.name, TensorType(v.dtype, shape, v.type.format))

    return graph.replace(inputs=tuple(fix(v) for v in graph.inputs),
                         outputs=tuple(fix(v) for v in graph.outputs),
                         value_info=graph.held_weights())


def symbol_sizes(declared: Sequence[Value], shapes: Mapping[str, Sequence[int]]
                 ) -> dict[str, int]:
    """Symbolic dim -> its size in ``shapes`` (input name -> shape; the first input that has
    the dim decides)."""
    out: dict[str, int] = {}
    for v in declared:
        for d, n in zip(v.shape or (), shapes.get(v.name, ()), strict=False):
            if isinstance(d, str):
                out.setdefault(d, int(n))
    return out
