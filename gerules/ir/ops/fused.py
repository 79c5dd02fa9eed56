"""Fused NPU ops (domain ``ge``, version 1) with kernels, so optimised graphs run.

Invariants:
- Each fused op computes exactly what its unfused ai.onnx graph computes: the kernels call
  the same functions (``conv``, ``matmul``, ``softmax``, ``ACTIVATIONS``),
  so a fusion is exact up to float rounding of the order of operations.
- ``activation`` is one of ``ACTIVATIONS`` ("" for none); ``alpha``/``beta`` are the
  LeakyRelu slope or HardSigmoid's alpha and beta, ``clip_min``/``clip_max`` Clip's bounds
  (absent: unbounded), ``gelu_approximate`` Gelu's mode. Absent ones take ONNX defaults.
- FusedConv: ``Y = act(conv(X, W, B) + Z)``; FusedMatMul: ``Y = act(A @ B' + C)`` with
  MatMul's batching, ``B' = B^T`` (last two dims) when ``transB=1``.
- Attention: ``softmax(Q @ Kt * scale + Mask) @ V`` computed in float32 (float64 inputs in
  float64, so the fusion stays exact for them too) with the maximum subtracted; ``Kt`` is the
  already transposed key ``[..., D, Sk]``; ``scale`` defaults to ``1 / sqrt(D)``.
- Fused ops that are plain compositions of ai.onnx ops (ge.AddLayerNorm, the elementwise
  chains) are defined by their bodies in the shipped rule library (``ir.composite``), not here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ...errors import ShapeError
from ..graph import Shape, TensorType
from ..registry import ELEMENTWISE, INPLACE, Call
from ._common import (
    Arrays,
    Types,
    at,
    attr,
    broadcast,
    fmt,
    iattr,
    need,
    numel_of,
    same_dtype,
    sattr,
    schema,
    widen,
)
from .activation import ACTIVATION_FLOPS, activate, check_activation, gelu, gelu_flops
from .conv import CONV_ATTRS, conv, conv_flops, conv_infer
from .linalg import blas_ready, matmul_shape

ACT_ATTRS = [
    attr("activation", "string", ""),
    attr("alpha", "float"),
    attr("beta", "float"),
    attr("clip_min", "float"),
    attr("clip_max", "float"),
    attr("gelu_approximate", "string", "none"),
]


def _act_flops(call: Call, out: TensorType) -> int:
    name = sattr(call, "activation")
    if name == "Gelu":
        return gelu_flops(sattr(call, "gelu_approximate", "none")) * numel_of(out)
    return ACTIVATION_FLOPS.get(name, 4) * numel_of(out)


def _residual(y: TensorType, extra: TensorType | None, what: str, op: str) -> TensorType:
    """``y`` after adding a broadcast operand that must not grow it."""
    if extra is None:
        return y
    same_dtype([y, extra], op)
    out = broadcast(y.shape, extra.shape)
    if out is None or y.shape is None:
        return TensorType(y.dtype, out)
    grown = len(out) != len(y.shape) or any(
        isinstance(a, int) and isinstance(b, int) and a != b
        for a, b in zip(out, y.shape, strict=True))
    if grown:
        raise ShapeError(f"{op}: {what} {fmt(extra.shape)} does not broadcast to {fmt(y.shape)}")
    return TensorType(y.dtype, out)


# ----------------------------------------------------------------------------- FusedConv


def _fconv_infer(types: Types, _c: object, call: Call) -> list[TensorType]:
    check_activation(call.attrs)
    x, w = need(at(types, 0), "ge.FusedConv", "X"), need(at(types, 1), "ge.FusedConv", "W")
    y = conv_infer(x, w, call.attrs, "ge.FusedConv")
    return [_residual(y, at(types, 3), "residual Z", "ge.FusedConv")]


def _fconv_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    x, w = need(at(inputs, 0), "ge.FusedConv", "X"), need(at(inputs, 1), "ge.FusedConv", "W")
    y = conv(x, w, at(inputs, 2), call.attrs)
    z = at(inputs, 3)
    if z is not None:
        y = y + z.astype(y.dtype, copy=False)
    return [activate(y, call.attrs)]


def _fconv_flops(ins: Types, outs: Sequence[TensorType], call: Call) -> int:
    extra = numel_of(outs[0]) if at(ins, 3) is not None else 0
    return conv_flops(ins, outs, call) + _act_flops(call, outs[0]) + extra


# ----------------------------------------------------------------------------- FusedMatMul


def _t(shape: Shape | None) -> Shape | None:
    if shape is None or len(shape) < 2:
        return shape
    return (*shape[:-2], shape[-1], shape[-2])


def _fmm_infer(types: Types, _c: object, call: Call) -> list[TensorType]:
    check_activation(call.attrs)
    a, b = need(at(types, 0), "ge.FusedMatMul", "A"), need(at(types, 1), "ge.FusedMatMul", "B")
    bshape = _t(b.shape) if iattr(call, "transB") else b.shape
    y = TensorType(same_dtype([a, b], "ge.FusedMatMul"),
                   matmul_shape(a.shape, bshape, "ge.FusedMatMul"))
    return [_residual(y, at(types, 2), "bias C", "ge.FusedMatMul")]


def _fmm_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    a, b = need(at(inputs, 0), "ge.FusedMatMul", "A"), need(at(inputs, 1), "ge.FusedMatMul")
    if iattr(call, "transB"):
        b = np.swapaxes(b, -1, -2)
    y = np.matmul(blas_ready(widen(a)), blas_ready(widen(b)))
    c = at(inputs, 2)
    if c is not None:
        y = y + widen(c)
    return [activate(np.asarray(y).astype(a.dtype, copy=False), call.attrs)]


def _fmm_flops(ins: Types, outs: Sequence[TensorType], call: Call) -> int:
    a = at(ins, 0)
    k = a.shape[-1] if a is not None and a.shape else 1
    k = k if isinstance(k, int) else 1
    bias = numel_of(outs[0]) if at(ins, 2) is not None else 0
    return 2 * k * numel_of(outs[0]) + bias + _act_flops(call, outs[0])


# ----------------------------------------------------------------------------- Attention


def _attn_infer(types: Types, _c: object, call: Call) -> list[TensorType]:
    q, kt, v = (need(at(types, i), "ge.Attention", n) for i, n in enumerate("Q Kt V".split()))
    dtype = same_dtype([q, kt, v], "ge.Attention")
    scores = matmul_shape(q.shape, kt.shape, "ge.Attention (Q @ Kt)")
    mask = at(types, 3)
    if mask is not None:
        _residual(TensorType(dtype, scores), mask, "Mask", "ge.Attention")
    return [TensorType(dtype, matmul_shape(scores, v.shape, "ge.Attention (P @ V)"))]


def _attn_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    q, kt, v = (need(at(inputs, i), "ge.Attention") for i in range(3))
    scale = call.attrs.get("scale")
    s = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)  # type: ignore[arg-type]
    work = np.float64 if q.dtype == np.float64 else np.float32
    q32, kt32 = blas_ready(q.astype(work)), blas_ready(kt.astype(work))
    scores = np.matmul(q32, kt32) * work(s)
    mask = at(inputs, 3)
    if mask is not None:
        scores = scores + mask.astype(work)
    scores = scores - np.max(scores, axis=-1, keepdims=True)
    with np.errstate(all="ignore"):
        p = np.exp(scores)
        p /= np.sum(p, axis=-1, keepdims=True)
    return [np.matmul(p, blas_ready(v.astype(work))).astype(q.dtype, copy=False)]


def _attn_flops(ins: Types, outs: Sequence[TensorType], call: Call) -> int:
    q, v = at(ins, 0), at(ins, 2)
    if q is None or v is None or not q.shape or not v.shape:
        return numel_of(outs[0])
    d, sk = q.shape[-1], v.shape[-2]
    d, sk = (d if isinstance(d, int) else 1), (sk if isinstance(sk, int) else 1)
    rows = numel_of(q) // max(d, 1)  # batch * heads * Sq
    dv = v.shape[-1] if isinstance(v.shape[-1], int) else 1
    return rows * sk * (2 * d + 2 * dv + 6)


# ----------------------------------------------------------------------------- Gelu


def _gelu_infer(types: Types, _c: object, call: Call) -> list[TensorType]:
    return [need(at(types, 0), "ge.Gelu")]


def _gelu_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    x = need(at(inputs, 0), "ge.Gelu")
    with np.errstate(all="ignore"):
        y = gelu(widen(x), sattr(call, "approximate", "none"))
    return [y.astype(x.dtype, copy=False)]


SCHEMAS = [
    schema("FusedConv", 1, "X W B? Z?", "Y", _fconv_infer, _fconv_kernel, domain="ge",
           attrs=[*CONV_ATTRS, *ACT_ATTRS], unit="cube", flops=_fconv_flops,
           doc="Y = act(Conv(X, W, B) + Z): conv, optional residual, fused activation"),
    schema("FusedMatMul", 1, "A B C?", "Y", _fmm_infer, _fmm_kernel, domain="ge",
           attrs=[*ACT_ATTRS, attr("transB", "int", 0)], unit="cube", flops=_fmm_flops,
           doc="Y = act(A @ B' + C): batched matmul, optional bias, fused activation"),
    schema("Attention", 1, "Q Kt V Mask?", "Y", _attn_infer, _attn_kernel, domain="ge",
           attrs=[attr("scale", "float")], unit="cube", flops=_attn_flops,
           doc="Y = softmax(Q @ Kt * scale + Mask) @ V (Kt already transposed)"),
    schema("Gelu", 1, "X", "Y", _gelu_infer, _gelu_kernel, domain="ge",
           attrs=[attr("approximate", "string", "none")], traits={ELEMENTWISE, INPLACE},
           flops=lambda ins, outs, call: gelu_flops(sattr(call, "approximate", "none"))
           * numel_of(outs[0]),
           doc="Gelu (exact or tanh) at any ai.onnx opset"),
]
