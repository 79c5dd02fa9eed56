"""Pooling (ai.onnx): MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool.

Invariants:
- Windows follow ``_window`` (pads, ``auto_pad``, dilations, ``ceil_mode``); the kernels loop
  over kernel taps only, each tap one strided slice of the padded input.
- MaxPool pads with ``-inf`` (the dtype's minimum for integers), so pads never win; without
  ``Indices`` it takes the (separable) box maximum one spatial axis at a time, pads never
  materialised (``pool_blocked.max_pool_into``, which the NC1HWC0 kernel shares); its
  optional ``Indices`` output holds the flat index of the first maximum in the unpadded
  input (row-major, or column-major over the spatial dims with ``storage_order=1``).
- AveragePool divides by the taps that land on the input, or, with
  ``count_include_pad=1``, on the input or its explicit pads (never the extra cells that
  ``ceil_mode`` adds).
- On NC1HWC0 inputs MaxPool (without ``Indices``) and GlobalAveragePool compute on the
  blocks (``pool_blocked``: their format rule's ``direct`` kernels, which is why these two
  have a ``kernel_out``); the other pools convert.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import numpy as np

from ...errors import ShapeError
from ..graph import TensorType
from ..layout import POOL, DirectFn
from ..registry import AttrSpec, Call, FlopsFn, InferFn, KernelFn, KernelOutFn, OpSchema
from ._common import Arrays, Types, at, attr, copied_out, iattr, lattr, need, prod, schema, widen
from ._window import Window, kernel_of, out_shape, pad_for, taps, window, window_counts
from .pool_blocked import global_average_pool_blocked, lowest, max_pool_blocked, max_pool_into

POOL_ATTRS = [
    attr("auto_pad", "string", "NOTSET"),
    attr("ceil_mode", "int", 0),
    attr("dilations", "ints"),
    attr("kernel_shape", "ints", required=True),
    attr("pads", "ints"),
    attr("strides", "ints"),
]


def _pool_infer(op: str) -> InferFn:
    def infer(types: Types, _c: object, call: Call) -> list[TensorType]:
        x = need(at(types, 0), op)
        if x.shape is None:
            return [TensorType(x.dtype, None)] * max(1, call.num_outputs)
        if len(x.shape) < 3:
            raise ShapeError(f"{op}: input rank {len(x.shape)} has no spatial dims")
        kernel = kernel_of(call.attrs, None, len(x.shape) - 2)
        sp = out_shape(x.shape[2:], kernel, call.attrs, bool(call.attrs.get("ceil_mode", 0)))
        y = TensorType(x.dtype, (*x.shape[:2], *sp))
        return [y, TensorType("int64", y.shape)][: max(1, call.num_outputs)]

    return infer


def _geometry(x: np.ndarray, call: Call) -> Window:
    kernel = kernel_of(call.attrs, None, x.ndim - 2)
    return window(x.shape[2:], kernel, call.attrs, bool(call.attrs.get("ceil_mode", 0)))


def _max_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    x = need(at(inputs, 0), "MaxPool")
    win = _geometry(x, call)
    if call.num_outputs < 2:  # a box max is separable: one axis at a time
        y = np.empty((*x.shape[:2], *win.out), x.dtype)
        max_pool_into(x, win, y)
        return [y]
    xp = pad_for(x, win, lowest(x.dtype))
    views = [xp[(slice(None), slice(None), *sl)] for sl in taps(win)]
    y = views[0].copy()
    best_tap = np.zeros(y.shape, dtype=np.int64)
    for t, part in enumerate(views[1:], start=1):
        best_tap[part > y] = t
        np.maximum(y, part, out=y)
    order = iattr(call, "storage_order")
    return [y, _indices(best_tap, x.shape, win, order)]


def _max_kernel_out(inputs: Arrays, call: Call, outs: Sequence[np.ndarray]) -> None:
    if len(outs) > 1:
        copied_out(_max_kernel)(inputs, call, outs)
        return
    x = need(at(inputs, 0), "MaxPool")
    max_pool_into(x, _geometry(x, call), outs[0])


def _indices(best_tap: np.ndarray, shape: Sequence[int], win: Window,
             order: int) -> np.ndarray:
    """Flat input index of each window's winning tap."""
    offsets = np.array(np.unravel_index(best_tap, win.kernel))  # [n_sp, *out_shape]
    sp = shape[2:]
    flat = np.zeros(best_tap.shape, dtype=np.int64)
    strides = [prod(sp[i + 1:]) for i in range(len(sp))]
    if order == 1:
        strides = [prod(sp[:i]) for i in range(len(sp))]
    for i in range(len(sp)):
        start = np.arange(win.out[i]) * win.strides[i] - win.begin[i]
        bshape = [1] * best_tap.ndim
        bshape[2 + i] = win.out[i]
        pos = start.reshape(bshape) + offsets[i] * win.dilations[i]
        flat += pos * strides[i]
    nc = np.arange(shape[0] * shape[1], dtype=np.int64).reshape(shape[0], shape[1])
    return flat + (nc * prod(sp)).reshape(shape[0], shape[1], *([1] * len(sp)))


def _avg_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    x = need(at(inputs, 0), "AveragePool")
    win = _geometry(x, call)
    xw = widen(x)
    xp = pad_for(xw, win, 0)
    total = np.zeros((*x.shape[:2], *win.out), dtype=xw.dtype)
    for sl in taps(win):
        total += xp[(slice(None), slice(None), *sl)]
    include = bool(call.attrs.get("count_include_pad", 0))
    count = np.ones((1, 1), dtype=xw.dtype)
    for i in range(len(win.kernel)):
        c = window_counts(x.shape[2 + i], win, i, include).astype(xw.dtype)
        count = count[..., None] * c
    with np.errstate(all="ignore"):
        return [(total / count).astype(x.dtype, copy=False)]


def _lp_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    """``(sum of |x|^p over each window) ^ (1 / p)``, zero padding."""
    x = need(at(inputs, 0), "LpPool")
    win = _geometry(x, call)
    p = float(call.attrs.get("p", 2))  # type: ignore[arg-type]
    xp = pad_for(np.abs(widen(x)) ** p, win, 0)
    total = np.zeros((*x.shape[:2], *win.out), dtype=xp.dtype)
    for sl in taps(win):
        total += xp[(slice(None), slice(None), *sl)]
    return [(total ** (1 / p)).astype(x.dtype, copy=False)]


def _global_infer(op: str) -> InferFn:
    def infer(types: Types, _c: object, call: Call) -> list[TensorType]:
        x = need(at(types, 0), op)
        if x.shape is None:
            return [x]
        if len(x.shape) < 3:
            raise ShapeError(f"{op}: input rank {len(x.shape)} has no spatial dims")
        return [TensorType(x.dtype, (*x.shape[:2], *([1] * (len(x.shape) - 2))))]

    return infer


def _global(fn: Callable[..., np.ndarray]) -> KernelFn:
    def kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
        x = need(at(inputs, 0), "GlobalPool")
        axes = tuple(range(2, x.ndim))
        return [np.asarray(fn(widen(x), axis=axes, keepdims=True)).astype(x.dtype)]

    return kernel


def _pool_flops(ins: Types, outs: Sequence[TensorType], call: Call) -> int:
    return (outs[0].numel() or 0) * prod(lattr(call, "kernel_shape") or [1])


def _in_flops(ins: Types, outs: Sequence[TensorType], call: Call) -> int:
    x = at(ins, 0)
    return 0 if x is None else (x.numel() or 0)


def _build(op: str, since: int, infer: InferFn, kernel: KernelFn, extra: list[AttrSpec],
           outputs: str, flops: FlopsFn, doc: str, direct: DirectFn | None = None,
           kernel_out: KernelOutFn | None = None) -> OpSchema:
    """A pooling schema; one with a ``direct`` kernel for NC1HWC0 inputs has a
    ``kernel_out`` too (the kernel's outputs copied when none is given), so the direct
    kernel writes into the runtime's arena."""
    if direct is not None and kernel_out is None:
        kernel_out = copied_out(kernel)
    return schema(op, since, "X", outputs, infer, kernel, attrs=extra, flops=flops, doc=doc,
                  formats=dataclasses.replace(POOL, direct=direct), kernel_out=kernel_out)


SCHEMAS = [
    _build("MaxPool", 1, _pool_infer("MaxPool"), _max_kernel,
           [*POOL_ATTRS, attr("storage_order", "int", 0)], "Y Indices?", _pool_flops,
           "max over sliding windows (dilations, ceil_mode, auto_pad; optional Indices)",
           max_pool_blocked, _max_kernel_out),
    _build("AveragePool", 1, _pool_infer("AveragePool"), _avg_kernel,
           [*POOL_ATTRS, attr("count_include_pad", "int", 0)], "Y", _pool_flops,
           "mean over sliding windows (count_include_pad, ceil_mode, dilations)"),
    _build("LpPool", 2, _pool_infer("LpPool"), _lp_kernel, [*POOL_ATTRS, attr("p", "int", 2)],
           "Y", _pool_flops, "Lp norm over sliding windows"),
    _build("GlobalAveragePool", 1, _global_infer("GlobalAveragePool"), _global(np.mean), [],
           "Y", _in_flops, "mean over all spatial dims, kept as size 1",
           global_average_pool_blocked),
    _build("GlobalMaxPool", 1, _global_infer("GlobalMaxPool"), _global(np.max), [],
           "Y", _in_flops, "max over all spatial dims, kept as size 1"),
]
