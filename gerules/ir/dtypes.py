"""Tensor element types.

Invariants:
- A dtype is named by its NumPy name (``"float32"``, ``"int64"``, ``"bool"``); the IR never
  stores ``np.dtype`` objects, so graphs, JSON and e-nodes all hold plain strings.
- ``ONNX_CODES`` and ``DTYPES`` are inverse on the supported set; any other ONNX element type
  (string, complex) is reported as unsupported by name.
- The low-precision types (bfloat16, the float8 and float4 variants, int4/uint4, int2/uint2)
  are NumPy dtypes from ``ml_dtypes``, imported on first use only (``to_numpy``), so code
  that never meets one never pays for the import. Their names are ml_dtypes' NumPy names;
  NumPy alone would read some of them wrongly (``np.dtype("int4")`` is int32), so every
  conversion from an IR name to a NumPy dtype goes through ``to_numpy``. In memory a 4- or
  2-bit element takes one byte; ONNX files pack them (``onnx_io.tensors``).
"""

from __future__ import annotations

from functools import cache

import numpy as np

from ..errors import ModelError

DType = str

# ONNX TensorProto.DataType codes for the element types we run.
ONNX_CODES: dict[DType, int] = {
    "float32": 1,
    "uint8": 2,
    "int8": 3,
    "uint16": 4,
    "int16": 5,
    "int32": 6,
    "int64": 7,
    "bool": 9,
    "float16": 10,
    "float64": 11,
    "uint32": 12,
    "uint64": 13,
}
# ONNX codes of the types ml_dtypes provides, by their NumPy name.
LOW_PRECISION: dict[DType, int] = {
    "bfloat16": 16,
    "float8_e4m3fn": 17,
    "float8_e4m3fnuz": 18,
    "float8_e5m2": 19,
    "float8_e5m2fnuz": 20,
    "uint4": 21,
    "int4": 22,
    "float4_e2m1fn": 23,
    "float8_e8m0fnu": 24,
    "uint2": 25,
    "int2": 26,
}
ONNX_CODES.update(LOW_PRECISION)
DTYPES: dict[int, DType] = {code: name for name, code in ONNX_CODES.items()}

ONNX_NAMES: dict[int, str] = {
    0: "undefined", 8: "string", 14: "complex64", 15: "complex128", 16: "bfloat16",
    17: "float8e4m3fn", 18: "float8e4m3fnuz", 19: "float8e5m2", 20: "float8e5m2fnuz",
    21: "uint4", 22: "int4", 23: "float4e2m1", 24: "float8e8m0", 25: "uint2", 26: "int2",
}

FLOATS: frozenset[DType] = frozenset({"float16", "float32", "float64"})
INTS: frozenset[DType] = frozenset(
    {"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"}
)
NUMERIC: frozenset[DType] = FLOATS | INTS
# Low-precision floats and integers (ml_dtypes); kernels compute them in float32 / int32.
LOW_FLOATS: frozenset[DType] = frozenset(
    d for d in LOW_PRECISION if d.startswith(("bfloat", "float")))
LOW_INTS: frozenset[DType] = frozenset(LOW_PRECISION) - LOW_FLOATS
# The float types arithmetic ops take (bfloat16 and float8 are computed in float32).
OP_FLOATS: frozenset[DType] = FLOATS | LOW_FLOATS
# Bits per element of the packed types (ONNX stores 2 or 4 of them per byte).
PACKED_BITS: dict[DType, int] = {"uint4": 4, "int4": 4, "float4_e2m1fn": 4, "uint2": 2,
                                 "int2": 2}


def from_onnx(code: int) -> DType:
    """The dtype for an ONNX element type code; unsupported types raise ``ModelError``."""
    try:
        return DTYPES[code]
    except KeyError:
        name = ONNX_NAMES.get(code, f"code {code}")
        raise ModelError(f"element type {name} is not supported") from None


def to_onnx(dtype: DType) -> int:
    return ONNX_CODES[dtype]


@cache
def to_numpy(dtype: DType) -> np.dtype:
    """The NumPy dtype of an IR dtype name (importing ml_dtypes for the low-precision ones)."""
    if dtype in LOW_PRECISION:
        try:
            import ml_dtypes
        except ImportError:  # pragma: no cover - onnx requires it, so it is normally there
            raise ModelError(f"element type {dtype} needs ml_dtypes (pip install "
                             "'gerules[lowprecision]')") from None
        scalar: type[np.generic] = getattr(ml_dtypes, dtype)
        return np.dtype(scalar)
    if dtype not in ONNX_CODES:
        raise ModelError(f"element type {dtype} is not supported")
    return np.dtype(dtype)


def is_float(dtype: DType) -> bool:
    """Floating point, the low-precision floats included."""
    return dtype in FLOATS or dtype in LOW_FLOATS


def compute_dtype(dtype: DType) -> np.dtype:
    """The dtype kernels compute a low-precision type in (float32, int32); others as is."""
    if dtype in LOW_FLOATS:
        return np.dtype(np.float32)
    if dtype in LOW_INTS:
        return np.dtype(np.int32)
    return to_numpy(dtype)


def of(array: np.ndarray | np.generic) -> DType:
    """The dtype name of a NumPy array; refuses types the IR cannot hold."""
    name = np.asarray(array).dtype.name
    if name not in ONNX_CODES:
        raise ModelError(f"element type {name} is not supported")
    return name


def itemsize(dtype: DType) -> int:
    """Bytes per element in memory (one for the packed 4- and 2-bit types)."""
    return to_numpy(dtype).itemsize
