"""Sliding-window geometry shared by Conv, ConvTranspose and the pooling ops.

Invariants:
- ``Window`` holds per-spatial-axis kernel, strides, dilations, begin/end pads and the
  output size; every field has one entry per spatial axis.
- Output size (explicit pads): ``floor((in + pb + pe - ((k - 1) * d + 1)) / s) + 1``, or
  ``ceil`` with ``ceil_mode`` where the last window must start inside the input or its
  begin pad. ``SAME_*``: ``ceil(in / s)`` with the total pad split evenly, the odd pixel at
  the end (UPPER) or the beginning (LOWER). ``VALID``: no pads.
- With symbolic input dims the shape functions give ``"?"``; kernels always see ints.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import ShapeError
from ..graph import Dim
from ._common import UNKNOWN, ints, scratch

AUTO_PADS = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")


@dataclass(frozen=True, slots=True)
class Window:
    kernel: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    begin: tuple[int, ...]
    end: tuple[int, ...]
    out: tuple[int, ...]

    def span(self, i: int) -> int:
        """The dilated kernel extent along spatial axis ``i``."""
        return (self.kernel[i] - 1) * self.dilations[i] + 1


def _per_axis(attrs: Mapping[str, Any], name: str, n: int, default: int) -> tuple[int, ...]:
    value = attrs.get(name)
    out = tuple(ints(value)) if value is not None and len(ints(value)) else (default,) * n
    if len(out) != n:
        raise ShapeError(f"{name} has {len(out)} values for {n} spatial axes")
    if any(v < 1 for v in out):
        raise ShapeError(f"{name} must be positive, got {list(out)}")
    return out


def _pads(attrs: Mapping[str, Any], n: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    value = attrs.get("pads")
    pads = ints(value) if value is not None else [0] * (2 * n)
    if len(pads) != 2 * n:
        raise ShapeError(f"pads has {len(pads)} values for {n} spatial axes (needs {2 * n})")
    if any(p < 0 for p in pads):
        raise ShapeError(f"pads must not be negative, got {pads}")
    return tuple(pads[:n]), tuple(pads[n:])


def auto_pad(attrs: Mapping[str, Any]) -> str:
    mode = str(attrs.get("auto_pad", "NOTSET"))
    if mode not in AUTO_PADS:
        raise ShapeError(f"auto_pad must be one of {', '.join(AUTO_PADS)}, got {mode!r}")
    return mode


def out_dim(size: Dim, k: int, s: int, d: int, pb: int, pe: int, mode: str,
            ceil_mode: bool = False) -> Dim:
    """One spatial output dim (``"?"`` for a symbolic input dim)."""
    if not isinstance(size, int):
        return UNKNOWN
    span = (k - 1) * d + 1
    if mode in ("SAME_UPPER", "SAME_LOWER"):
        return -(-size // s)
    if mode == "VALID":
        pb = pe = 0
    room = size + pb + pe - span
    if room < 0:
        raise ShapeError(f"kernel extent {span} exceeds padded input {size + pb + pe}")
    if not ceil_mode:
        return room // s + 1
    out = -(-room // s) + 1
    return out - 1 if (out - 1) * s >= size + pb else out


def kernel_of(attrs: Mapping[str, Any], weight_shape: Sequence[Dim] | None,
              n: int) -> tuple[int, ...]:
    """Kernel shape from the attribute, else from the weight's spatial dims."""
    value = attrs.get("kernel_shape")
    if value is not None and len(ints(value)):
        k = tuple(ints(value))
    elif weight_shape is not None and all(isinstance(d, int) for d in weight_shape[2:]):
        k = tuple(int(d) for d in weight_shape[2:])
    else:
        raise ShapeError("kernel_shape is unknown")
    if len(k) != n:
        raise ShapeError(f"kernel_shape {list(k)} does not fit {n} spatial axes")
    return k


def out_shape(spatial: Sequence[Dim], kernel: Sequence[int], attrs: Mapping[str, Any],
              ceil_mode: bool = False) -> list[Dim]:
    """Spatial output dims for (possibly symbolic) input dims."""
    n = len(spatial)
    s = _per_axis(attrs, "strides", n, 1)
    d = _per_axis(attrs, "dilations", n, 1)
    pb, pe = _pads(attrs, n)
    mode = auto_pad(attrs)
    return [out_dim(spatial[i], kernel[i], s[i], d[i], pb[i], pe[i], mode, ceil_mode)
            for i in range(n)]


def window(spatial: Sequence[int], kernel: Sequence[int], attrs: Mapping[str, Any],
           ceil_mode: bool = False) -> Window:
    """The full geometry for static input dims (pads resolved for ``auto_pad``)."""
    n = len(spatial)
    s = _per_axis(attrs, "strides", n, 1)
    d = _per_axis(attrs, "dilations", n, 1)
    pb, pe = _pads(attrs, n)
    mode = auto_pad(attrs)
    out = tuple(int(out_dim(spatial[i], kernel[i], s[i], d[i], pb[i], pe[i], mode, ceil_mode))
                for i in range(n))
    if mode in ("SAME_UPPER", "SAME_LOWER"):
        total = [max(0, (out[i] - 1) * s[i] + (kernel[i] - 1) * d[i] + 1 - spatial[i])
                 for i in range(n)]
        small = [t // 2 for t in total]
        big = [t - t // 2 for t in total]
        pb, pe = (tuple(small), tuple(big)) if mode == "SAME_UPPER" else (tuple(big),
                                                                           tuple(small))
    elif mode == "VALID":
        pb = pe = (0,) * n
    return Window(tuple(kernel), s, d, pb, pe, out)


def pad_for(x: np.ndarray, win: Window, value: float | int = 0, slot: int | None = None
            ) -> np.ndarray:
    """``x`` padded so every window of ``win`` lies inside (ceil_mode may need extra); ``x``
    itself when nothing pads. With ``slot``, the padded array is the thread's scratch for
    that slot (valid until its next use): only its border is filled, the interior is one
    copy, and no memory is mapped per call."""
    widths = [(0, 0), (0, 0)]
    for i in range(len(win.kernel)):
        need = (win.out[i] - 1) * win.strides[i] + win.span(i)
        after = max(0, need - x.shape[2 + i] - win.begin[i])
        widths.append((win.begin[i], after))
    if not any(a or b for a, b in widths):
        return x
    if slot is None:
        return np.pad(x, widths, mode="constant", constant_values=value)
    xp = scratch([n + a + b for n, (a, b) in zip(x.shape, widths, strict=True)], x.dtype, slot)
    for i in range(2, x.ndim):  # each axis's two borders (corners are filled twice)
        a, b = widths[i]
        lead = (slice(None),) * i
        if a:
            xp[(*lead, slice(0, a))] = value
        if b:
            xp[(*lead, slice(a + x.shape[i], None))] = value
    xp[tuple(slice(a, a + n) for n, (a, _) in zip(x.shape, widths, strict=True))] = x
    return xp


def taps(win: Window) -> list[tuple[slice, ...]]:
    """For each kernel offset, the strided slice of the padded input it reads."""
    import itertools

    out = []
    for offset in itertools.product(*(range(k) for k in win.kernel)):
        out.append(tuple(
            slice(o * win.dilations[i], o * win.dilations[i] + (win.out[i] - 1)
                  * win.strides[i] + 1, win.strides[i]) for i, o in enumerate(offset)))
    return out


def window_counts(size: int, win: Window, i: int, include_pad: bool) -> np.ndarray:
    """Per output position along axis ``i``: how many kernel taps land on counted pixels."""
    start = np.arange(win.out[i]) * win.strides[i] - win.begin[i]
    pos = start[:, None] + np.arange(win.kernel[i])[None, :] * win.dilations[i]
    lo, hi = (-win.begin[i], size + win.end[i]) if include_pad else (0, size)
    return np.asarray(((pos >= lo) & (pos < hi)).sum(axis=1))


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def spatial_numel(shape: Sequence[int]) -> int:
    return math.prod(shape)
