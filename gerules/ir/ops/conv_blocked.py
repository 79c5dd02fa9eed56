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
  border zeroed; the lanes of a partial last block as one item per pixel); the im2col of
  that NHWC array (each tap row's KW*C values, contiguous there, moved as one ``void``
  item) copied once into scratch slot 0 (an unpadded 1x1 conv's matrix is the NHWC array
  of the pixels it reads, moved straight from X), with a last column of ones when there
  is a bias; one BLAS call into scratch slot 2 ``[P, M1*M0]`` by the weight with the bias
  as its last row (the bias costs no pass of its own); the result moved to the output
  [N, M1, Ho, Wo, M0] by M0 chunks; then the residual (a plain add: same layout) and the
  activation in place.
- The GEMM-ready weight ``[K (+1), M1*M0]`` (zero columns past M, the bias row) is derived
  from FRACTAL_Z once per weight and bias and kept while they live (``layout.kept``); a
  call's geometry (``Plan``) is worked out once per runtime step.
- Depthwise convs (group = C = M) multiply-add one view of the padded blocked input per
  tap (the C0 lanes stay innermost: no layout change at all; a stride-2 input split by
  column phase so each tap reads contiguous rows), by per-tap factors ``[KH*KW, C1*C0]``
  kept per weight like the GEMM weight; the bias is one add.
- Declines (returns ``None``, the converting path runs) other grouped convs, other formats
  (the small-channel NC1HWC0_C04 / FRACTAL_Z_C04 pair), plain or broadcast residuals,
  non-float dtypes and N-d convs other than 2-D.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .. import formats as F
from ..layout import kept
from ..registry import Call
from . import _jit
from ._common import Arrays, PerOwner, at, iattr, scratch
from ._window import Window, kernel_of, window
from .activation import activate_into, check_activation, scalar_bound

FLOATS = frozenset({"float16", "float32", "float64"})
ROW_LOOP = 192  # output values per row from which the compiled depthwise loop pays


@dataclass(frozen=True, slots=True)
class Plan:
    """What a call computes on an input of one physical shape (decided once per step)."""

    win: Window
    c: int  # input channels (logical)
    m: int  # output channels (logical)
    shape: tuple[int, ...]  # the output's physical shape [N, M1, Ho, Wo, M0]
    weight: tuple[int, ...]  # the weight's logical shape [M, C / group, KH, KW]
    work: np.dtype  # the arithmetic's dtype (float16 runs in float32)
    depthwise: bool


# per call and input's physical shape, its plan or None (declined): a runtime step keeps
# its Call, so the geometry is worked out once per step
_PLANS: PerOwner[Plan | None] = PerOwner()


def _plan(x: np.ndarray, call: Call) -> Plan | None:
    return _PLANS.get(call, x.shape, lambda: _make_plan(x, call))


def _make_plan(x: np.ndarray, call: Call) -> Plan | None:
    tx, tw, tb = (at(call.types, i) for i in range(3))
    if (tx is None or tw is None or tw.shape is None or tx.shape is None
            or tx.format != F.NC1HWC0 or tw.format != F.FRACTAL_Z or x.ndim != 5
            or tx.dtype not in FLOATS or (tb is not None and tb.format != F.ND)):
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
    work = np.dtype(np.float32) if x.dtype == np.float16 else x.dtype
    return Plan(win, c, m, (n, -(-m // c0), *win.out, c0), (m, cg, kh, kw), work, depthwise)


def fused_conv_blocked(inputs: Arrays, call: Call, outs: Sequence[np.ndarray]
                       ) -> list[np.ndarray] | None:
    """``ge.FusedConv`` on NC1HWC0 / FRACTAL_Z operands into ``outs[0]`` (or a fresh array
    when ``outs`` is empty); ``None`` when the call is not one this kernel takes."""
    x, w, b, z = (at(inputs, i) for i in range(4))
    if x is None or w is None or x.dtype != w.dtype:
        return None
    plan = _plan(x, call)
    if plan is None:
        return None
    shape, work = plan.shape, plan.work
    if z is not None and (z.shape != shape or z.dtype != x.dtype
                          or getattr(at(call.types, 3), "format", None) != F.NC1HWC0):
        return None
    if outs and (outs[0].shape != shape or outs[0].dtype != x.dtype):
        return None
    out = outs[0] if outs else np.empty(shape, x.dtype)
    lanes = shape[1] * shape[4]
    if plan.depthwise:
        acc = out if work == x.dtype else scratch(shape, work, slot=2)
        bias = None
        if b is not None:
            bias = np.zeros(lanes, work)
            bias[:plan.m] = b
        if not _depthwise(x, plan.c, _tap_weight(w, plan.weight, work, lanes), plan.win, acc,
                          bias, call) and bias is not None:
            acc += bias.reshape(1, shape[1], 1, 1, shape[4])
        if acc is not out:
            np.copyto(out, acc, casting="same_kind")
    else:
        cols = _patches(x, plan.c, plan.win, work, ones=b is not None)
        y = scratch((cols.shape[0], lanes), work, slot=2)
        np.matmul(cols, _gemm_weight(w, b, plan.weight, work, lanes), out=y)
        if _epilogue(y, z, out, plan.m, call):
            return [out]
        _from_rows(y, out)
    if z is not None:
        out += z
        F.zero_lanes(out, plan.m)
    activate_into(out, call.attrs)
    F.zero_lanes(out, plan.m)
    return [out]


_ACTIVATIONS = {"": 0, "Relu": 1, "Clip": 2}  # what ``_jit.rows_to_blocks`` applies


def _epilogue(y: np.ndarray, z: np.ndarray | None, out: np.ndarray, m: int, call: Call
              ) -> bool:
    """The move into ``out``, the residual ``z``, ReLU or Clip and the padding lanes as one
    compiled pass (``_jit.rows_to_blocks``) when a runtime step runs it again and the ``jit`` extra
    is installed; ``False``: nothing done, the NumPy passes run."""
    if out.size < _jit.MIN_ELEMENTS or y.dtype != out.dtype:
        return False
    act = _ACTIVATIONS.get(check_activation(call.attrs))
    if act is None:
        return False
    zero = out.dtype.type(0)
    lo = hi = zero
    if act == 2:  # Clip with scalar bounds (a missing one: the dtype's extreme)
        lo = scalar_bound(call.attrs.get("clip_min"), out.dtype, False)
        hi = scalar_bound(call.attrs.get("clip_max"), out.dtype, True)
        if lo is None or hi is None:
            return False
        lo, hi = out.dtype.type(lo), out.dtype.type(hi)
    n, m1, ho, wo, m0 = out.shape
    if y.shape[0] != n * ho * wo or y.shape[1] < m1 * m0:
        return False
    blocks = out.reshape(n, m1, ho * wo, m0)
    zb = blocks if z is None else z.reshape(blocks.shape)
    if not _jit.fits(out, y) or (z is not None and (np.may_share_memory(z, out)
                                                    or not _jit.fits(z, y))):
        return False  # (the NumPy passes move into ``out`` before reading Z)
    fn = _jit.loop("rows_to_blocks", call)
    if fn is None or not fn(y, zb, blocks, z is not None, act, lo, hi):
        return False
    F.zero_lanes(out, m)
    return True


def _gemm_weight(w: np.ndarray, b: np.ndarray | None, shape: tuple[int, ...],
                 work: np.dtype, cols: int) -> np.ndarray:
    """The FRACTAL_Z weight of logical ``shape`` as ``[KH*KW*C (+1), cols]`` in ``work``
    (taps, then channels; the bias as the last row when there is one, for the column of
    ones ``_patches`` adds; zero columns past M), kept per weight and bias."""

    def make() -> np.ndarray:
        m, c, kh, kw = shape
        plain = F.from_format(w, F.FRACTAL_Z, shape)
        mat = np.zeros((kh * kw * c + (b is not None), cols), work)
        mat[:kh * kw * c, :m] = plain.transpose(2, 3, 1, 0).reshape(-1, m)
        if b is not None:
            mat[-1, :m] = b
        return mat

    return kept((w,) if b is None else (w, b), _GEMM_FORMS[work, b is not None], make)


# keyed by the dtype itself: a dtype's ``name`` is computed in Python on every read
_GEMM_FORMS = {(np.dtype(d), bias): f"conv GEMM [K{' + bias' if bias else ''}, M] from "
               f"FRACTAL_Z in {d}" for d in FLOATS for bias in (False, True)}


def _tap_weight(w: np.ndarray, shape: tuple[int, ...], work: np.dtype, lanes: int
                ) -> np.ndarray:
    """A depthwise FRACTAL_Z weight [M, 1, KH, KW] as ``[KH*KW, lanes]`` in ``work``: per
    tap, one factor per channel (zero past M), kept per weight."""

    def make() -> np.ndarray:
        m, _, kh, kw = shape
        plain = F.from_format(w, F.FRACTAL_Z, shape)
        taps = np.zeros((kh * kw, lanes), work)
        taps[:, :m] = plain.reshape(m, kh * kw).T
        return taps

    return kept(w, f"depthwise taps [KH*KW, C] from FRACTAL_Z in {work.name}", make)


def _padded_blocks(x: np.ndarray, c: int, win: Window) -> np.ndarray:
    """The NC1HWC0 ``x`` padded so every window of ``win`` lies inside (width rounded up
    to whole stride phases), in scratch slot 1: only the border zeroed, and the padding
    lanes, so what the input holds there reaches no value."""
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
    F.zero_lanes(xp, c)
    return xp


def _depthwise(x: np.ndarray, c: int, taps: np.ndarray, win: Window, acc: np.ndarray,
               bias: np.ndarray | None = None, step: object = None) -> bool:
    """The depthwise conv of the NC1HWC0 ``x`` (C channels) into ``acc`` [N, C1, Ho, Wo,
    C0]: one multiply and one add per tap (in the order ``conv``'s plain depthwise path
    takes) over a view of the padded blocked input whose rows are contiguous runs of Wo*C0
    values, by factors laid out as wide as a row, so NumPy's inner loops run a whole row.
    From a runtime ``step``'s second call with the ``jit`` extra, and rows of at least
    ``ROW_LOOP`` values, one compiled pass does the same per output row, ``bias`` [C1*C0]
    included: returns whether it did (then the caller adds no bias)."""
    n, c1, _, _, c0 = x.shape
    (kh, kw), (sh, sw), (dh, dw) = win.kernel, win.strides, win.dilations
    ho, wo = win.out
    loop = None
    if (step is not None and acc.dtype == x.dtype and wo * c0 >= ROW_LOOP
            and acc.size >= _jit.MIN_ELEMENTS and acc.flags.c_contiguous):
        loop = _jit.loop("depthwise_rows", step)
    xp = _padded_blocks(x, c, win)
    hp, wp = xp.shape[2], xp.shape[3]
    phases = xp.reshape(n, c1, hp, 1, wp, c0)
    if sw > 1:  # columns split by phase (x % sw): a strided tap reads a contiguous run
        phases = scratch((n, c1, hp, sw, wp // sw, c0), x.dtype, slot=3)
        np.copyto(phases, xp.reshape(n, c1, hp, wp // sw, sw, c0).transpose(0, 1, 2, 4, 3, 5))
    factors = scratch((kh * kw, c1, 1, wo, c0), acc.dtype, slot=4)
    np.copyto(factors, taps.reshape(kh * kw, c1, 1, 1, c0))
    if loop is not None and loop(
            phases, factors, np.zeros(c1 * c0, acc.dtype) if bias is None else bias,
            bias is not None, win.kernel, win.strides, win.dilations, acc):
        return True
    term = scratch(acc.shape, acc.dtype, slot=0)
    for t in range(kh * kw):
        i, j = divmod(t, kw)
        rows = slice(i * dh, i * dh + (ho - 1) * sh + 1, sh)
        start = (j * dw) // sw
        src = phases[:, :, rows, (j * dw) % sw, start:start + wo]
        if t == 0:
            np.multiply(src, factors[t], out=acc)
        else:
            np.multiply(src, factors[t], out=term)
            acc += term
    return False


def _chunks(a: np.ndarray, k: int) -> np.ndarray:
    """A view of ``a`` (its last axis contiguous) with each run of ``k`` elements of the last
    axis as one ``void`` item: NumPy moves such items whole, as fast as ``memcpy``."""
    return a.view(_void(k * a.itemsize))


@functools.cache
def _void(nbytes: int) -> np.dtype:
    """The ``void`` dtype of ``nbytes`` (made once: a kernel call moves several views)."""
    return np.dtype((np.void, nbytes))


def _to_nhwc(x: np.ndarray, dst: np.ndarray) -> None:
    """The first C channels of the NC1HWC0 ``x`` into ``dst`` [N, H, W, C] (a view, its last
    axis contiguous): whole C0 chunks, then the lanes of a last partial block (each pixel's
    run of them one item)."""
    c0, c = x.shape[-1], dst.shape[-1]
    full, rest = divmod(c, c0)
    if full:
        np.copyto(_chunks(dst[..., :full * c0], c0),
                  _chunks(x[:, :full], c0)[..., 0].transpose(0, 2, 3, 1))
    if rest:  # the lanes of the partial block as one item per pixel too
        np.copyto(_chunks(dst[..., full * c0:], rest), _chunks(x[:, full, :, :, :rest], rest))


def _from_rows(y: np.ndarray, out: np.ndarray) -> None:
    """``y`` [N*Ho*Wo, M1*M0] (its last axis contiguous) into the NC1HWC0 ``out``
    [N, M1, Ho, Wo, M0]: M0 chunks (an element-wise move when the dtypes differ: float16
    computed in float32)."""
    n, m1, ho, wo, m0 = out.shape
    rows = y.reshape(n, ho, wo, m1, m0)
    if y.dtype == out.dtype and out.flags.c_contiguous:
        np.copyto(_chunks(out, m0)[..., 0], _chunks(y, m0).reshape(n, ho, wo, m1)
                  .transpose(0, 3, 1, 2))
    else:
        np.copyto(out, rows.transpose(0, 3, 1, 2, 4), casting="same_kind")


def _padded_nhwc(x: np.ndarray, c: int, win: Window) -> np.ndarray:
    """The first C channels of the NC1HWC0 ``x`` as NHWC, padded so every window of ``win``
    lies inside, in scratch slot 1: only the border is zeroed, the interior is moved by C0
    chunks."""
    n, _, h, w, _ = x.shape
    (kh, kw), (sh, sw), (dh, dw) = win.kernel, win.strides, win.dilations
    (pt, pl), (ho, wo) = win.begin, win.out
    hp = max(pt + h, (ho - 1) * sh + (kh - 1) * dh + 1)
    wp = max(pl + w, (wo - 1) * sw + (kw - 1) * dw + 1)
    xp = scratch((n, hp, wp, c), x.dtype, slot=1)
    xp[:, :pt] = 0
    xp[:, pt + h:] = 0
    xp[:, pt:pt + h, :pl] = 0
    xp[:, pt:pt + h, pl + w:] = 0
    _to_nhwc(x, xp[:, pt:pt + h, pl:pl + w])
    return xp


def _patches(x: np.ndarray, c: int, win: Window, work: np.dtype, ones: bool = False
             ) -> np.ndarray:
    """The im2col matrix ``[N*Ho*Wo, KH*KW*C]`` (taps, then channels) of the NC1HWC0 ``x``
    (C logical channels) in ``work``, with a last column of ones when ``ones`` (for the
    bias row of the GEMM weight): a view of scratch, valid until the next call."""
    n = x.shape[0]
    (kh, kw), (sh, sw), (dh, dw) = win.kernel, win.strides, win.dilations
    ho, wo = win.out
    p, k = n * ho * wo, kh * kw * c
    if (kh, kw) == (1, 1) and not any(win.begin) and not any(win.end):
        picked = x[:, :, :(ho - 1) * sh + 1:sh, :(wo - 1) * sw + 1:sw]  # a view (stride 1: x)
        if x.dtype == work:  # the NHWC array is the matrix
            cols = scratch((p, c + ones), work, slot=1)
            _to_nhwc(picked, np.reshape(cols[:, :c], (n, ho, wo, c), copy=False))
        else:
            nhwc = scratch((n, ho, wo, c), x.dtype, slot=1)
            _to_nhwc(picked, nhwc)
            cols = scratch((p, c + ones), work, slot=0)
            np.copyto(cols[:, :c], nhwc.reshape(p, c), casting="same_kind")
    else:
        xp = _padded_nhwc(x, c, win)
        sn, sy, sx, sc = xp.strides
        cols = scratch((p, k + ones), work, slot=0)
        if dw == 1 and xp.dtype == work:  # a tap row's KW*C values lie side by side: each
            run = _void(kw * c * xp.itemsize)  # moved as one item
            row = cols.strides[0]
            src = np.ndarray((n, ho, wo, kh), run, xp, strides=(sn, sy * sh, sx * sw, sy * dh))
            dst = np.ndarray((n, ho, wo, kh), run, cols,
                             strides=(ho * wo * row, wo * row, row, run.itemsize))
            np.copyto(dst, src)
        else:
            shape: tuple[int, ...] = (n, ho, wo, kh, kw, c)
            strides: tuple[int, ...] = (sn, sy * sh, sx * sw, sy * dh, sx * dw, sc)
            if dw == 1:  # (cast element by element, but one run per tap row still)
                shape, strides = (n, ho, wo, kh, kw * c), (sn, sy * sh, sx * sw, sy * dh, sc)
            view = np.lib.stride_tricks.as_strided(xp, shape, strides, writeable=False)
            np.copyto(np.reshape(cols[:, :k], shape, copy=False), view, casting="same_kind")
    if ones:
        cols[:, -1] = 1
    return cols
