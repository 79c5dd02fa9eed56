"""Hypothesis strategies for property-based tests of graphs and rules (needs ``hypothesis``).

- ``dtypes()``: element type names (``"float32"``...).
- ``shapes()``: tuples of dims, optionally with symbolic dims (``"N"``).
- ``broadcastable_shapes()``: pairs of shapes that broadcast against each other.
- ``tensors()``: NumPy arrays, finite by default, NaN/Inf on request.
- ``graphs()``: random verified graphs built from the op registry (see ``graphgen``).
- ``feeds(graph)``: inputs for a graph; ``graphs_with_feeds()``: both at once.

Invariants:
- Every strategy shrinks toward small, simple examples: rank 0/1, sides of 1, few nodes,
  the first op generator (``Relu``), most recent operands.
- Values drawn by ``tensors`` lie in ``[min_value, max_value]`` unless NaN/Inf are allowed.
- ``graphs()`` only yields graphs that pass ``verify``; its draws replay exactly.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from ..ir.dtypes import FLOATS, INTS
from ..ir.graph import Dim, Graph, Shape
from .graphgen import DEFAULT_OPSET, GraphOptions, build_graph

SYMBOLS = ("N", "M", "L")


class DrawChooser:
    """A ``graphgen.Chooser`` that asks hypothesis, so graphs shrink and replay."""

    def __init__(self, draw: st.DrawFn) -> None:
        self.draw = draw

    def integer(self, lo: int, hi: int) -> int:
        return self.draw(st.integers(lo, hi))

    def seed(self) -> int:
        return self.draw(st.integers(0, 2**32 - 1))


def dtypes(*, floats: bool = True, ints: bool = False, bools: bool = False
           ) -> st.SearchStrategy[str]:
    """Dtype names; ``float32`` first (what examples shrink to)."""
    names: list[str] = []
    if floats:
        names += ["float32", *sorted(FLOATS - {"float32"})]
    if ints:
        names += ["int64", *sorted(INTS - {"int64"})]
    if bools:
        names.append("bool")
    if not names:
        raise ValueError("dtypes(): allow at least one kind")
    return st.sampled_from(names)


def _dim(min_side: int, max_side: int, symbols: Sequence[str]) -> st.SearchStrategy[Dim]:
    sizes: st.SearchStrategy[Dim] = st.integers(min_side, max_side)
    return st.one_of(sizes, st.sampled_from(list(symbols))) if symbols else sizes


def _symbols(symbolic: bool | Sequence[str]) -> tuple[str, ...]:
    if symbolic is True:
        return SYMBOLS[:1]
    return tuple(symbolic) if symbolic else ()


def shapes(*, min_rank: int = 0, max_rank: int = 4, min_side: int = 1, max_side: int = 5,
           symbolic: bool | Sequence[str] = False) -> st.SearchStrategy[Shape]:
    """Shapes of rank ``min_rank..max_rank``; ``symbolic=True`` mixes in the dim ``"N"``
    (or pass the symbol names to use)."""
    dim = _dim(min_side, max_side, _symbols(symbolic))
    return st.lists(dim, min_size=min_rank, max_size=max_rank).map(tuple)


@st.composite
def broadcastable_shapes(draw: st.DrawFn, *, min_rank: int = 0, max_rank: int = 4,
                         max_side: int = 5, symbolic: bool | Sequence[str] = False
                         ) -> tuple[Shape, Shape]:
    """Two shapes that broadcast: aligned from the right, each dim pair equal or one is 1;
    the shorter may drop leading dims. A symbolic dim only ever meets itself or 1."""
    full = draw(shapes(min_rank=min_rank, max_rank=max_rank, max_side=max_side,
                       symbolic=symbolic))
    a, b = list(full), list(full)
    for i in range(len(full)):
        which = draw(st.integers(0, 2))  # 0: both keep it, 1: a has 1, 2: b has 1
        if which == 1:
            a[i] = 1
        elif which == 2:
            b[i] = 1
    drop = draw(st.integers(0, len(full)))
    if draw(st.booleans()):
        a = a[drop:]
    else:
        b = b[drop:]
    return tuple(a), tuple(b)


def _elements(dtype: str, min_value: float, max_value: float, allow_nan: bool,
              allow_infinity: bool) -> st.SearchStrategy[Any]:
    kind = np.dtype(dtype).kind
    if kind == "b":
        return st.booleans()
    if kind in "iu":
        info = np.iinfo(dtype)
        return st.integers(max(int(min_value), int(info.min)), min(int(max_value), int(info.max)))
    width: Literal[16, 32, 64] = {2: 16, 4: 32}.get(np.dtype(dtype).itemsize, 64)  # type: ignore
    finite = st.floats(min_value, max_value, width=width, allow_subnormal=False)
    specials = [np.nan] * allow_nan + [np.inf, -np.inf] * allow_infinity
    return st.one_of(finite, st.sampled_from(specials)) if specials else finite


def tensors(dtype: str | st.SearchStrategy[str] = "float32",
            shape: Shape | st.SearchStrategy[Shape] | None = None, *,
            min_value: float = -10.0, max_value: float = 10.0, allow_nan: bool = False,
            allow_infinity: bool = False, dims: dict[str, int] | None = None
            ) -> st.SearchStrategy[np.ndarray]:
    """Arrays of ``dtype`` and ``shape`` (default: any ``shapes()``). Symbolic dims in
    ``shape`` take their size from ``dims`` (1 when missing)."""

    @st.composite
    def build(draw: st.DrawFn) -> np.ndarray:
        dt = draw(dtype) if isinstance(dtype, st.SearchStrategy) else dtype
        sh = draw(shape) if isinstance(shape, st.SearchStrategy) else shape
        sh = draw(shapes()) if sh is None else sh
        static = tuple(d if isinstance(d, int) else (dims or {}).get(d, 1) for d in sh)
        elements = _elements(dt, min_value, max_value, allow_nan, allow_infinity)
        return draw(hnp.arrays(np.dtype(dt), static, elements=elements))

    return build()


def graphs(*, max_nodes: int = 8, min_nodes: int = 1, ops: Sequence[str] | None = None,
           dtype: str = "float32", symbolic: bool = False, max_inputs: int = 2,
           max_outputs: int = 3, max_side: int = 5, opset: int = DEFAULT_OPSET
           ) -> st.SearchStrategy[Graph]:
    """Random verified graphs: DAGs of ``min_nodes..max_nodes`` generator steps over the op
    table ``gerules.testing.opgen.GENERATORS`` (``ops`` restricts it by name), with shared
    tensors, duplicated subterms, initializers and up to ``max_outputs`` outputs."""
    options = GraphOptions(max_nodes=max_nodes, min_nodes=min_nodes,
                           ops=None if ops is None else tuple(ops), dtype=dtype,
                           symbolic=symbolic, max_inputs=max_inputs, max_outputs=max_outputs,
                           max_side=max_side, opset=opset)

    @st.composite
    def build(draw: st.DrawFn) -> Graph:
        return build_graph(DrawChooser(draw), options)

    return build()


def motif_graphs(**overrides: Any) -> st.SearchStrategy[Graph]:
    """Random graphs of the motifs the rule library fuses (``motifs.motif_options``): conv
    blocks, linear (+ GELU) layers, LayerNorm and attention subgraphs, residual adds and
    Reshape/Transpose chains over 3-D and 4-D inputs, so most draws give fusions."""
    from .motifs import motif_options

    options = motif_options(**overrides)

    @st.composite
    def build(draw: st.DrawFn) -> Graph:
        return build_graph(DrawChooser(draw), options)

    return build()


def feeds(graph: Graph, *, min_value: float = -3.0, max_value: float = 3.0,
          allow_nan: bool = False, allow_infinity: bool = False, max_dim: int = 4
          ) -> st.SearchStrategy[dict[str, np.ndarray]]:
    """Inputs for ``graph`` (those without an initializer default); every symbolic dim gets
    one size in ``1..max_dim`` shared by all inputs."""

    @st.composite
    def build(draw: st.DrawFn) -> dict[str, np.ndarray]:
        symbols = sorted({d for v in graph.inputs for d in v.shape or () if isinstance(d, str)})
        dims = {s: draw(st.integers(1, max_dim)) for s in symbols}
        out = {}
        for v in graph.inputs:
            if v.name not in graph.initializers:
                out[v.name] = draw(tensors(v.dtype, v.shape or (), min_value=min_value,
                                           max_value=max_value, allow_nan=allow_nan,
                                           allow_infinity=allow_infinity, dims=dims))
        return out

    return build()


def graphs_with_feeds(**options: Any) -> st.SearchStrategy[tuple[Graph, dict[str, np.ndarray]]]:
    """A graph from ``graphs(**options)`` and inputs for it from ``feeds``."""
    return graphs(**options).flatmap(lambda g: st.tuples(st.just(g), feeds(g)))
