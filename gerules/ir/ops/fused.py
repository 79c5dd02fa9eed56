"""Fused NPU ops (domain ``ge``, version 1) with kernels, so optimised graphs run.

Invariants:
- Each fused op computes exactly what its unfused ai.onnx graph computes: the kernels call
  the same functions (``conv``, ``matmul``, ``layer_norm``, ``softmax``, ``ACTIVATIONS``),
  so a fusion is exact up to float rounding of the order of operations.
- ``activation`` is one of ``ACTIVATIONS`` ("" for none); ``alpha``/``beta`` are the
  LeakyRelu slope or HardSigmoid's alpha and beta, ``clip_min``/``clip_max`` Clip's bounds
  (absent: unbounded), ``gelu_approximate`` Gelu's mode. Absent ones take ONNX defaults.
- FusedConv: ``Y = act(conv(X, W, B) + Z)``; FusedMatMul: ``Y = act(A @ B' + C)`` with
  MatMul's batching, ``B' = B^T`` (last two dims) when ``transB=1``.
- Attention: ``softmax(Q @ Kt * scale + Mask) @ V`` computed in float32 (float64 inputs in
  float64, so the fusion stays exact for them too) with the maximum subtracted; ``Kt`` is the
  already transposed key ``[..., D, Sk]``; ``scale`` defaults to ``1 / sqrt(D)``.
- Fused ops that are plain compositions of ai.onnx ops (the elementwise chains:
  ge.SiLU, ge.AddRelu, ge.MulAdd) are defined by their bodies in the shipped rule
  library (``ir.composite``), not here; ge.AddLayerNorm stays here for its kernel
  into the runtime's arena.
- MultiHeadAttention: ``Attention`` with the heads split and merged inside: Q ``[B, Sq,
  H*D]``, K ``[B, Sk, H*D]``, V ``[B, Sk, H*Dv]`` are read as ``[B, S, H, D]`` and moved to
  ``[B, H, S, D]`` (K to ``[B, H, D, Sk]``), the result ``[B, H, Sq, Dv]`` goes back to
  ``[B, Sq, H*Dv]``; ``num_heads`` is H; the Mask broadcasts against ``[B, H, Sq, Sk]``. With
  K and V absent, the first input holds Q, K and V side by side on its last axis (thirds).
- AddLayerNorm: ``S = X + R``, ``Y = LayerNormalization(S)``; the optional second output is
  ``S`` itself (for the next residual).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np

from ...errors import ShapeError
from .. import formats as F
from ..graph import Shape, TensorType
from ..layout import CONV, MATMUL, native
from ..registry import ELEMENTWISE, INPLACE, Call
from ._common import (
    Arrays,
    Types,
    at,
    attr,
    broadcast,
    fattr,
    fmt,
    iattr,
    need,
    numel_of,
    same_dtype,
    sattr,
    schema,
    scratch,
    widen,
)
from .activation import (
    ACTIVATION_FLOPS,
    activate_into,
    check_activation,
    gelu,
    gelu_flops,
)
from .conv import CONV_ATTRS, conv, conv_flops, conv_infer
from .conv_blocked import fused_conv_blocked
from .linalg import blas_ready, matmul_shape
from .norm import layer_norm
from .softmax import exp_rows, rows_ready

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


def _fconv(inputs: Arrays, call: Call, out: np.ndarray | None) -> np.ndarray:
    """conv, then the residual and the activation in place in its output."""
    x, w = need(at(inputs, 0), "ge.FusedConv", "X"), need(at(inputs, 1), "ge.FusedConv", "W")
    y = conv(x, w, at(inputs, 2), call.attrs, out)
    z = at(inputs, 3)
    if z is not None:
        y += z.astype(y.dtype, copy=False)
    return activate_into(y, call.attrs)


def _fconv_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    return [_fconv(inputs, call, None)]


def _fconv_out(inputs: Arrays, call: Call, outs: Sequence[np.ndarray]) -> None:
    _fconv(inputs, call, outs[0])


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


def _fmm(inputs: Arrays, call: Call, out: np.ndarray | None) -> np.ndarray:
    """One BLAS matmul into ``out``, then the bias and the activation in place."""
    a, b = need(at(inputs, 0), "ge.FusedMatMul", "A"), need(at(inputs, 1), "ge.FusedMatMul")
    if iattr(call, "transB"):
        b = np.swapaxes(b, -1, -2)
    c = at(inputs, 2)
    if a.dtype == np.float16:  # float32 arithmetic, rounded once at the end
        y = np.matmul(blas_ready(widen(a)), blas_ready(widen(b)))
        if c is not None:
            y += widen(c)
        y = activate_into(y, call.attrs).astype(a.dtype)
        if out is None:
            return y
        out[...] = y
        return out
    y = np.matmul(blas_ready(a), blas_ready(b), out=out)
    if c is not None:
        y += c
    return activate_into(y, call.attrs)


def _fmm_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    return [_fmm(inputs, call, None)]


def _fmm_out(inputs: Arrays, call: Call, outs: Sequence[np.ndarray]) -> None:
    _fmm(inputs, call, outs[0])


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
    return [attention(q, kt, v, at(inputs, 3), call.attrs.get("scale"))]


def attention(q: np.ndarray, kt: np.ndarray, v: np.ndarray, mask: np.ndarray | None,
              scale: object) -> np.ndarray:
    """softmax(q @ kt * scale + mask) @ v in float32 (float64 for float64), max subtracted."""
    y, sums = unnormalised_attention(q, kt, v, mask, scale)
    y /= sums[..., None]
    return y.astype(q.dtype, copy=False)


def unnormalised_attention(q: np.ndarray, kt: np.ndarray, v: np.ndarray,
                           mask: np.ndarray | None, scale: object
                           ) -> tuple[np.ndarray, np.ndarray]:
    """``(exp(S - shift) @ v, row sums of exp(S - shift))`` for ``S = q @ kt * scale +
    mask``, in the work dtype: ``attention`` is their quotient, taken after the second
    product (Dv columns per row instead of Sk) or, in ge.MultiHeadAttention, in the pass that
    merges the heads. The scores and their exponentials live in ``scratch`` slots 0 and 1;
    the shift is ``exp_rows``' (never below a row's maximum)."""
    s = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)  # type: ignore[arg-type]
    work = np.float64 if q.dtype == np.float64 else np.float32
    q32, kt32 = blas_ready(q.astype(work, copy=False)), blas_ready(kt.astype(work, copy=False))
    shape = (*np.broadcast_shapes(q.shape[:-2], kt.shape[:-2]), q.shape[-2], kt.shape[-1])
    scores = np.matmul(q32, kt32, out=scratch(shape, work, slot=0))
    scores *= work(s)
    if mask is not None:
        scores += mask.astype(work, copy=False)
    v32 = blas_ready(v.astype(work, copy=False))
    with np.errstate(all="ignore"):
        if not rows_ready(scores, -1):
            scores -= np.max(scores, axis=-1, keepdims=True)
            np.exp(scores, out=scores)
            return np.matmul(scores, v32), np.sum(scores, axis=-1)
        e = scratch(shape, work, slot=1)
        sums = exp_rows(scores.reshape(-1, shape[-1]), e.reshape(-1, shape[-1]))
        return np.matmul(e, v32), sums.reshape(shape[:-1])


def _attn_flops(ins: Types, outs: Sequence[TensorType], call: Call) -> int:
    q, v = at(ins, 0), at(ins, 2)
    if q is None or v is None or not q.shape or not v.shape:
        return numel_of(outs[0])
    d, sk = q.shape[-1], v.shape[-2]
    d, sk = (d if isinstance(d, int) else 1), (sk if isinstance(sk, int) else 1)
    rows = numel_of(q) // max(d, 1)  # batch * heads * Sq
    dv = v.shape[-1] if isinstance(v.shape[-1], int) else 1
    return rows * sk * (2 * d + 2 * dv + 6)


# ----------------------------------------------------------------------------- MultiHeadAttention


def _mha_parts(types: Types, call: Call) -> tuple[TensorType, TensorType, TensorType]:
    """Q, K, V types (split from the packed first input when K and V are absent)."""
    q = need(at(types, 0), "ge.MultiHeadAttention", "Q")
    k, v = at(types, 1), at(types, 2)
    if (k is None) != (v is None):
        raise ShapeError("ge.MultiHeadAttention: give both K and V, or neither (packed Q)")
    if k is not None and v is not None:
        return q, k, v
    if q.shape is None or not isinstance(q.shape[-1], int) or q.shape[-1] % 3:
        raise ShapeError(f"ge.MultiHeadAttention: packed QKV {fmt(q.shape)} needs a last dim "
                         "divisible by 3")
    third = TensorType(q.dtype, (*q.shape[:-1], q.shape[-1] // 3))
    return third, third, third


def _heads(t: TensorType, h: int, what: str) -> int | str:
    """D: the per-head size of a ``[B, S, H*D]`` tensor."""
    if t.shape is None or len(t.shape) != 3:
        raise ShapeError(f"ge.MultiHeadAttention: {what} must be [B, S, H*D], got {fmt(t.shape)}")
    last = t.shape[-1]
    if isinstance(last, int) and (h < 1 or last % h):
        raise ShapeError(f"ge.MultiHeadAttention: {what} {fmt(t.shape)} does not split into "
                         f"{h} heads")
    return last // h if isinstance(last, int) else "?"


def _mha_infer(types: Types, _c: object, call: Call) -> list[TensorType]:
    q, k, v = _mha_parts(types, call)
    h = iattr(call, "num_heads")
    dtype = same_dtype([q, k, v], "ge.MultiHeadAttention")
    d, dk = _heads(q, h, "Q"), _heads(k, h, "K")
    _heads(v, h, "V")
    if isinstance(d, int) and isinstance(dk, int) and d != dk:
        raise ShapeError(f"ge.MultiHeadAttention: Q {fmt(q.shape)} and K {fmt(k.shape)} differ "
                         "in head size")
    assert q.shape is not None and k.shape is not None and v.shape is not None
    mask = at(types, 3)
    if mask is not None:
        scores = TensorType(dtype, (q.shape[0], h, q.shape[1], k.shape[1]))
        _residual(scores, mask, "Mask", "ge.MultiHeadAttention")
    return [TensorType(dtype, (q.shape[0], q.shape[1], v.shape[2]))]


def _split_heads(x: np.ndarray, h: int, perm: tuple[int, ...]) -> np.ndarray:
    b, s, hd = x.shape
    return x.reshape(b, s, h, hd // h).transpose(perm)


def _mha(inputs: Arrays, call: Call, out: np.ndarray | None) -> np.ndarray:
    """Attention over the split heads; the softmax's division by the row sums is the pass
    that merges the heads back into ``out``."""
    q, k, v = need(at(inputs, 0), "ge.MultiHeadAttention"), at(inputs, 1), at(inputs, 2)
    if k is None or v is None:
        q, k, v = np.split(q, 3, axis=-1)
    h = iattr(call, "num_heads")
    y, sums = unnormalised_attention(
        _split_heads(q, h, (0, 2, 1, 3)), _split_heads(k, h, (0, 2, 3, 1)),
        _split_heads(v, h, (0, 2, 1, 3)), at(inputs, 3), call.attrs.get("scale"))
    merged = y.transpose(0, 2, 1, 3)  # [B, Sq, H, Dv]
    target = np.empty(merged.shape, q.dtype) if out is None else out.reshape(merged.shape)
    with np.errstate(all="ignore"):
        np.divide(merged, sums.transpose(0, 2, 1)[..., None], out=target)
    return target.reshape(q.shape[0], q.shape[1], -1) if out is None else out


def _mha_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    return [_mha(inputs, call, None)]


def _mha_out(inputs: Arrays, call: Call, outs: Sequence[np.ndarray]) -> None:
    _mha(inputs, call, outs[0])


def _mha_flops(ins: Types, outs: Sequence[TensorType], call: Call) -> int:
    try:
        q, k, v = _mha_parts(ins, call)
    except ShapeError:
        return numel_of(outs[0])
    h = max(iattr(call, "num_heads"), 1)
    sk = k.shape[1] if k.shape and isinstance(k.shape[1], int) else 1
    d = q.shape[-1] // h if q.shape and isinstance(q.shape[-1], int) else 1
    dv = v.shape[-1] // h if v.shape and isinstance(v.shape[-1], int) else 1
    rows = numel_of(q) // max(d, 1)  # batch * heads * Sq
    return rows * sk * (2 * d + 2 * dv + 6)


# ----------------------------------------------------------------------------- AddLayerNorm


def _aln_infer(types: Types, _c: object, call: Call) -> list[TensorType]:
    x, r = need(at(types, 0), "ge.AddLayerNorm", "X"), need(at(types, 1), "ge.AddLayerNorm", "R")
    need(at(types, 2), "ge.AddLayerNorm", "Scale")
    s = TensorType(same_dtype([x, r], "ge.AddLayerNorm"), broadcast(x.shape, r.shape))
    return [s, s][: max(1, call.num_outputs)]


def _aln(inputs: Arrays, call: Call, outs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """S = X + R (into the S output, or into Y's buffer when S is not wanted), then
    LayerNormalization(S) into Y in place. Y may share X's buffer (INPLACE): X is read
    before Y is written."""
    x, r, scale = (need(at(inputs, i), "ge.AddLayerNorm") for i in range(3))
    want_s = call.num_outputs > 1
    target = outs[1] if want_s and len(outs) > 1 else (outs[0] if outs and not want_s
                                                       else None)
    s = np.add(x, r, out=target) if target is not None and target.shape == np.broadcast_shapes(
        x.shape, r.shape) else x + r
    y, _, _ = layer_norm(s, scale, at(inputs, 3), iattr(call, "axis", -1),
                         fattr(call, "epsilon", 1e-5), out=outs[0] if outs else None)
    return [y, s][: max(1, call.num_outputs)]


def _aln_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    return _aln(inputs, call, ())


def _aln_out(inputs: Arrays, call: Call, outs: Sequence[np.ndarray]) -> None:
    _aln(inputs, call, outs)


def _aln_axis(types: Types, call: Call) -> str | None:
    x = at(types, 0)
    rank = x.rank if x is not None else None
    return None if rank is not None and iattr(call, "axis", -1) in (-1, rank - 1) else (
        "normalizes over more than the last axis")


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
           kernel_out=_fconv_out,
           formats=dataclasses.replace(CONV, direct=fused_conv_blocked),
           doc="Y = act(Conv(X, W, B) + Z): conv, optional residual, fused activation"),
    schema("FusedMatMul", 1, "A B C?", "Y", _fmm_infer, _fmm_kernel, domain="ge",
           attrs=[*ACT_ATTRS, attr("transB", "int", 0)], unit="cube", flops=_fmm_flops,
           kernel_out=_fmm_out, formats=MATMUL,
           doc="Y = act(A @ B' + C): batched matmul, optional bias, fused activation"),
    schema("Attention", 1, "Q Kt V Mask?", "Y", _attn_infer, _attn_kernel, domain="ge",
           attrs=[attr("scale", "float")], unit="cube", flops=_attn_flops,
           doc="Y = softmax(Q @ Kt * scale + Mask) @ V (Kt already transposed)"),
    schema("MultiHeadAttention", 1, "Q K? V? Mask?", "Y", _mha_infer, _mha_kernel,
           domain="ge", attrs=[attr("num_heads", "int", required=True), attr("scale", "float")],
           unit="cube", flops=_mha_flops, kernel_out=_mha_out,
           doc="Y = merge_heads(Attention(split_heads(Q), split_heads(K)^T, split_heads(V), "
               "Mask)): heads split and merged inside; K and V absent: Q is packed QKV"),
    schema("AddLayerNorm", 1, "X R Scale B?", "Y S?", _aln_infer, _aln_kernel, domain="ge",
           attrs=[attr("axis", "int", -1), attr("epsilon", "float", 1e-5)], kernel_out=_aln_out,
           traits={INPLACE}, flops=lambda ins, outs, call: 9 * numel_of(outs[0]),
           formats=native(F.FRACTAL_NZ, F.FRACTAL_NZ, "", when=_aln_axis),
           doc="Y = LayerNormalization(X + R); optional second output S = X + R"),
    schema("Gelu", 1, "X", "Y", _gelu_infer, _gelu_kernel, domain="ge",
           attrs=[attr("approximate", "string", "none")], traits={ELEMENTWISE, INPLACE},
           flops=lambda ins, outs, call: gelu_flops(sattr(call, "approximate", "none"))
           * numel_of(outs[0]),
           doc="Gelu (exact or tanh) at any ai.onnx opset"),
]
