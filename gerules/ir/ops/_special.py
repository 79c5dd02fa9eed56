"""Special functions for the kernels: ``erf`` in vectorised float32, the rest from SciPy.

Importing the op registry (every ``ge-rewrite`` command, ``run`` of a ``.om`` included) never
loads SciPy (a fifth of a second); a model whose kernels need float64 ``erf`` or the logistic
function loads it when such a kernel first runs (``scipy.special``'s ufuncs are accurate to
the last ulp).

float32 ``erf`` does not use SciPy: its ufunc evaluates the float64 series one element at a
time (60 ms for BERT-base's 4.7 M GELU inputs). ``erf32`` writes ``erf(x) = tanh(x * P(x^2))``
with P of degree 6, fitted for this module by weighted least squares on Chebyshev nodes to
``atanh(erf(x)) / x`` on [0, 3.92] (computed with mpmath), the weight making the error relative
to ``erf``. Beyond 3.92, where ``erfc`` is below half an ulp of 1, nothing clips: ``x * P(x^2)``
(in float32, overflowing to inf) stays above 9.18 and float32 ``tanh`` of it is 1, or 1 - 2^-24
below x = 4.06, for every float32 from 3.92 up (each one checked, both signs). One odd
function without branches: no select, no sign handling, NaN stays NaN, +-inf give +-1. It
runs as NumPy's SIMD ufuncs (its ``tanh`` is vectorised) block by block so that the 14
passes stay in the cache. Checked against SciPy's float64 ``erf`` on
*every* float32 in (0, 4.5] (the function is odd): at most 3.62 ulp, near x = 0.055 where
the error is float32 ``tanh``'s own (degrees 7 and 8 reach 3.68 and 3.76 ulp there, at 2 and
4 passes more); on 2.2 M points over [-6, 6] and down to 1e-30, 2.2 ulp at the 99th
percentile (``tests/ir/test_special.py`` keeps it under 4).

Every function returns an array of the input's dtype for float32/float64 input; ``erf``
writes into ``out`` when given (which may be the input itself).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from . import _jit

# atanh(erf(x)) / x = P(x^2), highest power first
_P = tuple(np.float32(c) for c in (
    1.4924641789093585e-07, -5.770246843894711e-06, 8.807177800917998e-05,
    -0.0006203819066286087, -0.00019183024414815009, 0.10276934504508972,
    1.128379225730896))
_P32 = tuple(_P)  # for _jit.odd_polynomial, which takes degree 6
assert len(_P32) == 7
BLOCK = 32768  # elements per block: the work arrays stay in L2
_INV_SQRT2 = np.float32(1 / np.sqrt(2.0))
_ONE, _HALF = np.float32(1), np.float32(0.5)


def _special() -> Any:
    from scipy import special

    return special


def erf(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    if x.dtype == np.float32 and (out is None or out.dtype == np.float32):
        return erf32(x, out)
    return np.asarray(_special().erf(x, out=out))


def erf32(x: np.ndarray, out: np.ndarray | None = None, step: object = None) -> np.ndarray:
    """float32 ``erf`` of ``x`` into ``out`` (a new array when ``None``; may be ``x``).
    ``step``: the runtime step calling (its ``Call``), for ``_jit``'s one-pass polynomial."""
    loop = _loop(x, step, "odd_polynomial")
    if loop is None:
        return _blocked(x, out, _erf_block)

    def block(xb: np.ndarray, ob: np.ndarray, work: tuple[np.ndarray, ...]) -> None:
        if loop(xb, _ONE, _P32, work[0]):  # the same values as _erf_block's 13 passes
            np.tanh(work[0], out=ob)
        else:
            _erf_block(xb, ob, work)

    return _blocked(x, out, block)


def gelu32(x: np.ndarray, out: np.ndarray | None = None, step: object = None) -> np.ndarray:
    """float32 ``x * (1 + erf(x / sqrt 2)) / 2`` into ``out`` (may be ``x``), evaluated in
    the same cache-sized blocks as ``erf32``; ``step`` as there."""
    loop, tail = _loop(x, step, "odd_polynomial"), _loop(x, step, "half_times")
    if loop is None or tail is None:
        return _blocked(x, out, _gelu_block)

    def block(xb: np.ndarray, ob: np.ndarray, work: tuple[np.ndarray, ...]) -> None:
        if not loop(xb, _INV_SQRT2, _P32, work[0]):  # _gelu_block's passes, fused around
            _gelu_block(xb, ob, work)  # the tanh
            return
        np.tanh(work[0], out=work[0])
        if not tail(work[0], xb, _HALF, _ONE, ob):
            _gelu_tail(work[0], xb, ob)

    return _blocked(x, out, block)


def _loop(x: np.ndarray, step: object, name: str) -> Callable[..., bool] | None:
    if step is None or x.size < _jit.MIN_ELEMENTS or x.dtype != np.float32:
        return None
    return _jit.loop(name, step)


_Block = Callable[[np.ndarray, np.ndarray, tuple[np.ndarray, ...]], None]


def _blocked(x: np.ndarray, out: np.ndarray | None, block: _Block) -> np.ndarray:
    """``block(xb, ob, work)`` over ``BLOCK``-sized pieces of ``x`` and ``out``: each piece
    of ``x`` is read before its piece of ``out`` is written, so ``out`` may be ``x``."""
    x = np.asarray(x, np.float32)
    if out is None:
        out = np.empty(x.shape, np.float32)
    if out.shape != x.shape:
        raise ValueError(f"out has shape {out.shape}, input {x.shape}")
    flat_x = x.reshape(-1)  # a copy only for a non-contiguous input
    direct = out.flags.c_contiguous
    flat_o = out.reshape(-1) if direct else np.empty(x.size, np.float32)
    n = min(BLOCK, flat_x.size)
    work = (np.empty(n, np.float32), np.empty(n, np.float32), np.empty(n, np.float32))
    with np.errstate(over="ignore"):  # x^2 of |x| > 1.8e19 is inf, as meant
        for lo in range(0, flat_x.size, BLOCK):
            xb = flat_x[lo:lo + BLOCK]
            block(xb, flat_o[lo:lo + xb.size], tuple(w[:xb.size] for w in work))
    if not direct:
        out[...] = flat_o.reshape(out.shape)
    return out


def _erf_block(xb: np.ndarray, ob: np.ndarray, work: tuple[np.ndarray, ...]) -> None:
    z, r, _ = work
    np.square(xb, out=z)
    np.multiply(z, _P[0], out=r)
    for c in _P[1:-1]:
        r += c
        r *= z
    r += _P[-1]
    r *= xb
    np.tanh(r, out=ob)


def _gelu_block(xb: np.ndarray, ob: np.ndarray, work: tuple[np.ndarray, ...]) -> None:
    t = work[2]
    np.multiply(xb, _INV_SQRT2, out=t)
    _erf_block(t, t, work)
    _gelu_tail(t, xb, ob)


def _gelu_tail(t: np.ndarray, xb: np.ndarray, ob: np.ndarray) -> None:
    """``ob = (t + 1) * xb * 0.5`` with ``t = erf(xb / sqrt 2)``, over ``t`` in place."""
    t += _ONE
    t *= xb
    np.multiply(t, _HALF, out=ob)


def sigmoid(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    return np.asarray(_special().expit(x, out=out))
