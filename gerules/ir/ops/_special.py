"""Special functions for the kernels, with SciPy imported on first use only.

Importing the op registry (every ``ge-rewrite`` command, ``run`` of a ``.om`` included) never
loads SciPy (a fifth of a second); a model whose kernels need ``erf`` or the logistic function
loads it when such a kernel first runs. ``scipy.special``'s ufuncs are accurate to the last
ulp and faster than a NumPy formula (several passes over memory) on the sizes that matter.

Both return an array of the input's dtype for float32/float64 input; ``erf`` writes into
``out`` when given (which may be the input itself).
"""

from __future__ import annotations

from typing import Any

import numpy as np


def _special() -> Any:
    from scipy import special

    return special


def erf(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    return np.asarray(_special().erf(x, out=out))


def sigmoid(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    return np.asarray(_special().expit(x, out=out))
