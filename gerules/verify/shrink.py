"""Shrink a counterexample to the smallest instance and inputs that still fail.

The same idea as hypothesis's shrinking, applied to the failing case itself (a left-side
graph and one input): try simpler cases in a fixed order and keep each one that still fails
the same way, until no move helps or the budget is spent.

Moves, in order, repeated while one helps:

1. dims: every axis of one size ``d`` (across the graph's inputs and float constants) cut to
   1, ``d // 2`` or ``d - 1`` at once, so a dim that operands share stays shared; then one
   axis of one array at a time (a broadcast operand alone); then the leading axis of size 1
   of every array of the largest rank dropped (broadcasting stays as it was);
2. values: one float array (an input or a constant) made all zeros, all ones, positive,
   rounded to integers or to one decimal; then, for small arrays, one element at a time set to 0, 1
   or rounded.

Arrays held in a blocked data format (a layout rule's input or weight in NC1HWC0, FRACTAL_Z
...) are physical: their dims are never cut (their values are simplified like the others).

A candidate counts only when it is still a valid graph (shape inference accepts it; integer
constants such as Reshape targets are never changed, so a cut that breaks them is refused)
and ``fails`` says it fails as the original did.

Invariants:
- The result fails as the original did (it is the original when nothing smaller does).
- At most ``BUDGET`` candidates are tried; the result is a function of the input case.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

import numpy as np

from ..errors import GeError
from ..ir.formats import ND
from ..ir.graph import Graph, TensorType, Value
from ..ir.registry import Registry
from ..ir.verify import verify

BUDGET = 120  # candidates tried per counterexample
ELEMENTS = 16  # arrays up to this size are also simplified element by element


@dataclass(frozen=True)
class Case:
    """A left side and one input for it."""

    graph: Graph
    feeds: Mapping[str, np.ndarray]

    @property
    def size(self) -> int:
        arrays = [*self.feeds.values(), *self.graph.initializers.values()]
        return sum(int(np.asarray(a).size) for a in arrays)


Fails = Callable[[Case], bool]


def shrink(case: Case, fails: Fails, registry: Registry | None = None,
           budget: int = BUDGET, *, values: bool = True) -> tuple[Case, int]:
    """The smallest case found that still ``fails``, and how many moves were kept;
    ``values=False`` shrinks dims only (a failure of types, not of values)."""
    tries, kept = 0, 0
    progress = True
    while progress and tries < budget:
        progress = False
        for candidate in _moves(case, values):
            if tries >= budget:
                break
            rebuilt = _rebuild(candidate, registry)
            if rebuilt is None:
                continue
            tries += 1
            if fails(rebuilt):
                case, kept, progress = rebuilt, kept + 1, True
                break
    return case, kept


def _moves(case: Case, values: bool) -> Iterator[Case]:
    every = _float_arrays(case)
    arrays = {k: a for k, a in every.items() if k not in _held(case.graph)}  # dims: plain
    for d in sorted({d for a in arrays.values() for d in a.shape if d > 1}, reverse=True):
        for smaller in sorted({1, d // 2, d - 1}):
            yield _with(case, {k: _cut(a, d, smaller, None) for k, a in arrays.items()})
    for name, a in arrays.items():
        for axis, d in enumerate(a.shape):
            if d > 1:
                yield _with(case, {name: _cut(a, d, 1, axis)})
    top = max((a.ndim for a in arrays.values()), default=0)
    widest = {k: a for k, a in arrays.items() if a.ndim == top}
    if top >= 2 and all(a.shape[0] == 1 for a in widest.values()):
        yield _with(case, {k: a[0] for k, a in widest.items()})
    if not values:
        return
    arrays = every
    for name, a in arrays.items():
        for simpler in (np.zeros_like(a), np.ones_like(a), np.abs(a), np.round(a),
                        np.round(a, 1)):
            if not _same(simpler, a):
                yield _with(case, {name: simpler})
    for name, a in arrays.items():
        if a.size > ELEMENTS:
            continue
        for index in np.ndindex(a.shape):
            for value in (0.0, 1.0, float(np.round(a[index]))):
                if not _same(np.asarray(value, a.dtype), a[index]):
                    changed = a.copy()
                    changed[index] = value
                    yield _with(case, {name: changed})


def _float_arrays(case: Case) -> dict[str, np.ndarray]:
    arrays = {**case.graph.initializers, **case.feeds}
    return {k: np.asarray(a) for k, a in sorted(arrays.items())
            if np.asarray(a).dtype.kind == "f"}


def _held(graph: Graph) -> set[str]:
    """Inputs and weights held in a blocked format (their arrays are physical)."""
    return {*graph.held_weights(), *(v.name for v in graph.inputs if v.type.format != ND)}


def _cut(a: np.ndarray, d: int, smaller: int, axis: int | None) -> np.ndarray:
    """``a`` with its axes of size ``d`` (only ``axis`` if given) cut to ``smaller``."""
    index = tuple(slice(0, smaller) if n == d and axis in (None, k) else slice(None)
                  for k, n in enumerate(a.shape))
    return np.ascontiguousarray(a[index])


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return bool(np.array_equal(a, b, equal_nan=True))


def _with(case: Case, arrays: Mapping[str, np.ndarray]) -> Case:
    feeds = {k: arrays.get(k, v) for k, v in case.feeds.items()}
    inits = {k: arrays.get(k, v) for k, v in case.graph.initializers.items()}
    inputs = tuple(Value(v.name, TensorType(v.dtype, tuple(np.shape(feeds[v.name]))))
                   if v.name in feeds and v.type.format == ND else v
                   for v in case.graph.inputs)
    outputs = tuple(Value(v.name, TensorType(v.dtype, None)) for v in case.graph.outputs)
    graph = case.graph.replace(inputs=inputs, outputs=outputs, initializers=inits,
                               value_info=case.graph.held_weights())
    return Case(graph, feeds)


def _rebuild(case: Case, registry: Registry | None) -> Case | None:
    """``case`` with its shapes inferred, or ``None`` when it is not a valid graph (or a
    node outputs an empty tensor)."""
    try:
        graph = verify(case.graph, registry)
    except GeError:
        return None
    if any(0 in (v.type.shape or ()) for v in graph.value_info.values()):
        return None
    return Case(graph, case.feeds)
