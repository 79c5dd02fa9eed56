"""Element type conversion shared by Cast, CastLike and the quantization ops.

Invariants:
- ``cast(x, dtype)`` converts to the IR dtype ``dtype`` with ONNX's Cast semantics: floats to
  integers truncate toward zero, NumPy's ``astype`` everywhere else, except
  - float8 targets with ``saturate`` (the default): values beyond the type's range, infinities
    included, become its largest finite value of the same sign; NaN stays NaN;
  - float8e8m0 (a power of two, no sign) rounds the exponent by ``round_mode`` ("up", "down"
    or "nearest"); overflow gives the largest power with ``saturate``, NaN without.
- Low-precision types (``dtypes.LOW_PRECISION``) come from ml_dtypes; only code that meets
  one imports it (``dtypes.to_numpy``).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ...errors import ShapeError
from .. import dtypes

FLOAT8 = frozenset({"float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz"})
E8M0 = "float8_e8m0fnu"
ROUND_MODES = ("up", "down", "nearest")


def cast(x: np.ndarray, dtype: str, saturate: int = 1, round_mode: str = "up") -> np.ndarray:
    """``x`` converted to the IR dtype ``dtype`` (see the module invariants)."""
    target = dtypes.to_numpy(dtype)
    if x.dtype == target:
        return x
    with np.errstate(all="ignore"):
        if dtype == E8M0:
            return _to_e8m0(x, bool(saturate), round_mode).view(target)
        if dtype in FLOAT8 and saturate:
            import ml_dtypes

            # ml_dtypes' finfo (NumPy's, extended to its types) has an unannotated __new__
            finfo: Callable[[np.dtype], np.finfo[np.floating]] = ml_dtypes.finfo
            info = finfo(target)
            x = np.clip(_as_float(x), float(info.min), float(info.max))
        elif x.dtype.name in dtypes.LOW_PRECISION and dtype not in dtypes.LOW_PRECISION:
            # ml_dtypes' direct conversions to every NumPy type are not all defined
            x = x.astype(np.float32) if dtypes.is_float(x.dtype.name) else x.astype(np.int32)
        return np.asarray(x.astype(target))


def _as_float(x: np.ndarray) -> np.ndarray:
    return x if x.dtype.kind == "f" else x.astype(np.float32)


def _to_e8m0(x: np.ndarray, saturate: bool, round_mode: str) -> np.ndarray:
    """float8e8m0 bit patterns (a biased exponent) for ``x`` taken as float32."""
    if round_mode not in ROUND_MODES:
        raise ShapeError(f"Cast: round_mode '{round_mode}' is not one of {ROUND_MODES}")
    bits = np.asarray(x, dtype=np.float32).view(np.uint32)
    exponent = ((bits >> 23) & 0xFF).astype(np.int32)
    mantissa = bits & 0x7FFFFF
    if round_mode == "up":
        bump = mantissa != 0
    elif round_mode == "down":
        bump = np.zeros(bits.shape, dtype=bool)
    else:  # nearest: the guard bit decides; below the normals the rest must be non-zero too
        guard = (mantissa & 0x400000) != 0
        bump = guard & (((mantissa & 0x3FFFFF) != 0) | (exponent > 0))
    special = exponent == 0xFF
    out = exponent + bump.astype(np.int32)
    overflow = (out > 0xFE) & ~special
    out = np.where(overflow, 0xFE if saturate else 0xFF, out)
    return np.where(special, 0xFF, out).astype(np.uint8)
