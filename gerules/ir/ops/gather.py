"""Indexing ops (ai.onnx): Gather, GatherElements, GatherND, ScatterND, ScatterElements,
NonZero, OneHot.

Invariants:
- Negative indices count from the end of their axis; an index outside ``[-n, n)`` raises
  ``KernelError`` naming the op (never wraps silently).
- Scatter kernels copy ``data`` and write ``updates`` in index order (``reduction`` none,
  add, mul, max, min); duplicate indices with ``none`` keep the last write, as NumPy does.
- Gather and Concat of small int64 vectors are shape arithmetic: ``unit_of`` reports them as
  "scalar" work so the cost model charges the AI CPU, not the vector unit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...errors import KernelError, ShapeError
from ..graph import TensorType
from ..registry import SHAPE_OP, Call
from ._common import (
    UNKNOWN,
    Arrays,
    Types,
    at,
    attr,
    fill,
    fmt,
    iattr,
    need,
    norm_axis,
    numel_of,
    sattr,
    schema,
    shape_math_unit,
)

MOVE = {SHAPE_OP}
REDUCTIONS = {"none": None, "add": np.add, "mul": np.multiply, "max": np.maximum,
              "min": np.minimum}


def fix_indices(idx: np.ndarray, n: int | np.ndarray, op: str) -> np.ndarray:
    """Indices in ``[-n, n)`` mapped to ``[0, n)``; anything else raises."""
    idx = idx.astype(np.int64, copy=False)
    if idx.size and (np.any(idx < -n) or np.any(idx >= n)):
        bad = idx[(idx < -n) | (idx >= n)].reshape(-1)[0]
        raise KernelError(f"{op}: index {int(bad)} is out of range for size {n}")
    return np.where(idx < 0, idx + n, idx)


# ----------------------------------------------------------------------------- Gather


def _gather_infer(types: Types, _c: object, call: Call) -> list[TensorType]:
    x, i = need(at(types, 0), "Gather"), need(at(types, 1), "Gather", "indices")
    if x.shape is None or i.shape is None:
        return [TensorType(x.dtype, None)]
    if not x.shape:
        raise ShapeError("Gather: data must have rank >= 1")
    a = norm_axis(iattr(call, "axis"), len(x.shape))
    return [TensorType(x.dtype, x.shape[:a] + i.shape + x.shape[a + 1:])]


def _gather_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    x, i = need(at(inputs, 0), "Gather"), need(at(inputs, 1), "Gather", "indices")
    a = norm_axis(iattr(call, "axis"), x.ndim)
    return [x[(slice(None),) * a + (fix_indices(i, x.shape[a], "Gather"),)]]


def _gather_out(inputs: Arrays, call: Call, outs: Sequence[np.ndarray]) -> None:
    """Gather into ``outs[0]``: ``np.take`` reads the data operand in place when it is
    aligned (when it is not, as a weight read from an odd offset of a model file, NumPy
    would copy the whole table first, so the rows are indexed out instead)."""
    x, i = need(at(inputs, 0), "Gather"), need(at(inputs, 1), "Gather", "indices")
    a = norm_axis(iattr(call, "axis"), x.ndim)
    idx = fix_indices(i, x.shape[a], "Gather")
    if x.flags.aligned and x.flags.c_contiguous:
        np.take(x, idx, axis=a, out=outs[0])
    else:
        fill(outs, [x[(slice(None),) * a + (idx,)]], "Gather")


def _gel_infer(types: Types, _c: object, call: Call) -> list[TensorType]:
    x, i = need(at(types, 0), "GatherElements"), need(at(types, 1), "GatherElements", "indices")
    if x.shape is not None and i.shape is not None and len(x.shape) != len(i.shape):
        raise ShapeError(f"GatherElements: data {fmt(x.shape)} and indices {fmt(i.shape)} "
                         "ranks differ")
    return [TensorType(x.dtype, i.shape)]


def _gel_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    x, i = need(at(inputs, 0), "GatherElements"), need(at(inputs, 1), "GatherElements")
    a = norm_axis(iattr(call, "axis"), x.ndim)
    return [np.take_along_axis(x, fix_indices(i, x.shape[a], "GatherElements"), axis=a)]


# ----------------------------------------------------------------------------- GatherND


def _gnd_infer(types: Types, _c: object, call: Call) -> list[TensorType]:
    x, i = need(at(types, 0), "GatherND"), need(at(types, 1), "GatherND", "indices")
    b = iattr(call, "batch_dims")
    if x.shape is None or i.shape is None or not i.shape:
        return [TensorType(x.dtype, None)]
    k = i.shape[-1]
    if not isinstance(k, int):
        return [TensorType(x.dtype, None)]
    if b + k > len(x.shape):
        raise ShapeError(f"GatherND: index depth {k} + batch_dims {b} exceeds data rank "
                         f"{len(x.shape)}")
    return [TensorType(x.dtype, i.shape[:-1] + x.shape[b + k:])]


def _batch_index(x: np.ndarray, idx: np.ndarray, b: int) -> tuple[np.ndarray, ...]:
    """Advanced-index tuple for GatherND/ScatterND on ``x`` viewed as ``[B, ...]``."""
    k = idx.shape[-1]
    flat = idx.reshape(int(np.prod(idx.shape[:b], dtype=np.int64)), -1, k)
    limits = np.array(x.shape[b:b + k], dtype=np.int64)
    flat = fix_indices(flat, limits, "GatherND")
    batch = np.arange(flat.shape[0])[:, None]
    return (batch, *[flat[..., j] for j in range(k)])


def _gnd_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    x, i = need(at(inputs, 0), "GatherND"), need(at(inputs, 1), "GatherND", "indices")
    b = iattr(call, "batch_dims")
    xb = x.reshape(int(np.prod(x.shape[:b], dtype=np.int64)), *x.shape[b:])
    out = xb[_batch_index(x, i, b)]
    return [out.reshape(*i.shape[:-1], *x.shape[b + i.shape[-1]:])]


# ----------------------------------------------------------------------------- Scatter


def _scatter_infer(types: Types, _c: object, call: Call) -> list[TensorType]:
    return [need(at(types, 0), "Scatter")]


def _apply(out: np.ndarray, index: tuple[Any, ...], updates: np.ndarray, mode: str,
           op: str) -> None:
    if mode not in REDUCTIONS:
        raise ShapeError(f"{op}: reduction must be one of {', '.join(REDUCTIONS)}, "
                         f"got {mode!r}")
    ufunc = REDUCTIONS[mode]
    if ufunc is None:
        out[index] = updates
    else:
        ufunc.at(out, index, updates)


def _snd_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    x, i, u = (need(at(inputs, k), "ScatterND") for k in range(3))
    out = x.copy()
    k = i.shape[-1]
    idx = fix_indices(i.reshape(-1, k), np.array(x.shape[:k], dtype=np.int64), "ScatterND")
    upd = u.reshape(-1, *x.shape[k:])
    _apply(out, tuple(idx[:, j] for j in range(k)), upd, sattr(call, "reduction", "none"),
           "ScatterND")
    return [out]


def _sel_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    x, i, u = (need(at(inputs, k), "ScatterElements") for k in range(3))
    a = norm_axis(iattr(call, "axis"), x.ndim)
    idx = fix_indices(i, x.shape[a], "ScatterElements")
    grid: list[np.ndarray] = list(np.indices(i.shape, sparse=True))
    grid[a] = idx
    out = x.copy()
    _apply(out, tuple(grid), u, sattr(call, "reduction", "none"), "ScatterElements")
    return [out]


# ----------------------------------------------------------------------------- NonZero, OneHot


def _nonzero_infer(types: Types, _c: object, call: Call) -> list[TensorType]:
    x = need(at(types, 0), "NonZero")
    return [TensorType("int64", (len(x.shape) if x.shape is not None else UNKNOWN, UNKNOWN))]


def _nonzero_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    x = need(at(inputs, 0), "NonZero")
    if x.ndim == 0:
        return [np.zeros((0, int(bool(x))), dtype=np.int64)]
    return [np.array(np.nonzero(x), dtype=np.int64).reshape(x.ndim, -1)]


def _onehot_infer(types: Types, consts: Arrays, call: Call) -> list[TensorType]:
    i, v = need(at(types, 0), "OneHot", "indices"), need(at(types, 2), "OneHot", "values")
    depth = at(consts, 1)
    if i.shape is None:
        return [TensorType(v.dtype, None)]
    a = norm_axis(iattr(call, "axis", -1), len(i.shape) + 1)
    d = int(np.asarray(depth).reshape(-1)[0]) if depth is not None else UNKNOWN
    return [TensorType(v.dtype, i.shape[:a] + (d,) + i.shape[a:])]


def _onehot_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    i, depth, v = (need(at(inputs, k), "OneHot") for k in range(3))
    d = int(np.asarray(depth).reshape(-1)[0])
    a = norm_axis(iattr(call, "axis", -1), i.ndim + 1)
    idx = i.astype(np.int64)
    idx = np.where(idx < 0, idx + d, idx)
    hot = np.expand_dims(idx, a) == np.arange(d).reshape([d if k == a else 1
                                                          for k in range(i.ndim + 1)])
    off, on = v.reshape(-1)[0], v.reshape(-1)[1]
    return [np.where(hot, on, off).astype(v.dtype)]


def _gather_flops(ins: Types, outs: Sequence[TensorType], call: Call) -> int:
    return numel_of(outs[0])


SCATTER_ATTRS = [attr("reduction", "string", "none")]

SCHEMAS = [
    schema("Gather", 1, "data indices", "output", _gather_infer, _gather_kernel,
           kernel_out=_gather_out,
           attrs=[attr("axis", "int", 0)], traits=MOVE, flops=_gather_flops,
           unit_of=shape_math_unit,
           doc="take slices along axis at the indices (negative ones count from the end)"),
    schema("GatherElements", 11, "data indices", "output", _gel_infer, _gel_kernel,
           attrs=[attr("axis", "int", 0)], traits=MOVE, flops=_gather_flops,
           doc="take one element per index along axis"),
    schema("GatherND", 11, "data indices", "output", _gnd_infer, _gnd_kernel,
           attrs=[attr("batch_dims", "int", 0)], traits=MOVE, flops=_gather_flops,
           doc="take slices addressed by the last dim of indices (after batch_dims)"),
    schema("ScatterND", 11, "data indices updates", "output", _scatter_infer, _snd_kernel,
           attrs=SCATTER_ATTRS, doc="copy of data with slices at indices replaced/reduced"),
    schema("ScatterElements", 11, "data indices updates", "output", _scatter_infer,
           _sel_kernel, attrs=[attr("axis", "int", 0), *SCATTER_ATTRS],
           doc="copy of data with elements at indices along axis replaced/reduced"),
    schema("Scatter", 9, "data indices updates", "output", _scatter_infer, _sel_kernel,
           attrs=[attr("axis", "int", 0)],
           doc="deprecated ScatterElements (opset 9-10): replace elements along axis"),
    schema("NonZero", 9, "X", "Y", _nonzero_infer, _nonzero_kernel,
           doc="int64 coordinates of the non-zero elements, one column each"),
    schema("OneHot", 9, "indices depth values", "output", _onehot_infer, _onehot_kernel,
           attrs=[attr("axis", "int", -1)], doc="values[1] at each index, values[0] elsewhere"),
]
