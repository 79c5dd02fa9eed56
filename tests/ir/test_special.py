"""The NumPy special functions the kernels use, against SciPy in float64."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import special

from gerules.ir.ops._special import erf, sigmoid

GRID = np.concatenate([np.linspace(-9, 9, 20001), np.geomspace(1e-38, 1, 400),
                       -np.geomspace(1e-38, 1, 400), [0.5, -0.5, 0.4999999, 0.5000001]])


def _ulps(got: np.ndarray, want: np.ndarray, dtype: type) -> float:
    return float(np.max(np.abs(got - want) / np.spacing(np.abs(want).astype(dtype))))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_erf_is_within_two_ulp_of_scipy(dtype: type) -> None:
    x = GRID.astype(dtype)
    got = erf(x)
    assert got.dtype == dtype
    limit = 2 if dtype is np.float32 else 2e9  # float64: the fit's 1.2e-7, not ulps
    assert _ulps(got, special.erf(x.astype(np.float64)), dtype) <= limit
    assert np.max(np.abs(got - special.erf(x.astype(np.float64)))) < 1.3e-7


def test_erf_keeps_special_values_and_float16() -> None:
    got = erf(np.array([np.nan, np.inf, -np.inf, 0.0, -0.0], np.float32))
    assert np.isnan(got[0]) and list(got[1:3]) == [1, -1]
    assert got[3] == 0 and np.signbit(got[4])
    half = np.linspace(-4, 4, 101).astype(np.float16)
    assert erf(half).dtype == np.float16
    assert np.array_equal(erf(half), special.erf(half.astype(np.float64)).astype(np.float16))


def test_sigmoid_is_close_to_scipy_and_never_overflows() -> None:
    x = GRID.astype(np.float32) * 10
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        got = sigmoid(np.concatenate([x, np.float32([-1e30, 1e30])]))
    assert got.dtype == np.float32 and got[-2] == 0 and got[-1] == 1
    assert _ulps(got[:-2], special.expit(x.astype(np.float64)), np.float32) <= 4
