"""ONNX ``TensorProto`` <-> NumPy, with every size checked before anything is allocated.

Invariants:
- ``check_dims`` never trusts a count from the file: at most ``MAX_RANK`` dims, each
  ``>= 0``; the element and byte counts are products of Python ints, checked against int64
  and against the byte budget before an array is built. Exceeding int64 is a ``ModelError``
  (the file is wrong); exceeding the budget is a ``ResourceLimit`` (the file may be fine,
  the budget is not).
- ``tensor_to_array`` takes the data from exactly one place: ``raw_data``, external data, or
  the typed field for the element type. ``raw_data`` (and external data) must hold exactly
  ``numel * itemsize`` bytes, typed fields exactly ``numel`` values; either mismatch is an
  error naming the tensor and both sizes.
- Arrays come back read-only, in native byte order, with the IR dtype of the element type.
  The 4- and 2-bit types arrive packed (the first element in the lowest bits of a byte, as
  ONNX stores them) and come back one element per byte.
- ``array_to_tensor`` writes little-endian ``raw_data``; the round trip is bit-exact.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from ..budgets import DEFAULT, over
from ..errors import ModelError
from ..ir import dtypes
from .proto import EXTERNAL, TensorProto

if TYPE_CHECKING:
    import onnx

INT64_MAX = 2**63 - 1
MAX_RANK = 64  # NumPy's limit (ONNX sets none)
DEFAULT_MAX_TENSOR_BYTES = DEFAULT.tensor_bytes

# Where the values of each element type live when ``raw_data`` is not used (onnx.proto).
_TYPED_FIELD: dict[str, str] = {
    "float32": "float_data",
    "float64": "double_data",
    "int64": "int64_data",
    "uint32": "uint64_data",
    "uint64": "uint64_data",
    "int32": "int32_data",
    "int16": "int32_data",
    "int8": "int32_data",
    "uint16": "int32_data",
    "uint8": "int32_data",
    "bool": "int32_data",
    "float16": "int32_data",  # the 16-bit patterns, one per int32
    # bfloat16 and float8: their bit patterns, one per int32; 4/2-bit types: packed bytes
    **{name: "int32_data" for name in dtypes.LOW_PRECISION},
}
_ALL_TYPED = ("float_data", "double_data", "int32_data", "int64_data", "uint64_data",
              "string_data")

# Reads ``nbytes`` of external data for a tensor (set by the loader, which knows the folder).
ExternalReader = Callable[[TensorProto, int], bytearray]


def check_dims(dims: Sequence[int], dtype: str, *, tensor: str,
               max_bytes: int | None = None) -> int:
    """The element count of a tensor with ``dims``; refuses negative dims and overflow."""
    if len(dims) > MAX_RANK:
        raise ModelError(f"rank {len(dims)} is over the supported {MAX_RANK}", tensor=tensor)
    numel = 1
    for d in dims:
        if d < 0:
            raise ModelError(f"negative dim {d} in shape {list(dims)}", tensor=tensor)
        numel *= int(d)
    nbytes = stored_bytes(numel, dtype)
    if numel > INT64_MAX or nbytes > INT64_MAX:
        raise ModelError(f"shape {list(dims)} of {dtype} overflows int64 "
                         f"({numel} elements)", tensor=tensor)
    if max_bytes is not None and nbytes > max_bytes:
        raise over("tensor_bytes", nbytes, max_bytes, f"shape {list(dims)} of {dtype}",
                   tensor=tensor)
    return numel


def stored_bytes(numel: int, dtype: str) -> int:
    """Bytes that ``numel`` elements take in an ONNX file (packed for 4- and 2-bit types)."""
    bits = dtypes.PACKED_BITS.get(dtype)
    return numel * dtypes.itemsize(dtype) if bits is None else -(-numel * bits // 8)


def tensor_dtype(t: TensorProto, name: str) -> str:
    try:
        return dtypes.from_onnx(t.data_type)
    except ModelError as e:
        raise e.with_place(tensor=name) from None


def tensor_to_array(t: TensorProto, *, name: str, max_bytes: int,
                    external: ExternalReader | None = None) -> np.ndarray:
    """The array a ``TensorProto`` holds (read-only, native byte order)."""
    dtype = tensor_dtype(t, name)
    dims = [int(d) for d in t.dims]
    numel = check_dims(dims, dtype, tensor=name, max_bytes=max_bytes)
    nbytes = stored_bytes(numel, dtype)
    if t.HasField("segment"):
        raise ModelError("segmented tensors are not supported", tensor=name)
    if t.data_location == EXTERNAL:
        _no_inline_data(t, name, "external data")
        if external is None:
            raise ModelError("uses external data; loading from bytes needs base_dir (the folder "
                             "that holds the data files)", tensor=name)
        flat = _from_bytes(external(t, nbytes), dtype, nbytes, name)
    elif t.HasField("raw_data"):
        _no_inline_data(t, name, "raw_data")
        flat = _from_bytes(t.raw_data, dtype, nbytes, name)
    else:
        count = nbytes if dtype in dtypes.PACKED_BITS else numel
        flat = _from_typed(t, dtype, count, name)
    if dtype in dtypes.PACKED_BITS:
        flat = unpack(flat, dtype, numel)
    array = flat.reshape(dims)
    array.setflags(write=False)
    return array


def _no_inline_data(t: TensorProto, name: str, source: str) -> None:
    """A tensor whose data comes from ``source`` must not also carry typed values."""
    for field in _ALL_TYPED:
        if len(getattr(t, field)):
            raise ModelError(f"holds both {source} and {field}", tensor=name)
    if source == "external data" and t.HasField("raw_data"):
        raise ModelError("holds both external data and raw_data", tensor=name)


def _from_bytes(data: bytes | bytearray, dtype: str, nbytes: int, name: str) -> np.ndarray:
    if len(data) != nbytes:
        raise ModelError(f"raw data has {len(data)} bytes but its shape and type need "
                         f"{nbytes}", tensor=name)
    if dtype == "bool":
        return np.asarray(np.frombuffer(data, dtype=np.uint8) != 0)
    if dtype in dtypes.PACKED_BITS:
        return np.frombuffer(data, dtype=np.uint8)
    wire = dtypes.to_numpy(dtype).newbyteorder("<")
    flat = np.frombuffer(data, dtype=wire)
    return flat if sys.byteorder == "little" else flat.astype(dtypes.to_numpy(dtype))


def _from_typed(t: TensorProto, dtype: str, numel: int, name: str) -> np.ndarray:
    field = _TYPED_FIELD[dtype]
    values = getattr(t, field)
    if len(values) != numel:
        raise ModelError(f"{field} has {len(values)} values but the shape needs {numel}",
                         tensor=name)
    for other in _ALL_TYPED:
        if other != field and len(getattr(t, other)):
            raise ModelError(f"a {dtype} tensor must not hold {other}", tensor=name)
    if dtype == "float16":
        return np.asarray(values, dtype=np.int64).astype(np.uint16).view(np.float16)
    if dtype == "bool":
        return np.asarray(np.asarray(values, dtype=np.int64) != 0)
    if dtype in dtypes.PACKED_BITS:
        return np.asarray(values, dtype=np.int64).astype(np.uint8)
    if dtype in dtypes.LOW_PRECISION:
        bits = np.uint16 if dtype == "bfloat16" else np.uint8
        return np.asarray(values, dtype=np.int64).astype(bits).view(dtypes.to_numpy(dtype))
    if field in ("int32_data", "uint64_data"):
        wide = np.uint64 if field == "uint64_data" else np.int64
        return np.asarray(values, dtype=wide).astype(dtype)
    return np.asarray(values, dtype=dtype)


def unpack(packed: np.ndarray, dtype: str, numel: int) -> np.ndarray:
    """``numel`` elements of a 4- or 2-bit type from their packed bytes (lowest bits first)."""
    bits = dtypes.PACKED_BITS[dtype]
    per_byte = 8 // bits
    shifts = np.arange(per_byte, dtype=np.uint8) * bits
    codes = (packed[:, None] >> shifts) & ((1 << bits) - 1)
    return codes.reshape(-1)[:numel].astype(np.uint8).view(dtypes.to_numpy(dtype))


def array_to_tensor(array: np.ndarray, name: str) -> onnx.TensorProto:
    """A ``TensorProto`` with ``raw_data`` holding ``array`` exactly."""
    from onnx import numpy_helper

    dtypes.of(array)  # refuses element types the IR cannot hold
    return numpy_helper.from_array(np.asarray(array, order="C"), name)  # keeps 0-d arrays 0-d
