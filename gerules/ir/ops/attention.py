"""ONNX Attention (opset 23, 24 with ``nonpad_kv_seqlen``, 25 with sliding windows) and
RotaryEmbedding (opset 23).

Invariants:
- Attention takes Q, K, V as 4-D ``[batch, heads, seq, head_size]`` or 3-D ``[batch, seq,
  heads * head_size]`` (then ``q_num_heads``/``kv_num_heads`` are required); the output
  ``Y`` has Q's layout with V's head size. ``past_key``/``past_value`` are concatenated in
  front of K/V along the sequence and returned as ``present_*``; ``qk_matmul_output`` is
  ``[batch, q_heads, q_seq, kv_seq]``.
- Scores: ``(Q * sqrt(scale)) @ (K * sqrt(scale))^T`` (``scale`` defaults to
  ``1 / sqrt(head_size)``), then ``softcap * tanh(s / softcap)`` when ``softcap > 0``, then
  the additive bias: ``attn_mask`` (bool: False masks; a short last dim is padded with
  masked keys), the causal mask (bottom-right aligned: query ``i`` sees key ``j`` when
  ``j <= i + offset``, offset = past length or ``nonpad_kv_seqlen - q_seq``), the sliding
  window, and the padding of keys past ``nonpad_kv_seqlen``. A row with every key masked
  gives zeros. Grouped-query attention repeats each KV head ``q_heads / kv_heads`` times.
- ``qk_matmul_output_mode``: 0 raw scores, 1 after softcap, 2 after the bias, 3 after
  softmax. Float16 and bfloat16 compute in float32, rounding the scaled operands, the
  probabilities and the result to the input type as the ONNX function body does.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...errors import ShapeError
from .. import dtypes
from ..graph import Dim, Graph, TensorType, captures
from ..registry import AttrSpec, Call, OpSchema
from ._common import (
    Arrays,
    Types,
    at,
    attr,
    dim_op,
    fattr,
    iattr,
    need,
    numel_of,
    schema,
)

ATTN_ATTRS = [attr("is_causal", "int", 0), attr("kv_num_heads", "int"),
              attr("q_num_heads", "int"), attr("qk_matmul_output_mode", "int", 0),
              attr("scale", "float"), attr("softcap", "float", 0.0),
              attr("softmax_precision", "int")]
WINDOW_ATTRS = [attr("left_window_size", "int", -1), attr("right_window_size", "int", -1)]


def _heads_4d(t: TensorType, heads: int | None, what: str) -> tuple[Dim, ...]:
    """``[batch, heads, seq, head_size]`` of a 3-D or 4-D operand."""
    shape = t.shape
    assert shape is not None
    if len(shape) == 4:
        return tuple(shape)
    if len(shape) != 3:
        raise ShapeError(f"Attention: {what} must be 3-D or 4-D, got rank {len(shape)}")
    if heads is None:
        raise ShapeError(f"Attention: a 3-D {what} needs q_num_heads and kv_num_heads")
    return shape[0], heads, shape[1], dim_op(lambda h: h // heads, shape[2])


def _attn_infer(types: Types, _c: object, call: Call) -> list[TensorType]:
    q, k, v = (need(at(types, i), "Attention", n) for i, n in enumerate(("Q", "K", "V")))
    if q.shape is None or k.shape is None or v.shape is None:
        return [TensorType(q.dtype, None)] * max(1, call.num_outputs)
    qh = call.attrs.get("q_num_heads")
    kvh = call.attrs.get("kv_num_heads")
    q4 = _heads_4d(q, qh, "Q")  # type: ignore[arg-type]
    k4 = _heads_4d(k, kvh, "K")  # type: ignore[arg-type]
    v4 = _heads_4d(v, kvh, "V")  # type: ignore[arg-type]
    past = at(types, 4)
    total = k4[2]
    if past is not None and past.shape is not None:
        total = dim_op(lambda a, b: a + b, past.shape[2], k4[2])
    if len(q.shape) == 4:
        y = TensorType(q.dtype, (q4[0], q4[1], q4[2], v4[3]))
    else:
        y = TensorType(q.dtype, (q.shape[0], q.shape[1], dim_op(lambda a, b: a * b, q4[1],
                                                                  v4[3])))
    outs = [y, TensorType(k.dtype, (k4[0], k4[1], total, k4[3])),
            TensorType(v.dtype, (v4[0], v4[1], total, v4[3])),
            TensorType(q.dtype, (q4[0], q4[1], q4[2], total))]
    return outs[: max(1, call.num_outputs)]


def _to_4d(x: np.ndarray, heads: int | None) -> np.ndarray:
    if x.ndim == 4:
        return x
    if heads is None:
        raise ShapeError("Attention: 3-D inputs need q_num_heads and kv_num_heads")
    b, s, hidden = x.shape
    return x.reshape(b, s, heads, hidden // heads).transpose(0, 2, 1, 3)


def _bias(q_len: int, kv_len: int, mask: np.ndarray | None, causal: bool,
          offset: np.ndarray, windows: tuple[int, int],
          nonpad: np.ndarray | None) -> np.ndarray:
    """The additive float32 bias (0 or -inf, plus a float mask) broadcastable to scores."""
    bias = np.zeros((q_len, kv_len), dtype=np.float32)
    if mask is not None:
        pad = kv_len - mask.shape[-1]
        if mask.dtype == np.bool_:
            mask = np.where(mask, np.float32(0), np.float32(-np.inf))
        mask = mask.astype(np.float32)
        if pad > 0:
            mask = np.pad(mask, [(0, 0)] * (mask.ndim - 1) + [(0, pad)],
                          constant_values=-np.inf)
        bias = bias + mask
    i = np.arange(q_len).reshape(q_len, 1)
    j = np.arange(kv_len).reshape(1, kv_len)
    off = offset.reshape(-1, 1, 1, 1) if offset.ndim else offset  # per batch or one
    diff = i + off - j  # how far key j lies behind query i
    allowed = np.ones(np.shape(diff), dtype=bool)
    if causal:
        allowed &= diff >= 0
    left, right = windows
    if left >= 0:
        allowed &= diff <= left
    if right >= 0:
        allowed &= -diff <= right
    bias = bias + np.where(allowed, np.float32(0), np.float32(-np.inf))
    if nonpad is not None:
        keep = j.reshape(1, 1, 1, kv_len) < nonpad.reshape(-1, 1, 1, 1)
        bias = bias + np.where(keep, np.float32(0), np.float32(-np.inf))
    return bias


def _attn_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    q_in, k_in, v_in = (need(at(inputs, i), "Attention") for i in range(3))
    mask, past_k, past_v, nonpad = (at(inputs, i) for i in range(3, 7))
    if (past_k is None) != (past_v is None):
        raise ShapeError("Attention: past_key and past_value go together")
    dt = q_in.dtype
    work = np.float64 if dt == np.float64 else np.float32
    qh, kvh = call.attrs.get("q_num_heads"), call.attrs.get("kv_num_heads")
    q = _to_4d(q_in, qh).astype(work)  # type: ignore[arg-type]
    k = _to_4d(k_in, kvh).astype(work)  # type: ignore[arg-type]
    v = _to_4d(v_in, kvh).astype(work)  # type: ignore[arg-type]
    if past_k is not None and past_v is not None:
        k = np.concatenate([past_k.astype(work), k], axis=2)
        v = np.concatenate([past_v.astype(work), v], axis=2)
    present_k, present_v = k.astype(k_in.dtype), v.astype(v_in.dtype)
    scale = call.attrs.get("scale")
    s = 1 / np.sqrt(q.shape[3]) if scale is None else float(scale)  # type: ignore[arg-type]
    root = work(np.sqrt(s)).astype(dt).astype(work)
    q_len, kv_len = q.shape[2], k.shape[2]
    if nonpad is not None and past_k is None:
        offset = nonpad.astype(np.int64) - q_len
    else:
        offset = np.asarray(0 if past_k is None else past_k.shape[2])
    bias = _bias(q_len, kv_len, mask, bool(iattr(call, "is_causal")), offset,
                 (iattr(call, "left_window_size", -1), iattr(call, "right_window_size", -1)),
                 nonpad)
    if q.shape[1] != k.shape[1]:
        if q.shape[1] % k.shape[1]:
            raise ShapeError(f"Attention: {q.shape[1]} query heads do not group over "
                             f"{k.shape[1]} key/value heads")
        reps = q.shape[1] // k.shape[1]
        k, v = np.repeat(k, reps, axis=1), np.repeat(v, reps, axis=1)

    def rnd(x: np.ndarray) -> np.ndarray:
        """``x`` rounded to the operands' dtype when the math runs wider."""
        return x.astype(dt).astype(work) if dt != work else x

    with np.errstate(all="ignore"):
        scores = rnd(rnd(q * root) @ np.swapaxes(rnd(k * root), -1, -2))
        raw = scores
        cap = fattr(call, "softcap", 0.0)
        if cap > 0:
            scores = rnd(cap * np.tanh(scores / cap))
        biased = scores + bias
        top = np.max(biased, axis=-1, keepdims=True)
        dead = np.isneginf(np.max(bias, axis=-1, keepdims=True))
        e = np.exp(biased - np.where(np.isneginf(top), 0, top))
        total = np.sum(e, axis=-1, keepdims=True)
        probs = np.where(dead, 0, e / np.where(total == 0, 1, total))
        y = rnd(probs) @ v
    mode = iattr(call, "qk_matmul_output_mode")
    qk = (raw, scores, biased, probs)[mode] if 0 <= mode <= 3 else raw
    if q_in.ndim == 3:
        y = y.transpose(0, 2, 1, 3).reshape(y.shape[0], y.shape[2], -1)
    qk = np.broadcast_to(qk, (q.shape[0], q.shape[1], q_len, kv_len))
    return [y.astype(dt), present_k, present_v, qk.astype(dt)][: max(1, call.num_outputs)]


def _attn_flops(ins: Types, outs: Sequence[TensorType], call: Call) -> int:
    y = outs[0] if outs else None
    k = at(ins, 1)
    kv = k.shape[-2] if k is not None and k.shape and isinstance(k.shape[-2], int) else 1
    d = k.shape[-1] if k is not None and k.shape and isinstance(k.shape[-1], int) else 1
    return numel_of(y) * kv * 4 + numel_of(y) // max(d, 1) * kv * 6


# ----------------------------------------------------------------------------- RoPE


def _rope_infer(types: Types, _c: object, call: Call) -> list[TensorType]:
    return [need(at(types, 0), "RotaryEmbedding")]


def _rope_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    """Rotate the first ``rotary_embedding_dim`` features of each head by cos/sin caches."""
    x, cos, sin = (need(at(inputs, i), "RotaryEmbedding") for i in range(3))
    pos = at(inputs, 3)
    dt = x.dtype
    x4 = x
    if x.ndim == 3:  # [batch, seq, hidden] -> [batch, seq, heads, head]
        heads = iattr(call, "num_heads")
        if heads <= 0:
            raise ShapeError("RotaryEmbedding: a 3-D input needs num_heads")
        x4 = x.reshape(x.shape[0], x.shape[1], heads, -1)
    else:  # [batch, heads, seq, head] -> [batch, seq, heads, head]
        x4 = x.transpose(0, 2, 1, 3)
    if pos is not None:
        cos, sin = cos[pos], sin[pos]  # [batch, seq, dim/2]
    rot = iattr(call, "rotary_embedding_dim") or x4.shape[-1]
    xr, rest = x4[..., :rot].astype(np.float32), x4[..., rot:]
    cos = cos[..., : rot // 2].astype(np.float32)[:, :, None, :]
    sin = sin[..., : rot // 2].astype(np.float32)[:, :, None, :]
    if iattr(call, "interleaved"):
        a, b = xr[..., 0::2], xr[..., 1::2]
    else:
        a, b = xr[..., : rot // 2], xr[..., rot // 2:]
    ra, rb = a * cos - b * sin, b * cos + a * sin
    if iattr(call, "interleaved"):
        out = np.stack([ra, rb], axis=-1).reshape(xr.shape)
    else:
        out = np.concatenate([ra, rb], axis=-1)
    y = np.concatenate([out.astype(dt), rest], axis=-1)
    y = y.reshape(x.shape) if x.ndim == 3 else y.transpose(0, 2, 1, 3)
    return [np.ascontiguousarray(y)]


# ----------------------------------------------------------------------------- FlexAttention


def _flex_infer(types: Types, _c: object, call: Call) -> list[TensorType]:
    q, v = need(at(types, 0), "FlexAttention"), need(at(types, 2), "FlexAttention", "V")
    if q.shape is None or v.shape is None:
        return [TensorType(v.dtype, None)]
    return [TensorType(v.dtype, (*q.shape[:3], v.shape[3]))]


def _flex_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    """softmax(score_mod(Q K^T * scale)) -> prob_mod -> @ V, in float32 (float64 kept)."""
    from .control import run_body

    q, k, v = (need(at(inputs, i), "FlexAttention") for i in range(3))
    if q.ndim != 4 or k.ndim != 4 or v.ndim != 4:
        raise ShapeError("FlexAttention needs rank-4 Q, K and V")
    precision = iattr(call, "softmax_precision")
    work = (dtypes.to_numpy(dtypes.from_onnx(precision)) if precision
            else np.dtype(np.float64 if q.dtype == np.float64 else np.float32))
    if q.shape[1] != k.shape[1]:
        if q.shape[1] % k.shape[1]:
            raise ShapeError("FlexAttention: query heads must be a multiple of key heads")
        k, v = (np.repeat(t, q.shape[1] // k.shape[1], axis=1) for t in (k, v))
    scale = call.attrs.get("scale")
    s = 1 / np.sqrt(q.shape[3]) if scale is None else float(scale)  # type: ignore[arg-type]
    root = np.asarray(np.sqrt(np.float32(s))).astype(q.dtype)
    scores = np.matmul(q * root, np.swapaxes(k * root, -1, -2)).astype(work)
    names, captured = captures(call.attrs), list(inputs[3:])
    for attr_name in ("score_mod",):
        mod = call.attrs.get(attr_name)
        if isinstance(mod, Graph):
            scores = run_body(mod, [scores], names, captured)[0].astype(work)
    with np.errstate(all="ignore"):
        e = np.exp(scores - scores.max(axis=-1, keepdims=True))
        probs = e / e.sum(axis=-1, keepdims=True)
    mod = call.attrs.get("prob_mod")
    if isinstance(mod, Graph):
        probs = run_body(mod, [probs], names, captured)[0].astype(work)
    return [np.matmul(probs, v.astype(work)).astype(v.dtype)]


def _attention(since: int, ports: str, attrs: Sequence[AttrSpec]) -> OpSchema:
    return schema("Attention", since, ports, "Y present_key? present_value? qk_matmul_output?",
                  _attn_infer, _attn_kernel, attrs=attrs, unit="cube", flops=_attn_flops,
                  doc="scaled dot-product attention with masks, KV cache, GQA and softcap")


_PORTS23 = "Q K V attn_mask? past_key? past_value?"
SCHEMAS = [
    _attention(23, _PORTS23, ATTN_ATTRS),
    _attention(24, _PORTS23 + " nonpad_kv_seqlen?", ATTN_ATTRS),
    _attention(25, _PORTS23 + " nonpad_kv_seqlen?", ATTN_ATTRS + WINDOW_ATTRS),
    schema("FlexAttention", 1, "Q K V captures?*", "Y", _flex_infer, _flex_kernel,
           domain="ai.onnx.preview", unit="cube", widen_low=False,
           attrs=[attr("prob_mod", "graph"), attr("scale", "float"),
                  attr("score_mod", "graph"), attr("softmax_precision", "int")],
           doc="attention whose scores and probabilities pass through subgraphs"),
    schema("RotaryEmbedding", 23, "X cos_cache sin_cache position_ids?", "Y", _rope_infer,
           _rope_kernel, attrs=[attr("interleaved", "int", 0), attr("num_heads", "int", 0),
                                attr("rotary_embedding_dim", "int", 0)],
           doc="rotary position embedding of each head's first rotary_embedding_dim features"),
]
