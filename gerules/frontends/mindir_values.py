"""MindIR values: the message classes, data-type numbers, tensors and attribute values.

Invariants:
- ``tensor_array`` returns an array of exactly the tensor's dims and dtype, from raw
  little-endian bytes or the typed fields; external or compressed data is refused.
- ``attr_value`` gives plain Python values (int, float, bool, str, tuples of them, arrays,
  ``None``, ``MONAD``); a kind we do not read is a ``ModelError`` naming it.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from importlib import resources
from typing import Any

import numpy as np

from ..errors import ModelError
from .protodef import message_classes

# AttributeProto.AttributeType / TensorProto.data_type numbers
FLOAT, UINT8, INT8, INT16, INT32, INT64, STRING, BOOL = 1, 2, 3, 5, 6, 7, 8, 9
FLOAT16, DOUBLE, TENSOR, TUPLE, LIST, UMONAD, IOMONAD, NONE = 10, 11, 17, 20, 21, 23, 24, 25
DTYPES = {FLOAT: np.float32, UINT8: np.uint8, INT8: np.int8, INT16: np.int16,
          INT32: np.int32, INT64: np.int64, BOOL: np.bool_, FLOAT16: np.float16,
          DOUBLE: np.float64}


@functools.cache
def proto() -> dict[str, type]:
    text = resources.files("gerules.frontends").joinpath("mindir.proto").read_text("utf-8")
    return message_classes(text)


class _Monad:
    """MindSpore's state token (UMonad / IOMonad / UpdateState): carries no data."""


MONAD = _Monad()


@dataclass(frozen=True)
class Param:
    """A weight, made a graph constant when an op first uses it."""

    name: str
    array: np.ndarray


def short(name: str) -> str:
    """A MindIR name without its scope prefix (``123_Net_construct_4:conv.weight``)."""
    return name.split(":", 1)[1] if ":" in name else name


def tensor_array(t: Any, where: str) -> np.ndarray:
    """A ``TensorProto``'s data as a NumPy array of its dims."""
    if t.HasField("external_data"):
        raise ModelError("weights in external data files are not supported", tensor=where)
    if t.compression_type:
        raise ModelError("compressed weights are not supported", tensor=where)
    dtype = DTYPES.get(t.data_type)
    if dtype is None:
        raise ModelError(f"unsupported data type {t.data_type}", tensor=where)
    dims = tuple(int(d) for d in t.dims)
    if any(d < 0 for d in dims):
        raise ModelError(f"negative dims {list(dims)}", tensor=where)
    count = int(np.prod(dims))
    if t.raw_data:
        if len(t.raw_data) != count * np.dtype(dtype).itemsize:
            raise ModelError(f"{len(t.raw_data)} bytes of data for dims {list(dims)}",
                             tensor=where)
        return np.frombuffer(t.raw_data, dtype=np.dtype(dtype).newbyteorder("<")).astype(
            dtype).reshape(dims)
    for field in ("float_data", "int32_data", "int64_data", "double_data"):
        values = getattr(t, field)
        if len(values):
            if len(values) != count:
                raise ModelError(f"{len(values)} values for dims {list(dims)}", tensor=where)
            return np.array(values).astype(dtype).reshape(dims)
    raise ModelError("a tensor without data", tensor=where)


def attr_value(a: Any, where: str) -> Any:
    """An ``AttributeProto``'s value: a Python scalar, str, tuple, array, None or a monad."""
    kind = int(a.type)
    if kind in (TUPLE, LIST):
        return tuple(attr_value(v, where) for v in a.values)
    if kind in (UMONAD, IOMONAD):
        return MONAD
    if kind == NONE:
        return None
    if kind == BOOL:
        return bool(a.ints[0] if len(a.ints) else a.i)
    if kind in (INT8, INT16, INT32, INT64, UINT8):
        return int(a.ints[0] if len(a.ints) else a.i)
    if kind in (FLOAT, DOUBLE):
        return float(a.floats[0] if len(a.floats) else a.doubles[0] if len(a.doubles)
                     else a.f if kind == FLOAT else a.d)
    if kind == STRING:
        return a.s.decode("utf-8", "replace")
    if kind == TENSOR:
        return tensor_array(a.t, where)
    attribute: Any = proto()["AttributeProto"]
    enum = attribute.DESCRIPTOR.enum_types_by_name["AttributeType"]
    name = enum.values_by_number[kind].name if kind in enum.values_by_number else str(kind)
    raise ModelError(f"a value of kind {name} is not supported", node=where)
