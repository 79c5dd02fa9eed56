"""Normalisations (ai.onnx): BatchNormalization (inference), LayerNormalization,
InstanceNormalization, GroupNormalization.

Invariants:
- BatchNormalization only runs in inference mode: ``training_mode=1`` (opset 14+) or the
  training-only extra outputs (opset 9-13) raise ``ShapeError`` "training mode not
  supported" from inference and from the kernel.
- LayerNormalization normalises over ``shape[axis:]``; its statistics are computed in
  float32 when ``stash_type=1`` (the default) and in the input type otherwise; ``Mean`` and
  ``InvStdDev`` have shape ``shape[:axis] + [1] * (rank - axis)``.
- ``layer_norm`` is the one LayerNormalization computation (the op, and ge.AddLayerNorm's body).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...errors import ShapeError
from ..dtypes import FLOATS
from ..graph import TensorType
from ..registry import INPLACE, Call, FlopsFn
from ._common import (
    Arrays,
    Types,
    at,
    attr,
    fattr,
    iattr,
    need,
    norm_axis,
    numel_of,
    schema,
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
    _bn_check(call)
    x, scale, b, mean, var = (need(at(inputs, i), "BatchNormalization") for i in range(5))
    eps = fattr(call, "epsilon", 1e-5)
    shape = (1, -1) + (1,) * (x.ndim - 2)
    xw = widen(x)
    dt = xw.dtype
    inv = (scale.astype(dt) / np.sqrt(var.astype(dt) + dt.type(eps))).reshape(shape)
    y = (xw - mean.astype(dt).reshape(shape)) * inv + b.astype(dt).reshape(shape)
    return [y.astype(x.dtype, copy=False)]


BN_ATTRS = [attr("epsilon", "float", 1e-5), attr("momentum", "float", 0.9)]


# ----------------------------------------------------------------------------- LayerNorm


def _stats_dtype(x_dtype: str, stash: int) -> str:
    return "float32" if stash == 1 else x_dtype


def layer_norm(x: np.ndarray, scale: np.ndarray, bias: np.ndarray | None, axis: int,
               eps: float, stash: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(Y, Mean, InvStdDev)`` of ONNX LayerNormalization."""
    a = norm_axis(axis, x.ndim)
    dt = np.dtype(_stats_dtype(x.dtype.name, stash))
    xs = x.astype(dt, copy=False)
    axes = tuple(range(a, x.ndim))
    mean = np.mean(xs, axis=axes, keepdims=True)
    diff = xs - mean
    inv = 1 / np.sqrt(np.mean(diff * diff, axis=axes, keepdims=True) + dt.type(eps))
    y = diff * inv * scale.astype(dt)
    if bias is not None:
        y = y + bias.astype(dt)
    return y.astype(x.dtype, copy=False), mean, inv


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


def _first(types: Types, _c: object, call: Call) -> list[TensorType]:
    x = need(at(types, 0), "normalization")
    if x.dtype not in FLOATS:
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
           traits={INPLACE}, flops=_flops(2),
           doc="inference batch norm (opset 6-8: spatial=1 only, extra outputs refused)"),
    schema("BatchNormalization", 9, "X scale B input_mean input_var",
           "Y running_mean? running_var? saved_mean? saved_var?", _bn_infer, _bn_kernel,
           attrs=BN_ATTRS, traits={INPLACE}, flops=_flops(2),
           doc="inference batch norm: (X - mean) / sqrt(var + eps) * scale + B"),
    schema("BatchNormalization", 14, "X scale B input_mean input_var",
           "Y running_mean? running_var?", _bn_infer, _bn_kernel,
           attrs=[*BN_ATTRS, attr("training_mode", "int", 0)], traits={INPLACE},
           flops=_flops(2),
           doc="inference batch norm; training_mode=1 is refused"),
    schema("LayerNormalization", 17, "X Scale B?", "Y Mean? InvStdDev?", _ln_infer,
           _ln_kernel, attrs=[attr("axis", "int", -1), attr("epsilon", "float", 1e-5),
                              attr("stash_type", "int", 1)],
           traits={INPLACE}, flops=_flops(8),
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
]
