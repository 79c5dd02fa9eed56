"""Conv and ConvTranspose (ai.onnx), with the kernels the fused ``ge.FusedConv`` reuses.

Invariants:
- ``conv(x, w, b, attrs, out=None)`` is the one convolution: im2col through an
  ``as_strided`` view of the padded input (itself in scratch: only its border is written)
  copied into the thread's scratch buffer, then one BLAS matmul for all
  groups written straight into ``out`` (the runtime's arena view) when given; 1x1 stride-1
  convs skip the copy (a plain matmul); depthwise convs accumulate one strided slice per
  kernel tap (no loop over pixels). The bias is added in place.
- Arithmetic stays in the input dtype (float32 accumulates in float32); float16 runs in
  float32 and is rounded once.
- ConvTranspose scatters ``W^T @ X`` back with one strided add per kernel tap, then crops
  the pads; ``output_shape`` overrides pads as the spec says (SAME_UPPER puts the odd pad
  at the end, otherwise at the beginning).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ...errors import KernelError, ShapeError
from ..graph import Dim, TensorType
from ..registry import Call
from ._common import (
    Arrays,
    PerOwner,
    Types,
    at,
    attr,
    ints,
    need,
    prod,
    same_dtype,
    schema,
    scratch,
)
from ._window import Window, kernel_of, out_shape, pad_for, taps, window

CONV_ATTRS = [
    attr("auto_pad", "string", "NOTSET"),
    attr("dilations", "ints"),
    attr("group", "int", 1),
    attr("kernel_shape", "ints"),
    attr("pads", "ints"),
    attr("strides", "ints"),
]


# ----------------------------------------------------------------------------- Conv


def conv_infer(x: TensorType, w: TensorType, attrs: Mapping[str, Any], op: str) -> TensorType:
    """The output type of a convolution of ``x`` by ``w`` (shared with ge.FusedConv)."""
    dtype = same_dtype([x, w], op)
    if x.shape is None or w.shape is None:
        return TensorType(dtype, None)
    if len(x.shape) < 3 or len(w.shape) != len(x.shape):
        raise ShapeError(f"{op}: input rank {len(x.shape)} and weight rank {len(w.shape)} "
                         "do not fit (need N,C,spatial... and M,C/group,kernel...)")
    group = int(attrs.get("group", 1))
    c, cg = x.shape[1], w.shape[1]
    if isinstance(c, int) and isinstance(cg, int) and c != cg * group:
        raise ShapeError(f"{op}: input has {c} channels but weight expects {cg} x group "
                         f"{group} = {cg * group}")
    m = w.shape[0]
    if isinstance(m, int) and m % group:
        raise ShapeError(f"{op}: {m} output channels do not split into {group} groups")
    kernel = kernel_of(attrs, w.shape, len(x.shape) - 2)
    return TensorType(dtype, (x.shape[0], m, *out_shape(x.shape[2:], kernel, attrs)))


def conv_flops(ins: Types, outs: Sequence[TensorType], call: Call) -> int:
    w, y = need(at(ins, 1), "Conv"), outs[0]
    macs = (y.numel() or 0) * prod(int(d) for d in (w.shape or ())[1:])
    return 2 * macs + (y.numel() or 0) * (at(ins, 2) is not None)


# a call's geometry per attribute mapping and operand shapes (the runtime's steps keep theirs)
_WINDOWS: PerOwner[Window] = PerOwner()
PADDED = 1  # the scratch slot of the padded input (im2col's patches and depthwise's term: 0)


def _im2col(xp: np.ndarray, win: Any) -> np.ndarray:
    """``[N, C, *kernel, *out]`` patches of the padded input (one copy, into scratch)."""
    n_sp = len(win.kernel)
    st = xp.strides
    shape = (*xp.shape[:2], *win.kernel, *win.out)
    strides = (st[0], st[1], *(st[2 + i] * win.dilations[i] for i in range(n_sp)),
               *(st[2 + i] * win.strides[i] for i in range(n_sp)))
    view = np.lib.stride_tricks.as_strided(xp, shape, strides, writeable=False)
    cols = scratch(shape, xp.dtype)
    np.copyto(cols, view)
    return cols


def _depthwise(xp: np.ndarray, w: np.ndarray, win: Any, y: np.ndarray) -> np.ndarray:
    """Grouped conv with one input channel per group into ``y``: one strided add per tap."""
    mult = w.shape[0] // xp.shape[1]
    if mult > 1:
        xp = np.repeat(xp, mult, axis=1)
    wf = w.reshape(w.shape[0], -1)
    bshape = (1, w.shape[0]) + (1,) * len(win.kernel)
    term = scratch(y.shape, y.dtype)
    for t, sl in enumerate(taps(win)):
        src = xp[(slice(None), slice(None), *sl)]
        if t == 0:
            np.multiply(src, wf[:, t].reshape(bshape), out=y)
        else:
            np.multiply(src, wf[:, t].reshape(bshape), out=term)
            y += term
    return y


def _taps_pay(win: Any) -> bool:
    """Depthwise by strided adds beats im2col + batched matmul only for stride 1 on big maps
    (strided slices make the elementwise loops slow; small maps favour one matmul call)."""
    return all(s == 1 for s in win.strides) and prod(win.out) >= 256


def _is_pointwise(win: Any) -> bool:
    return (all(k == 1 for k in win.kernel) and all(s == 1 for s in win.strides)
            and not any(win.begin) and not any(win.end))


def conv(x: np.ndarray, w: np.ndarray, b: np.ndarray | None, attrs: Mapping[str, Any],
         out: np.ndarray | None = None) -> np.ndarray:
    """N-d grouped convolution ``[N, C, *sp] * [M, C/g, *k] (+ b)`` in x's dtype, written
    into ``out`` when given (it must have the result's shape and dtype)."""
    dtype = x.dtype
    if dtype == np.float16:
        x, w = x.astype(np.float32), w.astype(np.float32)
        b = None if b is None else b.astype(np.float32)
        if out is not None:
            out[...] = conv(x, w, b, attrs)
            return out
    group = int(attrs.get("group", 1))
    win = _WINDOWS.get(attrs, (x.shape, w.shape), lambda: window(
        x.shape[2:], kernel_of(attrs, w.shape, x.ndim - 2), attrs))
    if tuple(w.shape[2:]) != win.kernel:
        raise KernelError(f"Conv: kernel_shape {list(win.kernel)} differs from weight "
                          f"{list(w.shape)}")
    if x.shape[1] != w.shape[1] * group:
        raise KernelError(f"Conv: input has {x.shape[1]} channels, weight expects "
                          f"{w.shape[1] * group}")
    w = w.astype(x.dtype, copy=False)
    if out is None:
        out = np.empty((x.shape[0], w.shape[0], *win.out), x.dtype)
    y = _conv_core(x, w, group, win, out)
    if b is not None:
        y += b.astype(y.dtype, copy=False).reshape((1, -1) + (1,) * (y.ndim - 2))
    return y.astype(dtype, copy=False)


def _conv_core(x: np.ndarray, w: np.ndarray, group: int, win: Any, y: np.ndarray
               ) -> np.ndarray:
    n, c = x.shape[:2]
    m = w.shape[0]
    if group == c and w.shape[1] == 1 and group > 1 and _taps_pay(win):
        return _depthwise(pad_for(x, win, slot=PADDED), w, win, y)
    if _is_pointwise(win):
        cols = x.reshape(n, group, c // group, -1)
    else:
        cols = _im2col(pad_for(x, win, slot=PADDED), win).reshape(n, group, -1, prod(win.out))
    wg = w.reshape(group, m // group, -1)
    if n == 1 and group == 1:  # one plain BLAS call: [M, K] @ [K, P] -> [M, P]
        np.matmul(wg[0], cols[0, 0], out=y.reshape(m, -1))
    else:  # [g, M/g, K] @ [N, g, K, P] -> [N, g, M/g, P]
        np.matmul(wg, cols, out=y.reshape(n, group, m // group, -1))
    return y


def _conv_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    x, w = need(at(inputs, 0), "Conv", "X"), need(at(inputs, 1), "Conv", "W")
    return [conv(x, w, at(inputs, 2), call.attrs)]


def _conv_out(inputs: Arrays, call: Call, outs: Sequence[np.ndarray]) -> None:
    x, w = need(at(inputs, 0), "Conv", "X"), need(at(inputs, 1), "Conv", "W")
    conv(x, w, at(inputs, 2), call.attrs, outs[0])


def _conv_infer_node(types: Types, _c: object, call: Call) -> list[TensorType]:
    x, w = need(at(types, 0), "Conv", "X"), need(at(types, 1), "Conv", "W")
    return [conv_infer(x, w, call.attrs, "Conv")]


# ----------------------------------------------------------------------------- ConvTranspose


def _transpose_geometry(spatial: Sequence[int], kernel: Sequence[int],
                        attrs: Mapping[str, Any]) -> tuple[list[int], list[int], list[int]]:
    """(output size, begin pads, end pads) of a transposed conv on static dims."""
    n = len(spatial)
    s = ints(attrs.get("strides") or [1] * n)
    d = ints(attrs.get("dilations") or [1] * n)
    op = ints(attrs.get("output_padding") or [0] * n)
    full = [s[i] * (spatial[i] - 1) + op[i] + (kernel[i] - 1) * d[i] + 1 for i in range(n)]
    mode = str(attrs.get("auto_pad", "NOTSET"))
    wanted = attrs.get("output_shape")
    if wanted is None and mode in ("SAME_UPPER", "SAME_LOWER"):
        wanted = [spatial[i] * s[i] for i in range(n)]
    if wanted is not None:
        out = ints(wanted)[-n:]
        total = [full[i] - out[i] for i in range(n)]
        upper = mode == "SAME_UPPER"
        pb = [t // 2 if upper else t - t // 2 for t in total]
        return out, pb, [t - b for t, b in zip(total, pb, strict=True)]
    pads = ints(attrs.get("pads") or [0] * (2 * n))
    if mode == "VALID":
        pads = [0] * (2 * n)
    out = [full[i] - pads[i] - pads[n + i] for i in range(n)]
    return out, pads[:n], pads[n:]


def _transpose_dims(spatial: Sequence[Dim], kernel: Sequence[int],
                    attrs: Mapping[str, Any]) -> list[Dim]:
    if all(isinstance(d, int) for d in spatial):
        return list(_transpose_geometry(spatial, kernel, attrs)[0])  # type: ignore[arg-type]
    if attrs.get("output_shape") is not None:
        return list(ints(attrs["output_shape"])[-len(spatial):])
    return ["?"] * len(spatial)


def _ct_infer(types: Types, _c: object, call: Call) -> list[TensorType]:
    x, w = need(at(types, 0), "ConvTranspose", "X"), need(at(types, 1), "ConvTranspose", "W")
    dtype = same_dtype([x, w], "ConvTranspose")
    if x.shape is None or w.shape is None:
        return [TensorType(dtype, None)]
    group = int(call.attrs.get("group", 1))  # type: ignore[arg-type]
    if isinstance(x.shape[1], int) and isinstance(w.shape[0], int) and x.shape[1] != w.shape[0]:
        raise ShapeError(f"ConvTranspose: input has {x.shape[1]} channels, weight "
                         f"{w.shape[0]}")
    m = w.shape[1] * group if isinstance(w.shape[1], int) else "?"
    kernel = kernel_of(call.attrs, w.shape, len(x.shape) - 2)
    return [TensorType(dtype, (x.shape[0], m, *_transpose_dims(x.shape[2:], kernel,
                                                                 call.attrs)))]


def conv_transpose(x: np.ndarray, w: np.ndarray, b: np.ndarray | None,
                   attrs: Mapping[str, Any]) -> np.ndarray:
    dtype = x.dtype
    xw = x.astype(np.float32) if dtype == np.float16 else x
    n, c = x.shape[:2]
    group = int(attrs.get("group", 1))
    kernel = tuple(w.shape[2:])
    sp = x.shape[2:]
    ns = len(sp)
    s = ints(attrs.get("strides") or [1] * ns)
    d = ints(attrs.get("dilations") or [1] * ns)
    mg = w.shape[1]
    wt = w.astype(xw.dtype).reshape(group, c // group, mg * prod(kernel)).transpose(0, 2, 1)
    cols = np.matmul(wt, xw.reshape(n, group, c // group, prod(sp)))
    cols = cols.reshape(n, group * mg, *kernel, *sp)
    full_shape = [(sp[i] - 1) * s[i] + (kernel[i] - 1) * d[i] + 1 for i in range(ns)]
    full = np.zeros((n, group * mg, *full_shape), dtype=xw.dtype)
    for offset in itertools.product(*(range(k) for k in kernel)):
        sl = tuple(slice(o * d[i], o * d[i] + (sp[i] - 1) * s[i] + 1, s[i])
                   for i, o in enumerate(offset))
        full[(slice(None), slice(None), *sl)] += cols[(slice(None), slice(None), *offset)]
    out, pb, _ = _transpose_geometry(sp, kernel, attrs)
    y = _crop(full, out, pb)
    if b is not None:
        y = y + b.astype(y.dtype).reshape((1, -1) + (1,) * ns)
    return y.astype(dtype, copy=False)


def _crop(full: np.ndarray, out: Sequence[int], begin: Sequence[int]) -> np.ndarray:
    """``full[..., begin:begin+out]`` per spatial axis, zero-filled where it runs outside."""
    widths = [(0, 0), (0, 0)]
    for i, (o, pb) in enumerate(zip(out, begin, strict=True)):
        size = full.shape[2 + i]
        widths.append((max(0, -pb), max(0, pb + o - size)))
    if any(a or b for a, b in widths):
        full = np.pad(full, widths)
    sl = tuple(slice(max(pb, 0), max(pb, 0) + o) for o, pb in zip(out, begin, strict=True))
    return full[(slice(None), slice(None), *sl)]


def _ct_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    x, w = need(at(inputs, 0), "ConvTranspose"), need(at(inputs, 1), "ConvTranspose", "W")
    return [conv_transpose(x, w, at(inputs, 2), call.attrs)]


def _ct_flops(ins: Types, outs: Sequence[TensorType], call: Call) -> int:
    x, w = need(at(ins, 0), "ConvTranspose"), need(at(ins, 1), "ConvTranspose", "W")
    return 2 * (x.numel() or 0) * prod(int(d) for d in (w.shape or ())[1:])


SCHEMAS = [
    schema("Conv", 1, "X W B?", "Y", _conv_infer_node, _conv_kernel, attrs=CONV_ATTRS,
           unit="cube", flops=conv_flops, kernel_out=_conv_out,
           doc="N-d grouped convolution with strides, dilations, pads or auto_pad"),
    schema("ConvTranspose", 1, "X W B?", "Y", _ct_infer, _ct_kernel,
           attrs=[*CONV_ATTRS, attr("output_padding", "ints"), attr("output_shape", "ints")],
           unit="cube", flops=_ct_flops,
           doc="N-d transposed (fractionally strided) grouped convolution"),
]
