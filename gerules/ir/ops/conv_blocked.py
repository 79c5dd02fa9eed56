"""ge.FusedConv computed on its blocked operands: NC1HWC0 activations, FRACTAL_Z weights.

The converting path (``ir.layout``) moves every C0 lane of an activation to an outer axis
(NC1HWC0 -> NCHW: an element-wise transpose), runs the NCHW GEMM ``W[M, K] @ cols[K, P]``
and moves the result back, element by element. Here the GEMM runs in the orientation the
blocked layout suits, ``Y[P, M] = cols[P, K] @ Wt[K, M]`` (P output pixels, K = kernel taps x
channels, channels fastest), so every move is of whole C0 chunks (64 bytes for float32),
which NumPy copies as single items of a ``void`` dtype at close to memcpy speed.

Invariants:
- Only what the converting path would compute, up to float rounding of the GEMM's order:
  ``Y = act(conv(X, W) + B + Z)``, float16 in float32 rounded once before the residual
  (as ``conv`` does), padding lanes of the output zero.
- Padding lanes of the operands are never read: the channels past C in X's last block and
  in Z stay out of every value (Z's reach only the output's padding lanes, zeroed again).
- Steps: X [N, C1, H, W, C0] -> [N, Hp, Wp, C] by C0 chunks into scratch slot 1 (only its
  border zeroed; the lanes of a partial last block one by one); the im2col of that NHWC
  array (an ``as_strided`` view whose inner axis is a tap row's KW*C values, contiguous)
  copied once into scratch slot 0 (a 1x1 stride-1 unpadded conv uses the NHWC array
  itself); one BLAS call into scratch slot 2 ``[P, M1*M0]``; the bias added
  over rows; the result moved to the output [N, M1, Ho, Wo, M0] by M0 chunks; then the
  residual (a plain add: same layout) and the activation in place.
- The GEMM-ready weight ``[K, M1*M0]`` (zero columns past M) is derived from FRACTAL_Z once
  per weight and kept while the weight lives (``layout.kept``).
- Depthwise convs (group = C = M) multiply-add one strided view of the padded blocked
  input per tap (the C0 lanes stay innermost: no layout change at all), the per-tap
  factors ``[KH*KW, C1*C0]`` kept per weight like the GEMM weight.
- Declines (returns ``None``, the converting path runs) other grouped convs, other formats
  (the small-channel NC1HWC0_C04 / FRACTAL_Z_C04 pair), plain or broadcast residuals,
  non-float dtypes and N-d convs other than 2-D.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .. import formats as F
from ..graph import TensorType
from ..layout import kept
from ..registry import Call
from ._common import Arrays, at, iattr, scratch
from ._window import Window, kernel_of, window
from .activation import activate_into

FLOATS = frozenset({"float16", "float32", "float64"})


def fused_conv_blocked(inputs: Arrays, call: Call, outs: Sequence[np.ndarray]
                       ) -> list[np.ndarray] | None:
    """``ge.FusedConv`` on NC1HWC0 / FRACTAL_Z operands into ``outs[0]`` (or a fresh array
    when ``outs`` is empty); ``None`` when the call is not one this kernel takes."""
    x, w, b, z = (at(inputs, i) for i in range(4))
    tx, tw, tb, tz = (at(call.types, i) for i in range(4))
    if x is None or w is None or tx is None or tw is None or tw.shape is None:
        return None
    if (tx.format != F.NC1HWC0 or tw.format != F.FRACTAL_Z or x.ndim != 5
            or tx.dtype not in FLOATS or x.dtype != w.dtype or tx.shape is None):
        return None
    if b is not None and tb is not None and tb.format != F.ND:
        return None
    m, cg, kh, kw = (int(d) for d in tw.shape)
    n, c1, h, wd, c0 = x.shape
    c, group = int(tx.shape[1]), iattr(call, "group", 1)
    depthwise = group == c == m > 1 and cg == 1
    if (group != 1 and not depthwise) or c != cg * group or c1 * c0 < c:
        return None
    win = window((h, wd), kernel_of(call.attrs, tw.shape, 2), call.attrs)
    if win.kernel != (kh, kw):
        return None
    m1 = -(-m // c0)
    ho, wo = win.out
    shape = (n, m1, ho, wo, c0)
    if z is not None and (tz is None or tz.format != F.NC1HWC0 or z.shape != shape
                          or z.dtype != x.dtype):
        return None
    if outs and (outs[0].shape != shape or outs[0].dtype != x.dtype):
        return None
    out = outs[0] if outs else np.empty(shape, x.dtype)
    work = np.dtype(np.float32) if x.dtype == np.float16 else x.dtype
    if depthwise:
        acc = out if work == x.dtype else scratch(shape, work, slot=2)
        _depthwise(x, c, _tap_weight(w, tw, work, m1 * c0), win, acc)
        if b is not None:
            bias = np.zeros(m1 * c0, work)
            bias[:m] = b
            acc += bias.reshape(1, m1, 1, 1, c0)
        if acc is not out:
            np.copyto(out, acc, casting="same_kind")
    else:
        cols = _patches(x, c, win, work)
        y = scratch((cols.shape[0], m1 * c0), work, slot=2)
        np.matmul(cols, _gemm_weight(w, tw, work, m1 * c0), out=y)
        if b is not None:
            y[:, :m] += b.astype(work, copy=False)
        _from_rows(y, out)
    if z is not None:
        out += z
        _zero_lanes(out, m)
    activate_into(out, call.attrs)
    _zero_lanes(out, m)
    return [out]


def _gemm_weight(w: np.ndarray, t: TensorType, work: np.dtype, cols: int) -> np.ndarray:
    """The FRACTAL_Z weight as ``[KH*KW*C, cols]`` in ``work`` (taps, then channels; zero
    columns past M), kept per weight."""

    def make() -> np.ndarray:
        m, c, kh, kw = (int(d) for d in t.shape or ())
        plain = F.from_format(w, F.FRACTAL_Z, (m, c, kh, kw))
        mat = np.zeros((kh * kw * c, cols), work)
        mat[:, :m] = plain.transpose(2, 3, 1, 0).reshape(-1, m)
        return mat

    return kept(w, f"conv GEMM [K, M] from FRACTAL_Z in {work.name}", make)


def _tap_weight(w: np.ndarray, t: TensorType, work: np.dtype, lanes: int) -> np.ndarray:
    """A depthwise FRACTAL_Z weight [M, 1, KH, KW] as ``[KH*KW, lanes]`` in ``work``: per
    tap, one factor per channel (zero past M), kept per weight."""

    def make() -> np.ndarray:
        m, _, kh, kw = (int(d) for d in t.shape or ())
        plain = F.from_format(w, F.FRACTAL_Z, (m, 1, kh, kw))
        taps = np.zeros((kh * kw, lanes), work)
        taps[:, :m] = plain.reshape(m, kh * kw).T
        return taps

    return kept(w, f"depthwise taps [KH*KW, C] from FRACTAL_Z in {work.name}", make)


def _depthwise(x: np.ndarray, c: int, taps: np.ndarray, win: Window, acc: np.ndarray
               ) -> None:
    """The depthwise conv of the NC1HWC0 ``x`` (C channels) into ``acc`` [N, C1, Ho, Wo,
    C0]: one multiply and one add per tap (in the order ``conv``'s plain depthwise path
    takes) over a view of the padded blocked input whose rows are contiguous runs of Wo*C0
    values, by factors laid out as wide as a row, so NumPy's inner loops run a whole row."""
    n, c1, h, w, c0 = x.shape
    (kh, kw), (sh, sw), (dh, dw) = win.kernel, win.strides, win.dilations
    (pt, pl), (ho, wo) = win.begin, win.out
    hp = max(pt + h, (ho - 1) * sh + (kh - 1) * dh + 1)
    wp = max(pl + w, (wo - 1) * sw + (kw - 1) * dw + 1)
    wp += -wp % sw  # whole phases
    xp = scratch((n, c1, hp, wp, c0), x.dtype, slot=1)
    xp[:, :, :pt] = 0  # the border only: the interior is written next
    xp[:, :, pt + h:] = 0
    xp[:, :, pt:pt + h, :pl] = 0
    xp[:, :, pt:pt + h, pl + w:] = 0
    xp[:, :, pt:pt + h, pl:pl + w] = x
    _zero_lanes(xp, c)  # what the input's padding lanes hold must reach no value
    if sw > 1:  # columns split by phase (x % sw): a strided tap reads a contiguous run
        phases = scratch((n, c1, hp, sw, wp // sw, c0), x.dtype, slot=3)
        np.copyto(phases, xp.reshape(n, c1, hp, wp // sw, sw, c0).transpose(0, 1, 2, 4, 3, 5))
    factors = scratch((kh * kw, c1, 1, wo, c0), acc.dtype, slot=4)
    np.copyto(factors, taps.reshape(kh * kw, c1, 1, 1, c0))
    term = scratch(acc.shape, acc.dtype, slot=0)
    for t in range(kh * kw):
        i, j = divmod(t, kw)
        rows = slice(i * dh, i * dh + (ho - 1) * sh + 1, sh)
        if sw > 1:
            start = (j * dw) // sw
            src = phases[:, :, rows, (j * dw) % sw, start:start + wo]
        else:
            src = xp[:, :, rows, j * dw:j * dw + wo]
        if t == 0:
            np.multiply(src, factors[t], out=acc)
        else:
            np.multiply(src, factors[t], out=term)
            acc += term


def _chunks(a: np.ndarray, k: int) -> np.ndarray:
    """A view of ``a`` (its last axis contiguous) with each run of ``k`` elements of the last
    axis as one ``void`` item: NumPy moves such items whole, as fast as ``memcpy``."""
    return a.view(np.dtype((np.void, k * a.itemsize)))


def _to_nhwc(x: np.ndarray, dst: np.ndarray) -> None:
    """The first C channels of the NC1HWC0 ``x`` into ``dst`` [N, H, W, C] (a view, its last
    axis contiguous): whole C0 chunks, then the lanes of a last partial block."""
    c0, c = x.shape[-1], dst.shape[-1]
    full, rest = divmod(c, c0)
    if full:
        np.copyto(_chunks(dst[..., :full * c0], c0),
                  _chunks(x[:, :full], c0)[..., 0].transpose(0, 2, 3, 1))
    if rest:
        np.copyto(dst[..., full * c0:], x[:, full, :, :, :rest])


def _from_rows(y: np.ndarray, out: np.ndarray) -> None:
    """``y`` [N*Ho*Wo, M1*M0] into the NC1HWC0 ``out`` [N, M1, Ho, Wo, M0]: M0 chunks (an
    element-wise move when the dtypes differ: float16 computed in float32)."""
    n, m1, ho, wo, m0 = out.shape
    rows = y.reshape(n, ho, wo, m1, m0)
    if y.dtype == out.dtype and out.flags.c_contiguous:
        np.copyto(_chunks(out, m0)[..., 0], _chunks(y, m0).reshape(n, ho, wo, m1)
                  .transpose(0, 3, 1, 2))
    else:
        np.copyto(out, rows.transpose(0, 3, 1, 2, 4), casting="same_kind")


def _zero_lanes(out: np.ndarray, m: int) -> None:
    """The padding lanes (channels M.. of the last block) set to zero."""
    rest = m % out.shape[-1]
    if rest:
        out[:, -1, ..., rest:] = 0


def _patches(x: np.ndarray, c: int, win: Window, work: np.dtype) -> np.ndarray:
    """The im2col matrix ``[N*Ho*Wo, KH*KW*C]`` (taps, then channels) of the NC1HWC0 ``x``
    (C logical channels) in ``work``: a view of scratch, valid until the next call."""
    n, _, h, w, _ = x.shape
    (kh, kw), (sh, sw), (dh, dw) = win.kernel, win.strides, win.dilations
    (pt, pl), (ho, wo) = win.begin, win.out
    if (kh, kw, sh, sw) == (1, 1, 1, 1) and not any(win.begin) and not any(win.end):
        nhwc = scratch((n, h, w, c), x.dtype, slot=1)
        _to_nhwc(x, nhwc)
        if x.dtype == work:
            return nhwc.reshape(n * h * w, c)
        cols = scratch((n * h * w, c), work, slot=0)
        np.copyto(cols, nhwc.reshape(n * h * w, c), casting="same_kind")
        return cols
    hp = max(pt + h, (ho - 1) * sh + (kh - 1) * dh + 1)
    wp = max(pl + w, (wo - 1) * sw + (kw - 1) * dw + 1)
    xp = scratch((n, hp, wp, c), x.dtype, slot=1)
    xp[:, :pt] = 0  # the border only: the interior is written next
    xp[:, pt + h:] = 0
    xp[:, pt:pt + h, :pl] = 0
    xp[:, pt:pt + h, pl + w:] = 0
    _to_nhwc(x, xp[:, pt:pt + h, pl:pl + w])
    sn, sy, sx, sc = xp.strides
    shape: tuple[int, ...] = (n, ho, wo, kh, kw, c)
    strides: tuple[int, ...] = (sn, sy * sh, sx * sw, sy * dh, sx * dw, sc)
    if dw == 1:  # a tap row's KW*C values lie side by side: one run per row
        shape, strides = (n, ho, wo, kh, kw * c), (sn, sy * sh, sx * sw, sy * dh, sc)
    view = np.lib.stride_tricks.as_strided(xp, shape, strides, writeable=False)
    cols = scratch(shape, work, slot=0)
    np.copyto(cols, view, casting="same_kind")
    return cols.reshape(n * ho * wo, kh * kw * c)
