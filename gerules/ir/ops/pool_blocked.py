"""MaxPool and GlobalAveragePool computed on NC1HWC0 activations directly.

The converting path (``ir.layout``) moves an NC1HWC0 input to NCHW element by element,
pools and moves the result back. Pooling never mixes channels, so it runs on the blocks as
they are: every C0 lane is a channel, pooled alongside the others.

Invariants:
- Only what the converting path computes: MaxPool is exact (a maximum is the same in any
  order); GlobalAveragePool is the mean over H and W (float16 in float32, cast back) up to
  the order of the sum.
- Padding lanes of the input never reach a channel's value (lanes are independent) and the
  output's padding lanes come out zero.
- MaxPool (2-D, one output: no ``Indices``) is separable: the max over the kernel's rows
  into a scratch array [N, C1, Ho, W, C0] (each tap a strided view of whole rows), then over
  its columns into the output (``max_pool_into``: the plain MaxPool's kernel too). Pads
  are never materialised: each tap reads only the outputs whose window it meets inside
  the input (a tap that meets every output is copied first; the lowest value of the dtype
  stands in for pads otherwise, as in ``pool``).
- Declines (returns ``None``, the converting path runs) other formats, other ranks and
  calls with the ``Indices`` output.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .. import formats as F
from ..registry import Call
from ._common import Arrays, at, scratch, widen
from ._window import Window, kernel_of, window


def lowest(dtype: np.dtype) -> float | int:
    """What pads hold for a max: ``-inf``, or the minimum of an integer dtype."""
    return -np.inf if dtype.kind == "f" else np.iinfo(dtype).min


def _blocked_input(inputs: Arrays, call: Call) -> tuple[np.ndarray, int] | None:
    """The NC1HWC0 input and its logical channel count, or ``None`` (declined)."""
    x, tx = at(inputs, 0), at(call.types, 0)
    if (x is None or tx is None or tx.format != F.NC1HWC0 or tx.shape is None or x.ndim != 5
            or len(tx.shape) != 4 or call.num_outputs > 1):
        return None
    return x, int(tx.shape[1])


def _into(outs: Sequence[np.ndarray], shape: tuple[int, ...], dtype: np.dtype
          ) -> np.ndarray | None:
    """``outs[0]`` when it fits, a fresh array when there is none, else ``None``."""
    if not outs:
        return np.empty(shape, dtype)
    if outs[0].shape != shape or outs[0].dtype != dtype:
        return None
    return outs[0]


def max_pool_blocked(inputs: Arrays, call: Call, outs: Sequence[np.ndarray]
                     ) -> list[np.ndarray] | None:
    """``MaxPool`` on an NC1HWC0 input into ``outs[0]`` (or a fresh array); ``None`` when
    the call is not one this kernel takes."""
    held = _blocked_input(inputs, call)
    if held is None:
        return None
    x, c = held
    n, c1, h, w, c0 = x.shape
    win = window((h, w), kernel_of(call.attrs, None, 2), call.attrs,
                 bool(call.attrs.get("ceil_mode", 0)))
    out = _into(outs, (n, c1, *win.out, c0), x.dtype)
    if out is None:
        return None
    max_pool_into(x, win, out)
    F.zero_lanes(out, c)
    return [out]


def max_pool_into(x: np.ndarray, win: Window, out: np.ndarray) -> None:
    """The max pool of ``x`` over its spatial axes 2, 3, .. (one per axis of ``win``; axes
    after them, NC1HWC0's C0, ride along) into ``out``: separable, one spatial axis at a
    time, the intermediate results in scratch (slots 1 and 2 in turn)."""
    src = x
    last = len(win.kernel) - 1
    for i in range(last + 1):
        dst = out
        if i < last:
            shape = list(src.shape)
            shape[2 + i] = win.out[i]
            dst = scratch(shape, x.dtype, slot=1 + i % 2)
        _max_along(src, 2 + i, win, i, dst)
        src = dst


def _max_along(x: np.ndarray, axis: int, win: Window, i: int, out: np.ndarray) -> None:
    """``out`` = the max over the taps of spatial axis ``i`` (array axis ``axis``) of ``x``:
    each tap a strided view of the outputs whose window it meets inside ``x``."""
    size, n_out, s = x.shape[axis], out.shape[axis], win.strides[i]
    ranges = []
    for j in range(win.kernel[i]):
        shift = j * win.dilations[i] - win.begin[i]  # output o reads input o * s + shift
        lo = -(shift // s) if shift < 0 else 0  # the first o with o * s + shift >= 0
        hi = min(n_out, (size - 1 - shift) // s + 1) if shift < size else 0
        if lo < hi:
            ranges.append((lo, hi, lo * s + shift))
    full = next((r for r in ranges if r[0] == 0 and r[1] == n_out), None)
    if full is None:
        out.fill(lowest(x.dtype))
    else:
        ranges.remove(full)
        np.copyto(out, _take(x, axis, full[2], n_out, s))
    for lo, hi, start in ranges:
        dst = _take(out, axis, lo, hi - lo, 1)
        np.maximum(dst, _take(x, axis, start, hi - lo, s), out=dst)


def _take(a: np.ndarray, axis: int, start: int, count: int, step: int) -> np.ndarray:
    index: list[slice] = [slice(None)] * a.ndim
    index[axis] = slice(start, start + (count - 1) * step + 1, step)
    return a[tuple(index)]


def global_average_pool_blocked(inputs: Arrays, call: Call, outs: Sequence[np.ndarray]
                                ) -> list[np.ndarray] | None:
    """``GlobalAveragePool`` on an NC1HWC0 input into ``outs[0]`` (or a fresh array);
    ``None`` when the call is not one this kernel takes."""
    held = _blocked_input(inputs, call)
    if held is None:
        return None
    x, c = held
    n, c1, h, w, c0 = x.shape
    out = _into(outs, (n, c1, 1, 1, c0), x.dtype)
    if out is None:
        return None
    mean = np.mean(widen(x).reshape(n, c1, h * w, c0), axis=2)
    np.copyto(out[:, :, 0, 0], mean, casting="unsafe")
    F.zero_lanes(out, c)
    return [out]
