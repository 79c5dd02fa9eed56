"""Softmax, LogSoftmax and Hardmax in both of their ONNX meanings.

Invariants:
- Opset 1-12 ("coerce to 2-D"): the input is viewed as ``[prod(shape[:axis]),
  prod(shape[axis:])]`` and normalised over the second dim; ``axis`` defaults to 1.
- Opset 13+: normalised along ``axis`` alone; ``axis`` defaults to -1.
- Softmax subtracts the maximum before ``exp`` (stable) and computes float16 in float32.
- Hardmax marks the first maximum along the axis with 1 and all else with 0.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence

import numpy as np

from ...errors import KernelError
from ..graph import TensorType
from ..registry import INPLACE, Call, OpSchema
from ._common import Arrays, Types, at, attr, fill, need, norm_axis, schema, scratch, widen

AxisFn = Callable[[np.ndarray, int], np.ndarray]
IntoFn = Callable[[np.ndarray, int, np.ndarray], np.ndarray]


def _softmax(x: np.ndarray, axis: int) -> np.ndarray:
    return _softmax_into(x, axis, np.empty(x.shape, x.dtype))


def _softmax_into(x: np.ndarray, axis: int, out: np.ndarray) -> np.ndarray:
    """Softmax into ``out`` (which may be ``x``: its maxima are taken first), no other
    full-size array but ``exp_rows``' scratch when out is x."""
    if rows_ready(x, axis) and out.flags.c_contiguous and out.dtype == x.dtype:
        n = x.shape[-1]
        x2, y2 = x.reshape(-1, n), out.reshape(-1, n)
        e2 = scratch(x2.shape, x.dtype, slot=1) if np.may_share_memory(x, out) else y2
        sums = exp_rows(x2, e2)
        np.divide(e2, sums[:, None], out=y2)
        return out
    m = np.max(x, axis=axis, keepdims=True)
    np.subtract(x, m, out=out)
    np.exp(out, out=out)
    out /= np.sum(out, axis=axis, keepdims=True)
    return out


_FLOOR = math.exp(-16.0)  # the least row sum under a shared shift that keeps full precision
_GROUP = 2048  # elements per group of rows sharing one shift


def rows_ready(x: np.ndarray, axis: int) -> bool:
    """Whether ``exp_rows`` serves softmax of ``x`` along ``axis``: float32/float64,
    C-contiguous, non-empty, along the last axis."""
    return (x.dtype in (np.float32, np.float64) and x.ndim > 0 and x.size > 0
            and axis in (-1, x.ndim - 1) and x.flags.c_contiguous)


def exp_rows(x2: np.ndarray, e2: np.ndarray) -> np.ndarray:
    """``e2 = exp(x2 - shift)`` for a C-contiguous ``[rows, n]`` float array (``e2`` the same
    shape and dtype, not overlapping x2); returns the row sums of e2 (so softmax is e2 / sums).

    Invariants: the shift of a row is never below its maximum (no overflow). Rows share the
    maximum of their group of ``_GROUP // n`` consecutive rows (one reduction per group
    instead of one per short row, which dominated Softmax over BERT's [1536, 128]); a row
    whose sum under that shift is below ``_FLOOR`` (its own maximum more than about 16 below
    the group's, or not finite) is redone with its own maximum, so no row's terms go
    subnormal; a kept row's largest terms have ``exp`` arguments up to 16 from zero, rounded
    as the per-row formula rounds those of terms 16 below a row's maximum (about 1e-6
    relative: BERT's scores came out as close to float64 as before). The sums are one BLAS
    gemv against ones."""
    rows, n = x2.shape
    group = math.gcd(rows, max(1, _GROUP // n))
    xg, eg = x2.reshape(rows // group, group * n), e2.reshape(rows // group, group * n)
    np.subtract(xg, np.max(xg, axis=1, keepdims=True), out=eg)
    np.exp(e2, out=e2)
    ones = _ones(n, e2.dtype)
    sums: np.ndarray = np.matmul(e2, ones)
    redo = np.flatnonzero(~(sums >= _FLOOR))  # NaN sums are redone too
    if group > 1 and redo.size:
        own = x2[redo]
        own -= np.max(own, axis=1, keepdims=True)
        np.exp(own, out=own)
        e2[redo] = own
        sums[redo] = np.matmul(own, ones)
    return sums


@functools.lru_cache(maxsize=64)
def _ones(n: int, dtype: np.dtype) -> np.ndarray:
    """A read-only vector of ``n`` ones (the gemv's other operand, made once per length)."""
    ones = np.ones(n, dtype)
    ones.flags.writeable = False
    return ones


def _log_softmax(x: np.ndarray, axis: int) -> np.ndarray:
    z = x - np.max(x, axis=axis, keepdims=True)
    return np.asarray(z - np.log(np.sum(np.exp(z), axis=axis, keepdims=True)))


def _hardmax(x: np.ndarray, axis: int) -> np.ndarray:
    first = np.expand_dims(np.argmax(x, axis=axis), axis)
    out = np.zeros_like(x)
    np.put_along_axis(out, first, 1, axis=axis)
    return out


def softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Stable per-axis softmax computed in float32 (or wider); keeps x's dtype."""
    with np.errstate(all="ignore"):
        return _softmax(widen(x), axis).astype(x.dtype, copy=False)


def _per_axis(fn: AxisFn) -> AxisFn:
    def run(x: np.ndarray, axis: int) -> np.ndarray:
        return fn(x, norm_axis(axis, max(x.ndim, 1)))

    return run


def _coerced(fn: AxisFn) -> AxisFn:
    def run(x: np.ndarray, axis: int) -> np.ndarray:
        a = norm_axis(axis, max(x.ndim, 1))
        rows = int(np.prod(x.shape[:a], dtype=np.int64))
        if x.size == 0:
            return x.copy()
        return fn(x.reshape(rows, -1), 1).reshape(x.shape)

    return run


def _build(op: str, since: int, fn: AxisFn, flops: int, doc: str,
           into: IntoFn | None = None) -> OpSchema:
    run = _per_axis(fn) if since >= 13 else _coerced(fn)

    def infer(types: Types, _c: object, call: Call) -> list[TensorType]:
        x = need(at(types, 0), op)
        if x.shape is not None:
            norm_axis(int(call.attrs["axis"]), max(len(x.shape), 1))  # type: ignore[arg-type]
        return [x]

    def kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
        x = need(at(inputs, 0), op)
        with np.errstate(all="ignore"):
            y = run(widen(x), int(call.attrs["axis"]))  # type: ignore[arg-type]
        return [np.asarray(y).astype(x.dtype, copy=False)]

    def kernel_out(inputs: Arrays, call: Call, outs: Sequence[np.ndarray]) -> None:
        x, out = need(at(inputs, 0), op), outs[0]
        if into is None or x.dtype != out.dtype or x.dtype == np.float16 or x.size == 0:
            fill(outs, kernel(inputs, call), op)
            return
        if out.shape != x.shape:
            raise KernelError(f"{op}: the output is {list(out.shape)}, the input is "
                              f"{list(x.shape)}")
        a = norm_axis(int(call.attrs["axis"]), max(x.ndim, 1))  # type: ignore[arg-type]
        if since >= 13:  # under the runtime's errstate (``OpSchema``)
            into(x, a, out)
        else:  # coerced to 2-D: views of both (the output is contiguous)
            rows = math.prod(x.shape[:a])
            into(x.reshape(rows, -1), 1, out.reshape(rows, -1))

    return schema(op, since, "input", "output", infer, kernel,
                  attrs=[attr("axis", "int", -1 if since >= 13 else 1)], traits={INPLACE},
                  flops=lambda ins, outs, call: flops * (outs[0].numel() or 0), doc=doc,
                  kernel_out=kernel_out if into is not None else None)


_OLD = " over the input coerced to 2-D at axis (opset 1-12)"
_NEW = " along one axis (opset 13+)"

SCHEMAS = [
    _build("Softmax", 1, _softmax, 5, "softmax" + _OLD, _softmax_into),
    _build("Softmax", 13, _softmax, 5, "softmax" + _NEW, _softmax_into),
    _build("LogSoftmax", 1, _log_softmax, 6, "log of softmax" + _OLD),
    _build("LogSoftmax", 13, _log_softmax, 6, "log of softmax" + _NEW),
    _build("Hardmax", 1, _hardmax, 2, "one-hot of the first maximum" + _OLD),
    _build("Hardmax", 13, _hardmax, 2, "one-hot of the first maximum" + _NEW),
]
