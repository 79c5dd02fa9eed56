"""The kernels' special functions: SciPy's, loaded only when a kernel needs one."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
from scipy import special

from gerules.ir.ops._special import erf, sigmoid


def test_erf_and_sigmoid_are_scipys_in_place_too() -> None:
    x = np.linspace(-6, 6, 1001).astype(np.float32)
    np.testing.assert_array_equal(erf(x), special.erf(x))
    np.testing.assert_array_equal(sigmoid(x), special.expit(x))
    y = x.copy()
    assert erf(y, out=y) is y
    np.testing.assert_array_equal(y, special.erf(x))


def test_the_registry_loads_without_scipy() -> None:
    code = ("import sys; from gerules.ir.registry import default_registry; "
            "default_registry(); print('scipy' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "False"
