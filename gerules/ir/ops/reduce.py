"""Reductions and scans (ai.onnx): Reduce*, ArgMax/ArgMin, CumSum, TopK.

Invariants:
- Reduce ops take ``axes`` as an attribute before their input version (ReduceSum 13, the
  others 18) and as an optional input from it on; no axes means all axes, unless
  ``noop_with_empty_axes=1`` (input versions), which returns the input unchanged.
- Reducing an empty set gives the op's identity (0 for sums, 1 for products, -inf for
  Max/LogSum/LogSumExp, +inf for Min; the dtype's extreme for integers).
- Without constant axes inference keeps the rank only when ``keepdims=1``.
- ArgMax/ArgMin return int64 indices of the first extreme (the last one with
  ``select_last_index=1``); TopK orders equal values by their index, lowest first.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ...errors import ShapeError
from .. import formats as F
from ..graph import Dim, TensorType
from ..layout import native
from ..registry import Call, InferFn, KernelFn, OpSchema
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
    norm_axes,
    norm_axis,
    numel_of,
    schema,
    widen,
)

Reducer = Callable[[np.ndarray, tuple[int, ...], bool], np.ndarray]


def _extreme(dtype: np.dtype, high: bool) -> float | int:
    if dtype.kind == "f":
        return np.inf if high else -np.inf
    if dtype.kind == "b":
        return high
    info = np.iinfo(dtype)
    return info.max if high else info.min


def _max(x: np.ndarray, axes: tuple[int, ...], keep: bool) -> np.ndarray:
    return np.asarray(np.max(x, axis=axes, keepdims=keep, initial=_extreme(x.dtype, False)))


def _min(x: np.ndarray, axes: tuple[int, ...], keep: bool) -> np.ndarray:
    return np.asarray(np.min(x, axis=axes, keepdims=keep, initial=_extreme(x.dtype, True)))


def _sum(x: np.ndarray, axes: tuple[int, ...], keep: bool) -> np.ndarray:
    return np.asarray(np.sum(x, axis=axes, keepdims=keep, dtype=x.dtype))


def _mean(x: np.ndarray, axes: tuple[int, ...], keep: bool) -> np.ndarray:
    return np.asarray(np.mean(x, axis=axes, keepdims=keep))


def _prod(x: np.ndarray, axes: tuple[int, ...], keep: bool) -> np.ndarray:
    return np.asarray(np.prod(x, axis=axes, keepdims=keep, dtype=x.dtype))


def _l1(x: np.ndarray, axes: tuple[int, ...], keep: bool) -> np.ndarray:
    return np.asarray(np.sum(np.abs(x), axis=axes, keepdims=keep, dtype=x.dtype))


def _l2(x: np.ndarray, axes: tuple[int, ...], keep: bool) -> np.ndarray:
    return np.asarray(np.sqrt(np.sum(x * x, axis=axes, keepdims=keep)))


def _sum_square(x: np.ndarray, axes: tuple[int, ...], keep: bool) -> np.ndarray:
    return np.asarray(np.sum(x * x, axis=axes, keepdims=keep, dtype=x.dtype))


def _log_sum(x: np.ndarray, axes: tuple[int, ...], keep: bool) -> np.ndarray:
    return np.asarray(np.log(np.sum(x, axis=axes, keepdims=keep)))


def _log_sum_exp(x: np.ndarray, axes: tuple[int, ...], keep: bool) -> np.ndarray:
    if x.size == 0:
        return np.asarray(np.log(np.sum(np.exp(x), axis=axes, keepdims=keep)))
    m = np.max(x, axis=axes, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    s = np.log(np.sum(np.exp(x - m), axis=axes, keepdims=True)) + m
    return np.asarray(s if keep else np.squeeze(s, axis=axes))


def _axes(inputs_or_types: Sequence[object], call: Call, from_input: bool) -> list[int] | None:
    """The requested axes (``None`` when unknown at this point, ``[]`` for none given)."""
    if not from_input:
        return lattr(call, "axes") or []
    if len(inputs_or_types) < 2 or inputs_or_types[1] is None:
        return []
    value = inputs_or_types[1]
    return ints(value) if isinstance(value, np.ndarray) else None


def _reduced_shape(shape: Sequence[Dim], axes: list[int], keep: bool) -> tuple[Dim, ...]:
    if keep:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def _reduce(op: str, since: int, fn: Reducer, from_input: bool, flops: int,
            doc: str, dtypes: str = "") -> OpSchema:
    def infer(types: Types, consts: Arrays, call: Call) -> list[TensorType]:
        x = need(at(types, 0), op)
        keep = bool(iattr(call, "keepdims", 1))
        if x.shape is None:
            return [x]
        given = _axes(list(consts) if from_input else [], call, from_input)
        if from_input and at(types, 1) is not None and at(consts, 1) is None:
            return [TensorType(x.dtype, (UNKNOWN,) * len(x.shape) if keep else None)]
        axes = norm_axes(given or [], len(x.shape))
        if not axes:
            if from_input and iattr(call, "noop_with_empty_axes"):
                return [x]
            axes = list(range(len(x.shape)))
        return [TensorType(x.dtype, _reduced_shape(x.shape, axes, keep))]

    def kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
        x = need(at(inputs, 0), op)
        axes = norm_axes(_axes(inputs, call, from_input) or [], x.ndim)
        if not axes:
            if from_input and iattr(call, "noop_with_empty_axes"):
                return [x]
            axes = list(range(x.ndim))
        with np.errstate(all="ignore"):
            y = fn(widen(x), tuple(axes), bool(iattr(call, "keepdims", 1)))
        return [np.asarray(y).astype(x.dtype, copy=False)]

    attrs = [attr("keepdims", "int", 1)]
    attrs += ([attr("noop_with_empty_axes", "int", 0)] if from_input
              else [attr("axes", "ints")])
    return schema(op, since, "data axes:i64?" if from_input else "data", "reduced", infer,
                  kernel, attrs=attrs, formats=REDUCE_5HD,
                  flops=lambda ins, outs, call: flops * numel_of(at(ins, 0)),
                  doc=doc + (" (axes input)" if from_input else " (axes attribute)"))


def _kept(types: Types, call: Call) -> str | None:
    return None if iattr(call, "keepdims", 1) else "keepdims=0 changes the rank"


# A reduction of an NC1HWC0 tensor that keeps its dims: over C it is a reduction over C1
# and C0 (the padded channels left out), over H and W one per channel.
REDUCE_5HD = native(F.NC1HWC0, "", when=_kept)

REDUCERS: list[tuple[str, int, Reducer, int, str]] = [
    ("ReduceSum", 13, _sum, 1, "sum over axes"),
    ("ReduceMean", 18, _mean, 1, "mean over axes"),
    ("ReduceMax", 18, _max, 1, "maximum over axes"),
    ("ReduceMin", 18, _min, 1, "minimum over axes"),
    ("ReduceProd", 18, _prod, 1, "product over axes"),
    ("ReduceL1", 18, _l1, 2, "sum of absolute values over axes"),
    ("ReduceL2", 18, _l2, 2, "Euclidean norm over axes"),
    ("ReduceSumSquare", 18, _sum_square, 2, "sum of squares over axes"),
    ("ReduceLogSum", 18, _log_sum, 2, "log of the sum over axes"),
    ("ReduceLogSumExp", 18, _log_sum_exp, 4, "log-sum-exp over axes (stable)"),
]


# ----------------------------------------------------------------------------- ArgMax/ArgMin


def _arg(op: str, fn: Callable[..., np.ndarray]) -> OpSchema:
    def infer(types: Types, _c: object, call: Call) -> list[TensorType]:
        x = need(at(types, 0), op)
        if x.shape is None:
            return [TensorType("int64", None)]
        axis = norm_axis(iattr(call, "axis"), len(x.shape))
        return [TensorType("int64", _reduced_shape(x.shape, [axis], bool(iattr(call, "keepdims",
                                                                              1))))]

    def kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
        x = need(at(inputs, 0), op)
        axis = norm_axis(iattr(call, "axis"), x.ndim)
        if iattr(call, "select_last_index"):
            idx = x.shape[axis] - 1 - fn(np.flip(x, axis), axis=axis)
        else:
            idx = fn(x, axis=axis)
        if iattr(call, "keepdims", 1):
            idx = np.expand_dims(idx, axis)
        return [np.asarray(idx, dtype=np.int64)]

    return schema(op, 1, "data", "reduced", infer, kernel,
                  attrs=[attr("axis", "int", 0), attr("keepdims", "int", 1),
                         attr("select_last_index", "int", 0)],
                  flops=lambda ins, outs, call: numel_of(at(ins, 0)),
                  doc=f"int64 index of the {'largest' if 'Max' in op else 'smallest'} value "
                      "along axis")


# ----------------------------------------------------------------------------- CumSum


def _cumsum_infer(types: Types, _c: object, call: Call) -> list[TensorType]:
    return [need(at(types, 0), "CumSum")]


def _cumulative(fn: Callable[..., np.ndarray], unit: int) -> KernelFn:
    """CumSum (``np.cumsum``, exclusive shifts in 0) or CumProd (``np.cumprod``, 1)."""

    def kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
        x, axis_t = need(at(inputs, 0), "Cum"), need(at(inputs, 1), "Cum", "axis")
        axis = norm_axis(ints(axis_t)[0], x.ndim)
        y = widen(np.flip(x, axis) if iattr(call, "reverse") else x)  # float16 in float32
        if iattr(call, "exclusive"):
            head = np.full_like(np.take(y, [0], axis=axis), unit)
            y = np.concatenate([head, np.take(y, range(y.shape[axis] - 1), axis=axis)], axis)
        s = fn(y, axis=axis, dtype=y.dtype)
        return [(np.flip(s, axis) if iattr(call, "reverse") else s).astype(x.dtype,
                                                                           copy=False)]

    return kernel


# ----------------------------------------------------------------------------- TopK


def _k_of(inputs: Sequence[object], call: Call, from_input: bool) -> int | None:
    if not from_input:
        return iattr(call, "k")
    value = at(inputs, 1)
    return ints(value)[0] if isinstance(value, np.ndarray) else None


def _topk(from_input: bool) -> tuple[InferFn, KernelFn]:
    def infer(types: Types, consts: Arrays, call: Call) -> list[TensorType]:
        x = need(at(types, 0), "TopK")
        if x.shape is None:
            return [x, TensorType("int64", None)]
        axis = norm_axis(iattr(call, "axis", -1), len(x.shape))
        k = _k_of(consts, call, from_input)
        dims = list(x.shape)
        dims[axis] = UNKNOWN if k is None else k
        size = x.shape[axis]
        if k is not None and isinstance(size, int) and k > size:
            raise ShapeError(f"TopK: k={k} exceeds axis size {size}")
        return [TensorType(x.dtype, tuple(dims)), TensorType("int64", tuple(dims))]

    def kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
        x = need(at(inputs, 0), "TopK")
        axis = norm_axis(iattr(call, "axis", -1), x.ndim)
        k = need(_k_of(inputs, call, from_input), "TopK", "K")
        if k < 0 or k > x.shape[axis]:
            raise ShapeError(f"TopK: k={k} is outside [0, {x.shape[axis]}]")
        if iattr(call, "largest", 1):
            rev = np.argsort(np.flip(x, axis), axis=axis, kind="stable")
            order = x.shape[axis] - 1 - np.flip(rev, axis)
        else:
            order = np.argsort(x, axis=axis, kind="stable")
        idx = np.take(order, np.arange(k), axis=axis)
        return [np.take_along_axis(x, idx, axis=axis), idx.astype(np.int64)]

    return infer, kernel


_TOPK_ATTRS = [attr("axis", "int", -1), attr("largest", "int", 1), attr("sorted", "int", 1)]

SCHEMAS = [
    *[_reduce(op, 1, fn, False, fl, doc) for op, _, fn, fl, doc in REDUCERS],
    *[_reduce(op, since, fn, True, fl, doc) for op, since, fn, fl, doc in REDUCERS],
    _arg("ArgMax", np.argmax),
    _arg("ArgMin", np.argmin),
    schema("CumSum", 11, "x axis:i64", "y", _cumsum_infer, _cumulative(np.cumsum, 0),
           attrs=[attr("exclusive", "int", 0), attr("reverse", "int", 0)],
           doc="cumulative sum along axis (exclusive and reverse variants)"),
    schema("CumProd", 26, "x axis:i64", "y", _cumsum_infer, _cumulative(np.cumprod, 1),
           attrs=[attr("exclusive", "int", 0), attr("reverse", "int", 0)],
           doc="cumulative product along axis (exclusive and reverse variants)"),
    schema("TopK", 1, "X", "Values Indices", *_topk(False),
           attrs=[attr("axis", "int", -1), attr("k", "int", required=True)],
           doc="the k largest values along axis and their int64 indices (k attribute)"),
    schema("TopK", 10, "X K:i64", "Values Indices", *_topk(True),
           attrs=_TOPK_ATTRS,
           doc="the k largest (or smallest) values along axis and their int64 indices"),
]
