"""The kernels' special functions: float32 ``erf`` and exact GELU vectorised here, the rest
SciPy's, loaded only when a kernel needs one."""

from __future__ import annotations

import subprocess
import sys
import warnings

import numpy as np
import pytest
from scipy import special

from gerules.ir.ops import _special
from gerules.ir.ops._special import erf, sigmoid
from gerules.ir.ops.activation import gelu

MAX_ULP = 4.0  # measured 2.9 over the sweep below


def _sweep() -> np.ndarray:
    tiny = np.geomspace(1e-30, 6, 20001)
    return np.concatenate([np.linspace(-6, 6, 200001), tiny, -tiny]).astype(np.float32)


def _ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """|got - want| in float32 ulps of ``want`` (a float64 array)."""
    unit = np.spacing(np.abs(want).astype(np.float32)).astype(np.float64)
    return np.abs(got.astype(np.float64) - want) / unit


def test_float32_erf_is_within_a_few_ulps_of_scipys_float64() -> None:
    x = _sweep()
    assert _ulps(erf(x), special.erf(x.astype(np.float64))).max() <= MAX_ULP


def test_float32_erf_keeps_sign_zero_infinities_and_nan() -> None:
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-38, -1e-38, 3.95, 100.0],
                 np.float32)
    y = erf(x)
    assert y.dtype == np.float32
    assert y[0] == 0 and not np.signbit(y[0]) and y[1] == 0 and np.signbit(y[1])
    assert list(y[2:4]) == [1.0, -1.0] and np.isnan(y[4])
    assert y[5] > 0 > y[6] and y[7] >= np.float32(1) - np.spacing(np.float32(1)) and y[8] == 1


def test_float32_erf_in_place_across_blocks_and_on_strided_input(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_special, "BLOCK", 1000)  # several blocks and a ragged last one
    x = np.random.default_rng(0).normal(0, 2, (37, 101)).astype(np.float32)
    want = erf(x.copy())
    y = x.copy()
    assert erf(y, out=y) is y
    np.testing.assert_array_equal(y, want)
    np.testing.assert_array_equal(erf(x.T), want.T)  # a transposed view
    out = np.empty((101, 37), np.float32).T  # a non-contiguous destination
    erf(x, out=out)
    np.testing.assert_array_equal(out, want)


def test_float64_erf_and_sigmoid_are_scipys() -> None:
    x = np.linspace(-6, 6, 1001)
    np.testing.assert_array_equal(erf(x), special.erf(x))
    np.testing.assert_array_equal(sigmoid(x.astype(np.float32)),
                                  special.expit(x.astype(np.float32)))


def test_exact_gelu_in_float32_matches_float64_and_works_in_place() -> None:
    x = np.random.default_rng(1).normal(0, 3, 50001).astype(np.float32)
    x64 = x.astype(np.float64)
    want = x64 * (1 + special.erf(x64 / np.sqrt(2))) / 2
    got = gelu(x)
    assert got.dtype == np.float32
    # 1 + erf cancels for negative x (in any float32 GELU): the error is absolute there
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-6)
    y = x.copy()
    assert gelu(y, out=y) is y
    np.testing.assert_array_equal(y, got)


def test_the_registry_loads_without_scipy() -> None:
    code = ("import sys; from gerules.ir.registry import default_registry; "
            "default_registry(); print('scipy' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "False"


def test_float32_erf_beyond_the_fit_is_one_without_a_clip_or_a_warning() -> None:
    """Past 3.92 nothing clips x^2: the odd polynomial grows (to inf, quietly) and tanh of
    it is 1, or one ulp below 1 up to x = 4.06."""
    x = np.concatenate([np.linspace(3.92, 4.5, 20001), np.logspace(0.7, 38.5, 5001),
                        [1.8e19, 2e19, 3.4e38]]).astype(np.float32)
    x = x[np.isfinite(x) & (x >= np.float32(3.92))]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for sign in (1, -1):
            y = erf(sign * x) * sign
            assert np.all((y == 1) | (y == np.float32(1) - np.float32(2.0**-24)))
            assert np.all(y[x >= 4.06] == 1)
