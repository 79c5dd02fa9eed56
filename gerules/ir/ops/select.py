"""Ops that pick, reorder or write parts of a tensor (ai.onnx): Compress, Unique,
ReverseSequence, CenterCropPad, TensorScatter.

Invariants:
- Compress keeps the slices along ``axis`` (the flattened input without one) whose
  ``condition`` entry is true; a shorter condition drops the rest. Its length is a run-time
  value, so the output dim is ``"?"`` unless the condition is a known constant.
- Unique gives the unique values (sorted with ``sorted=1``, else in order of first
  occurrence), over the flattened input or whole slices along ``axis``, with the first index
  of each, the inverse indices and the counts (int64).
- ReverseSequence reverses the first ``sequence_lens[b]`` steps along ``time_axis`` of each
  batch entry ``b``; CenterCropPad crops or zero-pads ``axes`` to ``shape`` around the
  centre (an odd difference puts the extra element at the end).
- TensorScatter writes ``update`` into a copy of ``past_cache`` along ``axis`` at
  ``write_indices[b]`` per batch entry (``circular``: modulo the cache length).
"""

from __future__ import annotations

import numpy as np

from ...errors import ShapeError
from ..graph import Dim, TensorType
from ..registry import SHAPE_OP, Call
from ._common import (
    UNKNOWN,
    Arrays,
    Types,
    at,
    attr,
    iattr,
    ints,
    lattr,
    need,
    norm_axis,
    sattr,
    schema,
)

# ----------------------------------------------------------------------------- Compress


def _compress_infer(types: Types, consts: Arrays, call: Call) -> list[TensorType]:
    x = need(at(types, 0), "Compress")
    cond = at(consts, 1)
    kept: Dim = UNKNOWN if cond is None else int(np.count_nonzero(cond))
    if "axis" not in call.attrs or x.shape is None:
        return [TensorType(x.dtype, (kept,))]
    a = norm_axis(iattr(call, "axis"), len(x.shape))
    return [TensorType(x.dtype, (*x.shape[:a], kept, *x.shape[a + 1:]))]


def _compress_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    x, cond = need(at(inputs, 0), "Compress"), need(at(inputs, 1), "Compress", "condition")
    axis = None if "axis" not in call.attrs else norm_axis(iattr(call, "axis"), x.ndim)
    return [np.compress(cond.astype(bool).reshape(-1), x, axis=axis)]


# ----------------------------------------------------------------------------- Unique


def _unique_infer(types: Types, _c: object, call: Call) -> list[TensorType]:
    x = need(at(types, 0), "Unique")
    if "axis" in call.attrs and x.shape is not None:
        a = norm_axis(iattr(call, "axis"), len(x.shape))
        y = TensorType(x.dtype, (*x.shape[:a], UNKNOWN, *x.shape[a + 1:]))
    else:
        y = TensorType(x.dtype, (UNKNOWN,))
    idx = TensorType("int64", (UNKNOWN,))
    return [y, idx, idx, idx][: max(1, call.num_outputs)]


def _unique_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    x = need(at(inputs, 0), "Unique")
    axis = None if "axis" not in call.attrs else norm_axis(iattr(call, "axis"), x.ndim)
    y, first, inverse, counts = np.unique(x, return_index=True, return_inverse=True,
                                          return_counts=True, axis=axis)
    inverse = inverse.reshape(-1)
    if not iattr(call, "sorted", 1):  # order of first occurrence
        order = np.argsort(first, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        y = np.take(y, order, axis=0 if axis is None else axis)
        first, counts, inverse = first[order], counts[order], rank[inverse]
    outs = [y, first, inverse, counts]
    return [o.astype(np.int64) if k else o for k, o in enumerate(outs)][: call.num_outputs]


# ----------------------------------------------------------------------------- ReverseSequence


def _revseq_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    x, lens = need(at(inputs, 0), "ReverseSequence"), need(at(inputs, 1), "ReverseSequence")
    batch, time = iattr(call, "batch_axis", 1), iattr(call, "time_axis", 0)
    y = np.array(x)
    for b, n in enumerate(ints(lens)):
        src: list[int | slice] = [slice(None)] * x.ndim
        src[batch], src[time] = b, slice(n - 1, None, -1) if n > 0 else slice(0, 0)
        dst = list(src)
        dst[time] = slice(0, n)
        y[tuple(dst)] = x[tuple(src)]
    return [y]


# ----------------------------------------------------------------------------- CenterCropPad


def _crop_axes(rank: int, call: Call) -> list[int]:
    axes = lattr(call, "axes")
    return list(range(rank)) if axes is None else [norm_axis(a, rank) for a in axes]


def _ccp_infer(types: Types, consts: Arrays, call: Call) -> list[TensorType]:
    x = need(at(types, 0), "CenterCropPad")
    shape = at(consts, 1)
    if x.shape is None:
        return [x]
    out = list(x.shape)
    for k, a in enumerate(_crop_axes(len(x.shape), call)):
        out[a] = UNKNOWN if shape is None else ints(shape)[k]
    return [TensorType(x.dtype, tuple(out))]


def _ccp_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    x, shape = need(at(inputs, 0), "CenterCropPad"), ints(need(at(inputs, 1), "CenterCropPad"))
    src, dst, out = [slice(None)] * x.ndim, [slice(None)] * x.ndim, list(x.shape)
    for a, want in zip(_crop_axes(x.ndim, call), shape, strict=True):
        have, out[a] = x.shape[a], want
        lo = abs(have - want) // 2
        if want < have:
            src[a] = slice(lo, lo + want)
        elif want > have:
            dst[a] = slice(lo, lo + have)
    y = np.zeros(out, dtype=x.dtype)
    y[tuple(dst)] = x[tuple(src)]
    return [y]


# ----------------------------------------------------------------------------- TensorScatter


def _ts_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    cache, update = need(at(inputs, 0), "TensorScatter"), need(at(inputs, 1), "TensorScatter")
    where = at(inputs, 2)
    axis = norm_axis(iattr(call, "axis", -2), cache.ndim)
    mode = sattr(call, "mode", "linear")
    if mode not in ("linear", "circular"):
        raise ShapeError(f"TensorScatter: mode '{mode}' is not linear or circular")
    starts = np.zeros(cache.shape[0], np.int64) if where is None else where.astype(np.int64)
    out = np.array(cache)
    steps = np.arange(update.shape[axis])
    for b, start in enumerate(starts):
        pos = start + steps
        pos = pos % cache.shape[axis] if mode == "circular" else pos
        if pos.max(initial=-1) >= cache.shape[axis] or start < 0:
            raise ShapeError(f"TensorScatter: writes past the cache length {cache.shape[axis]}")
        dst = np.moveaxis(out[b], axis - 1, 0) if axis else out
        dst[pos] = np.moveaxis(update[b], axis - 1, 0)
    return [out]


def _same(types: Types, _c: object, call: Call) -> list[TensorType]:
    return [need(at(types, 0), "op")]


SCHEMAS = [
    schema("Compress", 9, "input condition:bool", "output", _compress_infer, _compress_kernel,
           attrs=[attr("axis", "int")], traits={SHAPE_OP},
           doc="the slices along axis whose condition is true"),
    schema("Unique", 11, "X", "Y indices? inverse_indices? counts?", _unique_infer,
           _unique_kernel, attrs=[attr("axis", "int"), attr("sorted", "int", 1)],
           traits={SHAPE_OP}, doc="unique values or slices, first indices, inverse, counts"),
    schema("ReverseSequence", 10, "input sequence_lens:i64", "Y", _same, _revseq_kernel,
           attrs=[attr("batch_axis", "int", 1), attr("time_axis", "int", 0)],
           traits={SHAPE_OP}, doc="reverse the first sequence_lens[b] steps of each batch"),
    schema("CenterCropPad", 18, "input_data shape:i64", "output_data", _ccp_infer,
           _ccp_kernel, attrs=[attr("axes", "ints")], traits={SHAPE_OP},
           doc="crop or zero-pad axes to shape around the centre"),
    schema("TensorScatter", 24, "past_cache update write_indices:i64?", "present_cache", _same,
           _ts_kernel, attrs=[attr("axis", "int", -2), attr("mode", "string", "linear")],
           traits={SHAPE_OP}, doc="write update into the cache at per-batch indices"),
]
