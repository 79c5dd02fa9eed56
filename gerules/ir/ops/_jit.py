"""Single-pass loops compiled by Numba (the optional ``jit`` extra) where NumPy needs passes.

NumPy runs ``y = x * a + b`` per channel as two passes over memory, the blocked conv's
epilogue (GEMM rows moved into NC1HWC0, the residual added, ReLU) as three, a depthwise
conv as two per tap, and float32 ``erf``'s polynomial as thirteen; onnxruntime runs each as
one loop. These are those loops,
written as plain Python over arrays and compiled by Numba when it is installed.

Invariants:
- Each loop computes what its NumPy counterpart computes, operation for operation in the
  same dtype and order (Numba contracts nothing into a fused multiply-add without
  ``fastmath``), so whichever runs, the values are the same (a zero's sign aside, as
  ``np.maximum`` gives +0 for ReLU of -0 and so do these). The NumPy code stays the
  specification and runs whenever a loop does not.
- ``loop(name, call)`` returns a loop only from a runtime step's second call on (counted
  per ``Call``, which a step keeps across runs), so a one-shot ``ge-rewrite run`` never
  pays for a compile (a model's second run compiles what it uses, once per process:
  ``bench/runtime.py`` times a fresh process's first runs). Kernels called
  with a fresh ``Call`` each time (folding, verification) always take the NumPy path.
- Numba is imported only then. Without it, or with ``GERULES_JIT=0`` in the environment
  when the first loop is asked for, every kernel runs its NumPy path.
- Nothing compiled is cached on disk: Numba's cache is pickled, and nothing we load may
  run code.
- A loop Numba cannot compile for its arguments returns ``False`` having written nothing
  (``_Guarded``): the caller runs NumPy, and the loop stays off for the process.
- Loops release the GIL (``nogil``): stream threads run them side by side.
"""

from __future__ import annotations

import importlib
import os
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from ._common import PerOwner

ENV = "GERULES_JIT"
MIN_ELEMENTS = 4096  # below this a NumPy pass costs less than the call's checks


def affine_channels(x: np.ndarray, a: np.ndarray, b: np.ndarray, y: np.ndarray) -> None:
    """``y[n, c, i] = x[n, c, i] * a[c] + b[c]`` over ``[N, C, L]`` arrays (``y`` may be
    ``x``): what ``np.multiply(x, a, out=y); y += b`` computes, in one pass."""
    same = x.ctypes.data == y.ctypes.data  # one array in place (see ``relu``)
    for n in range(x.shape[0]):
        for c in range(x.shape[1]):
            ac = a[c]
            bc = b[c]
            if same:
                row = x[n, c]
                for i in range(x.shape[2]):
                    row[i] = row[i] * ac + bc
            else:
                src = x[n, c]
                dst = y[n, c]
                for i in range(x.shape[2]):
                    dst[i] = src[i] * ac + bc


def rows_to_blocks(y: np.ndarray, z: np.ndarray, out: np.ndarray, residual: bool, act: int,
                   lo: Any, hi: Any) -> None:
    """The blocked conv's epilogue in one pass: GEMM rows ``y`` [N*HW, >= M1*M0] moved into
    ``out`` [N, M1, HW, M0], plus ``z`` (the shape of ``out``, apart from it) when
    ``residual``, then the activation ``act``: 0 none; 1 ReLU, ``v`` when ``v > lo`` or
    NaN, else ``lo`` (+0, so ReLU of -0 is +0, as ``np.maximum(v, 0)`` gives it); 2 Clip,
    ``v`` when ``v >= lo`` (or NaN) else ``lo``, then that when ``<= hi`` (or NaN) else
    ``hi``, as ``np.clip`` (which keeps -0 at a bound of +0). Padding lanes are the
    caller's to zero."""
    hw, m0 = out.shape[2], out.shape[3]
    for n in range(out.shape[0]):
        for k in range(out.shape[1]):
            first = k * m0
            for p in range(hw):  # one C0 chunk (whole rows as 1-D views: measured
                src = y[n * hw + p]  # faster than a slice per chunk)
                dst = out[n, k, p]
                add = z[n, k, p]  # (read only with a residual: else Z is ``out``)
                for j in range(m0):
                    v = src[first + j]
                    if residual:
                        v = v + add[j]
                    if act == 1:
                        v = v if (v > lo or v != v) else lo
                    elif act == 2:
                        v = v if (v >= lo or v != v) else lo
                        v = v if (v <= hi or v != v) else hi
                    dst[j] = v

def depthwise_rows(phases: np.ndarray, factors: np.ndarray, bias: np.ndarray,
                   has_bias: bool, kernel: tuple[int, int], strides: tuple[int, int],
                   dilations: tuple[int, int], acc: np.ndarray) -> None:
    """A depthwise conv on blocks, an output row at a time: the row of ``acc`` [N, C1, Ho,
    Wo, C0] is the first tap's product, then each next tap's added (``phases`` [N, C1, Hp,
    sw, Wp / sw, C0]: the padded input with its columns split by stride phase, so a tap's
    inputs for a row are one contiguous run; ``factors`` [taps, C1, 1, Wo, C0]: each tap's
    per-channel factors repeated along the row), then ``bias[k*C0 + l]`` when ``has_bias``:
    the blocked conv's per-tap passes, element by element in the same order, with the row
    in L1 across its taps instead of the whole output in memory."""
    (kh, kw), (sh, sw), (dh, dw) = kernel, strides, dilations
    c0 = acc.shape[4]
    width = acc.shape[3] * c0
    for n in range(acc.shape[0]):
        for k in range(acc.shape[1]):
            for y in range(acc.shape[2]):
                row = acc[n, k, y].reshape(width)
                for t in range(kh * kw):
                    i = t // kw
                    col = (t - i * kw) * dw
                    first = (col // sw) * c0  # (sliced first: an index that cannot be
                    src = phases[n, k, y * sh + i * dh, col % sw].reshape(-1)[
                        first:first + width]  # negative lets the loop be vectorised)
                    f = factors[t, k, 0].reshape(width)
                    if t == 0:
                        for q in range(width):
                            row[q] = src[q] * f[q]
                    else:
                        for q in range(width):
                            row[q] = row[q] + src[q] * f[q]
                if has_bias:
                    b = bias[k * c0:(k + 1) * c0]
                    for x in range(acc.shape[3]):
                        lanes = row[x * c0:(x + 1) * c0]
                        for m in range(c0):
                            lanes[m] = lanes[m] + b[m]


def relu(x: np.ndarray, y: np.ndarray, zero: Any) -> None:
    """``y = max(x, 0)`` over 1-D arrays (``y`` is ``x`` or apart from it): ``x`` when
    ``x > 0`` or NaN, else +0, as ``np.maximum(x, 0)``; read once, without the block of
    zeros NumPy needs. In place it runs a loop over one array: LLVM's vectorised loop over
    two falls back to a scalar one when they overlap."""
    if x.ctypes.data == y.ctypes.data:
        for i in range(x.shape[0]):
            v = x[i]
            x[i] = v if (v > zero or v != v) else zero
    else:
        for i in range(x.shape[0]):
            v = x[i]
            y[i] = v if (v > zero or v != v) else zero


def odd_polynomial(x: np.ndarray, scale: Any, c: tuple[Any, ...], r: np.ndarray) -> None:
    """``r = t * P(t^2)`` with ``t = x * scale`` (skipped when ``scale`` is 1) and P of
    degree 6 given by its seven coefficients ``c``, highest power first, by Horner's rule:
    the passes of ``_special``'s erf before its ``tanh``, element by element in the same
    order and dtype (written out: a loop over the coefficients would keep the elements'
    loop from being vectorised)."""
    c0, c1, c2, c3, c4, c5, c6 = c
    one = scale == 1
    for i in range(x.shape[0]):
        t = x[i] if one else x[i] * scale
        z = t * t
        v = z * c0
        v = (v + c1) * z
        v = (v + c2) * z
        v = (v + c3) * z
        v = (v + c4) * z
        v = (v + c5) * z
        r[i] = (v + c6) * t


def half_times(r: np.ndarray, x: np.ndarray, half: Any, one: Any, out: np.ndarray) -> None:
    """``out = (r + 1) * x * 0.5``: GELU's passes after the ``tanh``, element by element
    (``out`` is ``x`` or apart from it; in place as one array, see ``relu``)."""
    if x.ctypes.data == out.ctypes.data:
        for i in range(x.shape[0]):
            x[i] = ((r[i] + one) * x[i]) * half
    else:
        for i in range(x.shape[0]):
            out[i] = ((r[i] + one) * x[i]) * half


def fits(*arrays: np.ndarray) -> bool:
    """The arrays a loop reads and writes are C-contiguous, and any two that share memory are
    the same memory (an in-place output): a loop reads each element before it writes its
    own, and nothing else."""
    if not all(a.flags.c_contiguous for a in arrays):
        return False
    for i, a in enumerate(arrays):
        for b in arrays[i + 1:]:
            if np.may_share_memory(a, b) and not (
                    a.ctypes.data == b.ctypes.data and a.shape == b.shape
                    and a.dtype == b.dtype):
                return False
    return True


_SOURCES: dict[str, Callable[..., None]] = {
    "affine_channels": affine_channels,
    "rows_to_blocks": rows_to_blocks,
    "depthwise_rows": depthwise_rows,
    "relu": relu,
    "odd_polynomial": odd_polynomial,
    "half_times": half_times,
}
_COMPILED: dict[str, Callable[..., bool]] = {}
_FAILED: set[str] = set()  # loops Numba refused to compile: NumPy runs
_LOCK = threading.Lock()
_NUMBA: list[Any] = []  # [the numba module or None] once looked for
_CALLS: PerOwner[dict[str, int]] = PerOwner()  # per step's Call: the loops it asked for


def loop(name: str, call: object) -> Callable[..., bool] | None:
    """The compiled loop ``name`` for this call of a runtime step, or ``None`` (the step's
    first call, no Numba, or ``GERULES_JIT=0``): then NumPy runs. The loop returns whether
    it ran (``_Guarded``)."""
    seen = _CALLS.get(call, None, dict)
    if name not in seen:
        seen[name] = 1
        return None
    fn = _COMPILED.get(name)
    return fn if fn is not None else _compile(name)


def _compile(name: str) -> Callable[..., bool] | None:
    numba = _numba()
    if numba is None or name in _FAILED:
        return None
    with _LOCK:
        fn = _COMPILED.get(name)
        if fn is None:
            fn = _COMPILED[name] = _Guarded(name, numba.njit(nogil=True, cache=False)(
                _SOURCES[name]), numba.core.errors.NumbaError)
        return fn


class _Guarded:
    """A compiled loop that returns ``True`` when it ran and ``False`` when Numba could not
    compile it for these arguments (a Numba version that types something differently):
    the loop is then left off for the process and the caller runs its NumPy passes.
    Numba types and compiles before the loop runs, so a refusal has written nothing."""

    __slots__ = ("name", "fn", "errors")

    def __init__(self, name: str, fn: Callable[..., None], errors: type[Exception]) -> None:
        self.name, self.fn, self.errors = name, fn, errors

    def __call__(self, *args: Any) -> bool:
        try:
            self.fn(*args)
        except self.errors:
            _FAILED.add(self.name)
            _COMPILED.pop(self.name, None)
            return False
        return True


def _numba() -> Any:
    if not _NUMBA:
        module: Any = None
        if os.environ.get(ENV, "1") != "0":
            try:
                module = importlib.import_module("numba")
            except ImportError:
                module = None
        _NUMBA.append(module)
    return _NUMBA[0]


def available() -> bool:
    """Numba is installed and not switched off: steps run compiled loops from their second
    call on."""
    return _numba() is not None
