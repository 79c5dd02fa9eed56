"""Tensor element types.

Invariants:
- A dtype is named by its NumPy name (``"float32"``, ``"int64"``, ``"bool"``); the IR never
  stores ``np.dtype`` objects, so graphs, JSON and e-nodes all hold plain strings.
- ``ONNX_CODES`` and ``DTYPES`` are inverse on the supported set; any other ONNX element type
  (bfloat16, float8, int4, string, complex) is reported as unsupported by name.
"""

from __future__ import annotations

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


def from_onnx(code: int) -> DType:
    """The dtype for an ONNX element type code; unsupported types raise ``ModelError``."""
    try:
        return DTYPES[code]
    except KeyError:
        name = ONNX_NAMES.get(code, f"code {code}")
        raise ModelError(f"element type {name} is not supported") from None


def to_onnx(dtype: DType) -> int:
    return ONNX_CODES[dtype]


def to_numpy(dtype: DType) -> np.dtype:
    return np.dtype(dtype)


def of(array: np.ndarray | np.generic) -> DType:
    """The dtype name of a NumPy array; refuses types the IR cannot hold."""
    name = np.asarray(array).dtype.name
    if name not in ONNX_CODES:
        raise ModelError(f"element type {name} is not supported")
    return name


def itemsize(dtype: DType) -> int:
    return np.dtype(dtype).itemsize
