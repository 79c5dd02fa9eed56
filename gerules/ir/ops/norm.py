"""Normalisations (ai.onnx): BatchNormalization (inference), LayerNormalization,
InstanceNormalization, GroupNormalization.

Invariants:
- BatchNormalization runs in inference mode, and from opset 14 in training mode too
  (``training_mode=1``: batch statistics normalise, ``running_mean``/``running_var`` are the
  momentum updates of the given ones); the training-only extra outputs of opsets 6-13 raise
  ``ShapeError`` "training mode not supported" from inference and from the kernel.
- LayerNormalization normalises over ``shape[axis:]``; its statistics are computed in
  float32 when ``stash_type=1`` (the default) and in the input type otherwise; ``Mean`` and
  ``InvStdDev`` have shape ``shape[:axis] + [1] * (rank - axis)``.
- ``layer_norm`` is shared with ``ge.AddLayerNorm`` so fused and unfused graphs agree.
- RMSNormalization (opset 23): ``X / sqrt(mean(X^2 over shape[axis:]) + eps) * scale``, in
  float32 with ``stash_type=1``. LpNormalization divides by the Lp norm along ``axis``; LRN by
  ``(bias + alpha / size * sum of squares over a window of channels) ^ beta``;
  MeanVarianceNormalization gives ``(X - mean) / (sqrt(var) + 1e-9)`` over ``axes``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ...errors import KernelError, ShapeError
from ..dtypes import OP_FLOATS
from ..graph import TensorType
from ..layout import NORM_LAST
from ..registry import INPLACE, Call, FlopsFn
from . import _jit
from ._common import (
    Arrays,
    Types,
    at,
    attr,
    fattr,
    fill,
    iattr,
    need,
    norm_axis,
    numel_of,
    schema,
    scratch,
    widen,
)

TRAINING = "training mode not supported (only inference BatchNormalization runs here)"


# ----------------------------------------------------------------------------- BatchNorm


def _bn_check(call: Call) -> None:
    if iattr(call, "training_mode") or call.num_outputs > 1:
        raise ShapeError(f"BatchNormalization: {TRAINING}")
    if not iattr(call, "spatial", 1):
        raise ShapeError("BatchNormalization: spatial=0 (per-element statistics) is not "
                         "supported")


def _bn_infer(types: Types, _c: object, call: Call) -> list[TensorType]:
    _bn_check(call)
    x = need(at(types, 0), "BatchNormalization")
    for i, name in enumerate(("scale", "B", "mean", "var"), start=1):
        t = need(at(types, i), "BatchNormalization", name)
        if t.shape is not None and len(t.shape) != 1:
            raise ShapeError(f"BatchNormalization: {name} must be 1-D, got rank {len(t.shape)}")
        c = x.shape[1] if x.shape is not None and len(x.shape) > 1 else None
        if isinstance(c, int) and t.shape and isinstance(t.shape[0], int) and t.shape[0] != c:
            raise ShapeError(f"BatchNormalization: {name} has {t.shape[0]} values for {c} "
                             "channels")
    return [x]


def _bn_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    x = need(at(inputs, 0), "BatchNormalization")
    y = np.empty(x.shape, widen(x).dtype)
    _bn_out(inputs, call, [y])
    return [y.astype(x.dtype, copy=False)]


def _bn_out(inputs: Arrays, call: Call, outs: Sequence[np.ndarray]) -> None:
    """Inference batch norm into ``outs[0]`` (which may be X itself): one scale and one
    shift per channel, from the small vectors in float64, then ``y = x * a + b`` in two
    passes and no temporary (one compiled pass from a runtime step's second call when
    the ``jit`` extra is installed: ``_jit``). A float16 X is computed in float32 and
    rounded once."""
    _bn_check(call)
    x, scale, b, mean, var = (need(at(inputs, i), "BatchNormalization") for i in range(5))
    y = outs[0]
    if y.shape != x.shape:
        raise KernelError(f"BatchNormalization: the output is {list(y.shape)}, X is "
                          f"{list(x.shape)}")
    eps = fattr(call, "epsilon", 1e-5)
    shape = (1, -1) + (1,) * (x.ndim - 2)
    a = scale.astype(np.float64) / np.sqrt(var.astype(np.float64) + eps)
    shift = b.astype(np.float64) - mean.astype(np.float64) * a
    dt = widen(x).dtype
    if y.dtype != dt:  # float16 through float32
        y[...] = _bn_kernel(inputs, call)[0]
        return
    a, shift = a.astype(dt), shift.astype(dt)
    if (x.size >= _jit.MIN_ELEMENTS and x.ndim >= 2 and a.shape == shift.shape == x.shape[1:2]
            and _jit.fits(x, y)):
        fn = _jit.loop("affine_channels", call)
        if fn is not None and fn(x.reshape(x.shape[0], x.shape[1], -1), a, shift,
                                 y.reshape(y.shape[0], y.shape[1], -1)):
            return  # the same two roundings per element, in one pass
    np.multiply(x, a.reshape(shape), out=y)
    y += shift.reshape(shape)


def _bn14_out(inputs: Arrays, call: Call, outs: Sequence[np.ndarray]) -> None:
    if iattr(call, "training_mode"):
        fill(outs, _bn14_kernel(inputs, call), "BatchNormalization")
    else:
        _bn_out(inputs, call, outs)


BN_ATTRS = [attr("epsilon", "float", 1e-5), attr("momentum", "float", 0.9)]


def _bn14_infer(types: Types, consts: Arrays, call: Call) -> list[TensorType]:
    if not iattr(call, "training_mode"):
        return _bn_infer(types, consts, call)
    x = need(at(types, 0), "BatchNormalization")
    stat = need(at(types, 3), "BatchNormalization", "input_mean")
    return [x, stat, stat][: max(1, call.num_outputs)]


def _bn14_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    """Opset 14: inference, or training mode (batch statistics and running updates)."""
    if not iattr(call, "training_mode"):
        return _bn_kernel(inputs, call)
    x, scale, b, mean, var = (need(at(inputs, i), "BatchNormalization") for i in range(5))
    axes = tuple(i for i in range(x.ndim) if i != 1)
    xw = widen(x)
    batch_mean, batch_var = xw.mean(axis=axes), xw.var(axis=axes)
    momentum = fattr(call, "momentum", 0.9)
    y = _bn_kernel([x, scale, b, batch_mean.astype(mean.dtype), batch_var.astype(var.dtype)],
                   Call({"epsilon": fattr(call, "epsilon", 1e-5)}))[0]
    run_mean = mean * momentum + batch_mean * (1 - momentum)
    run_var = var * momentum + batch_var * (1 - momentum)
    return [y, run_mean.astype(mean.dtype), run_var.astype(var.dtype)][: call.num_outputs]


# ----------------------------------------------------------------------------- LayerNorm


def _stats_dtype(x_dtype: str, stash: int) -> str:
    return "float32" if stash == 1 else x_dtype


def layer_norm(x: np.ndarray, scale: np.ndarray, bias: np.ndarray | None, axis: int,
               eps: float, stash: int = 1, out: np.ndarray | None = None
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(Y, Mean, InvStdDev)`` of ONNX LayerNormalization; Y into ``out`` when given (it
    may be ``x`` itself: x is read before Y is written).

    Two passes over each row for the statistics, always: the mean, then the mean of the
    centred squares (never ``E[x^2] - E[x]^2``, which cancels on rows with a large mean).
    Float32 and float64 statistics over contiguous rows take ``_layer_norm_rows``; float16
    with float32 statistics goes through it on a float32 copy; the rest (float16 statistics,
    strided inputs) take the plain NumPy formula below."""
    a = norm_axis(axis, x.ndim)
    dt = _F32 if stash == 1 else x.dtype  # (as _stats_dtype, without the dtype's name)
    if dt in _ROW_DTYPES and x.size and x.flags.c_contiguous:
        if x.dtype == dt:
            target = out if out is not None and _row_ready(out, x) else np.empty(x.shape, dt)
            y, mean, inv = _layer_norm_rows(x, scale, bias, a, eps, target)
        else:  # float16 data, float32 statistics: on a float32 copy, rounded once
            xs = x.astype(dt)
            y, mean, inv = _layer_norm_rows(xs, scale, bias, a, eps, xs)
            y = y.astype(x.dtype)
        if out is not None and y is not out:
            out[...] = y
            y = out
        return y, mean, inv
    xs = x.astype(dt, copy=False)
    axes = tuple(range(a, x.ndim))
    mean = np.mean(xs, axis=axes, keepdims=True)
    in_place = out is not None and out.dtype == dt
    diff = np.subtract(xs, mean, out=out if in_place else None)
    square = scratch(diff.shape, dt)
    np.multiply(diff, diff, out=square)
    inv = 1 / np.sqrt(np.mean(square, axis=axes, keepdims=True) + dt.type(eps))
    diff *= inv
    diff *= scale.astype(dt, copy=False)
    if bias is not None:
        diff += bias.astype(dt, copy=False)
    y = diff.astype(x.dtype, copy=False)
    if out is not None and y is not out:
        out[...] = y
        y = out
    return y, mean, inv


_F32 = np.dtype(np.float32)
_ROW_DTYPES = (_F32, np.dtype(np.float64))


def _row_ready(out: np.ndarray, x: np.ndarray) -> bool:
    return out.dtype == x.dtype and out.shape == x.shape and out.flags.c_contiguous


def _layer_norm_rows(x: np.ndarray, scale: np.ndarray, bias: np.ndarray | None, a: int,
                     eps: float, out: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """LayerNormalization of a C-contiguous float32/float64 ``x`` viewed as ``[rows, n]``
    (``n = prod(shape[a:])``) into ``out`` (same dtype and shape, C-contiguous, may be x).

    Five passes over the data and no full-size temporary: the row sums (NumPy's pairwise
    ``add.reduce``, so the mean is the same as ``np.mean``'s), ``out = x - mean``, the row
    dot products ``out . out`` (one batched BLAS dot per row, no squares array), then
    ``out *= inv``, ``out *= scale`` and ``out += bias``. A BLAS gemv against a ones vector
    would sum the rows faster, but its float32 mean is about twice as far from the exact one
    on rows with a large mean (1000 + N(0, 1)), so the pairwise sum stays."""
    rows = math.prod(x.shape[:a])
    n = x.size // rows
    x2, y2 = x.reshape(rows, n), out.reshape(rows, n)
    dt = x.dtype
    mean = np.add.reduce(x2, axis=1)
    np.divide(mean, n, out=mean)
    np.subtract(x2, mean[:, None], out=y2)
    inv = np.matmul(y2[:, None, :], y2[:, :, None]).reshape(rows)
    np.divide(inv, n, out=inv)
    inv += dt.type(eps)
    np.sqrt(inv, out=inv)
    np.divide(1, inv, out=inv)
    y2 *= inv[:, None]
    y2 *= _flat(scale, x.shape[a:], dt)
    if bias is not None:
        y2 += _flat(bias, x.shape[a:], dt)
    stat = (*x.shape[:a], *([1] * (x.ndim - a)))
    return out, mean.reshape(stat), inv.reshape(stat)


def _flat(v: np.ndarray, shape: tuple[int, ...], dt: np.dtype) -> np.ndarray:
    """``v`` broadcast to the normalised ``shape`` as one row of ``dt``."""
    v = v.astype(dt, copy=False)
    return v.reshape(-1) if v.shape == shape else np.broadcast_to(v, shape).reshape(-1)


def _ln_infer(types: Types, _c: object, call: Call) -> list[TensorType]:
    x = need(at(types, 0), "LayerNormalization")
    need(at(types, 1), "LayerNormalization", "Scale")
    stash = _stats_dtype(x.dtype, iattr(call, "stash_type", 1))
    if x.shape is None:
        return [x, TensorType(stash, None), TensorType(stash, None)][: call.num_outputs]
    a = norm_axis(iattr(call, "axis", -1), len(x.shape))
    stat = TensorType(stash, (*x.shape[:a], *([1] * (len(x.shape) - a))))
    return [x, stat, stat][: max(1, call.num_outputs)]


def _ln_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    x, scale = need(at(inputs, 0), "LayerNormalization"), need(at(inputs, 1), "LayerNorm")
    y, mean, inv = layer_norm(x, scale, at(inputs, 2), iattr(call, "axis", -1),
                              fattr(call, "epsilon", 1e-5),
                              iattr(call, "stash_type", 1))
    return [y, mean, inv][: max(1, call.num_outputs)]


def _ln_out(inputs: Arrays, call: Call, outs: Sequence[np.ndarray]) -> None:
    """LayerNormalization into ``outs`` (Y may be X itself): Y is the only full-size array
    written, the squares go through ``scratch``."""
    x, scale = need(at(inputs, 0), "LayerNormalization"), need(at(inputs, 1), "LayerNorm")
    if outs[0].shape != x.shape:
        raise KernelError(f"LayerNormalization: the output is {list(outs[0].shape)}, X is "
                          f"{list(x.shape)}")
    _, mean, inv = layer_norm(x, scale, at(inputs, 2), iattr(call, "axis", -1),
                              fattr(call, "epsilon", 1e-5), iattr(call, "stash_type", 1),
                              out=outs[0])
    fill(outs[1:], [mean, inv], "LayerNormalization")


# ----------------------------------------------------------------------------- Instance/Group


def _instance_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    x, scale, b = (need(at(inputs, i), "InstanceNormalization") for i in range(3))
    eps = fattr(call, "epsilon", 1e-5)
    xw = widen(x)
    axes = tuple(range(2, x.ndim))
    mean = xw.mean(axis=axes, keepdims=True)
    var = xw.var(axis=axes, keepdims=True)
    shape = (1, -1) + (1,) * (x.ndim - 2)
    y = (xw - mean) / np.sqrt(var + eps) * scale.reshape(shape) + b.reshape(shape)
    return [y.astype(x.dtype, copy=False)]


def _group_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    x, scale, b = (need(at(inputs, i), "GroupNormalization") for i in range(3))
    groups = iattr(call, "num_groups")
    eps = fattr(call, "epsilon", 1e-5)
    if x.shape[1] % groups:
        raise ShapeError(f"GroupNormalization: {x.shape[1]} channels do not split into "
                         f"{groups} groups")
    dt = np.dtype(_stats_dtype(x.dtype.name, iattr(call, "stash_type", 1)))
    g = x.astype(dt).reshape(x.shape[0], groups, -1)
    norm = (g - g.mean(axis=2, keepdims=True)) / np.sqrt(g.var(axis=2, keepdims=True) + eps)
    shape = (1, -1) + (1,) * (x.ndim - 2)
    y = norm.reshape(x.shape) * scale.astype(dt).reshape(shape) + b.astype(dt).reshape(shape)
    return [y.astype(x.dtype, copy=False)]


def _rms_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    x, scale = need(at(inputs, 0), "RMSNormalization"), need(at(inputs, 1), "RMSNorm")
    dt = np.dtype(_stats_dtype(x.dtype.name, iattr(call, "stash_type", 1)))
    xs = x.astype(dt)
    axes = tuple(range(norm_axis(iattr(call, "axis", -1), x.ndim), x.ndim))
    rms = np.sqrt(np.mean(xs * xs, axis=axes, keepdims=True) + dt.type(fattr(call, "epsilon",
                                                                                1e-5)))
    return [(xs / rms * scale.astype(dt)).astype(x.dtype)]


def _lp_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    x = need(at(inputs, 0), "LpNormalization")
    p, axis = iattr(call, "p", 2), iattr(call, "axis", -1)
    if p not in (1, 2):
        raise ShapeError(f"LpNormalization: p must be 1 or 2, got {p}")
    xw = widen(x)
    norm = np.sum(np.abs(xw) ** p, axis=axis, keepdims=True) ** (1 / p)
    with np.errstate(all="ignore"):
        return [np.where(norm == 0, 0, xw / norm).astype(x.dtype)]


def _lrn_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    x = need(at(inputs, 0), "LRN")
    size = iattr(call, "size")
    alpha, beta, bias = fattr(call, "alpha", 1e-4), fattr(call, "beta", 0.75), fattr(call,
                                                                                      "bias", 1)
    xw = widen(x)
    sq = np.pad(xw * xw, [(0, 0), ((size - 1) // 2, size // 2)] + [(0, 0)] * (x.ndim - 2))
    total = sum(sq[:, i: i + x.shape[1]] for i in range(size))
    return [(xw / (bias + alpha / size * total) ** beta).astype(x.dtype)]


def _mvn_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    x = need(at(inputs, 0), "MeanVarianceNormalization")
    axes = tuple(int(a) for a in call.attrs.get("axes", (0, 2, 3)))  # type: ignore[union-attr]
    xw = widen(x)
    mean = xw.mean(axis=axes, keepdims=True)
    std = np.sqrt(np.mean(xw * xw, axis=axes, keepdims=True) - mean * mean)
    return [((xw - mean) / (std + 1e-9)).astype(x.dtype)]


def _first(types: Types, _c: object, call: Call) -> list[TensorType]:
    x = need(at(types, 0), "normalization")
    if x.dtype not in OP_FLOATS:
        raise ShapeError(f"normalization needs a float input, got {x.dtype}")
    return [x]


def _flops(per_elem: int) -> FlopsFn:
    def flops(ins: Types, outs: Sequence[TensorType], call: Call) -> int:
        return per_elem * numel_of(at(ins, 0))

    return flops


SCHEMAS = [
    schema("BatchNormalization", 6, "X scale B mean var",
           "Y mean? var? saved_mean? saved_var?", _bn_infer, _bn_kernel,
           attrs=[*BN_ATTRS, attr("is_test", "int", 0), attr("spatial", "int", 1)],
           traits={INPLACE}, flops=_flops(2), kernel_out=_bn_out,
           doc="inference batch norm (opset 6-8: spatial=1 only, extra outputs refused)"),
    schema("BatchNormalization", 9, "X scale B input_mean input_var",
           "Y running_mean? running_var? saved_mean? saved_var?", _bn_infer, _bn_kernel,
           attrs=BN_ATTRS, traits={INPLACE}, flops=_flops(2), kernel_out=_bn_out,
           doc="inference batch norm: (X - mean) / sqrt(var + eps) * scale + B"),
    schema("BatchNormalization", 14, "X scale B input_mean input_var",
           "Y running_mean? running_var?", _bn14_infer, _bn14_kernel,
           attrs=[*BN_ATTRS, attr("training_mode", "int", 0)], traits={INPLACE},
           flops=_flops(2), kernel_out=_bn14_out,
           doc="batch norm; training_mode=1 normalises by batch statistics and also gives "
               "the running mean and variance"),
    schema("LayerNormalization", 17, "X Scale B?", "Y Mean? InvStdDev?", _ln_infer,
           _ln_kernel, attrs=[attr("axis", "int", -1), attr("epsilon", "float", 1e-5),
                              attr("stash_type", "int", 1)],
           traits={INPLACE}, kernel_out=_ln_out, flops=_flops(8), widen_low=False,
           formats=NORM_LAST,
           doc="normalise over shape[axis:], then scale and shift"),
    schema("InstanceNormalization", 6, "input scale B", "output", _first, _instance_kernel,
           attrs=[attr("epsilon", "float", 1e-5)], traits={INPLACE},
           flops=_flops(8),
           doc="normalise each (sample, channel) over its spatial dims"),
    schema("GroupNormalization", 21, "X scale bias", "Y", _first, _group_kernel,
           attrs=[attr("epsilon", "float", 1e-5), attr("num_groups", "int", required=True),
                  attr("stash_type", "int", 1)], traits={INPLACE},
           flops=_flops(8),
           doc="normalise channel groups, then per-channel scale and bias"),
    schema("RMSNormalization", 23, "X scale", "Y", _first, _rms_kernel, widen_low=False,
           attrs=[attr("axis", "int", -1), attr("epsilon", "float", 1e-5),
                  attr("stash_type", "int", 1)], traits={INPLACE}, flops=_flops(4),
           doc="divide by the root mean square over shape[axis:], then scale"),
    schema("LpNormalization", 1, "input", "output", _first, _lp_kernel, traits={INPLACE},
           attrs=[attr("axis", "int", -1), attr("p", "int", 2)], flops=_flops(3),
           doc="divide by the L1 or L2 norm along axis"),
    schema("LRN", 1, "X", "Y", _first, _lrn_kernel, flops=_flops(6),
           attrs=[attr("alpha", "float", 1e-4), attr("beta", "float", 0.75),
                  attr("bias", "float", 1.0), attr("size", "int", required=True)],
           doc="local response normalisation across channels"),
    schema("MeanVarianceNormalization", 9, "X", "Y", _first, _mvn_kernel, traits={INPLACE},
           attrs=[attr("axes", "ints", (0, 2, 3))], flops=_flops(6),
           doc="(X - mean) / (std + 1e-9) over axes"),
]
