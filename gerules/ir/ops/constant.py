"""Ops that make values rather than move them (ai.onnx): Constant, ConstantOfShape, Range,
Cast, CastLike.

Invariants:
- Constant takes exactly one ``value*`` attribute; ``value_float(s)`` give float32 and
  ``value_int(s)`` int64; string and sparse values are refused (the IR holds no strings).
- ConstantOfShape and Range give static shapes when their operands are known constants
  (``consts[i]``), else a rank-1 or rank-k shape of ``"?"``; negative dims and a zero delta
  raise ``ShapeError``.
- Cast and CastLike convert with ``_cast.cast`` (NumPy's ``astype``: float to int truncates,
  out-of-range float to float16 gives inf; float8 targets saturate unless ``saturate=0``;
  float8e8m0 rounds by ``round_mode``); element types outside the IR raise ``ModelError``.
"""

from __future__ import annotations

import numpy as np

from ...errors import ShapeError
from ..dtypes import from_onnx
from ..graph import TensorType
from ..registry import ELEMENTWISE, Call
from ._cast import cast
from ._common import UNKNOWN, Arrays, Types, at, attr, iattr, ints, need, sattr, schema

VALUE_ATTRS = ("value", "value_float", "value_floats", "value_int", "value_ints",
               "value_string", "value_strings", "sparse_value")


def _constant_value(call: Call) -> np.ndarray:
    given = [k for k in VALUE_ATTRS if k in call.attrs]
    if len(given) != 1:
        raise ShapeError(f"Constant needs exactly one value attribute, got {given or 'none'}")
    key, value = given[0], call.attrs[given[0]]
    if key in ("value_string", "value_strings", "sparse_value"):
        raise ShapeError(f"Constant: {key} is not supported (string and sparse tensors)")
    if key == "value":
        return np.asarray(value)
    dtype = np.float32 if "float" in key else np.int64
    return np.asarray(value, dtype=dtype)


def _constant_infer(types: Types, _c: object, call: Call) -> list[TensorType]:
    v = _constant_value(call)
    return [TensorType(v.dtype.name, tuple(int(d) for d in v.shape))]


def _constant_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    return [_constant_value(call)]


def _fill_value(call: Call) -> np.ndarray:
    value = call.attrs.get("value")
    if value is None:
        return np.zeros((), dtype=np.float32)
    arr = np.asarray(value)
    if arr.size != 1:
        raise ShapeError(f"ConstantOfShape: value must hold one element, got {arr.size}")
    return arr.reshape(())


def _cos_infer(types: Types, consts: Arrays, call: Call) -> list[TensorType]:
    s = need(at(types, 0), "ConstantOfShape", "input")
    dtype = _fill_value(call).dtype.name
    shape = at(consts, 0)
    if shape is not None:
        dims = ints(shape)
        if any(d < 0 for d in dims):
            raise ShapeError(f"ConstantOfShape: negative dim in {dims}")
        return [TensorType(dtype, tuple(dims))]
    rank = s.shape[0] if s.shape and isinstance(s.shape[0], int) else None
    return [TensorType(dtype, None if rank is None else (UNKNOWN,) * rank)]


def _cos_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    dims = ints(need(at(inputs, 0), "ConstantOfShape", "input"))
    if any(d < 0 for d in dims):
        raise ShapeError(f"ConstantOfShape: negative dim in {dims}")
    return [np.full(dims, _fill_value(call))]


def _range_count(start: float, limit: float, delta: float) -> int:
    if delta == 0:
        raise ShapeError("Range: delta must not be 0")
    return max(int(np.ceil((limit - start) / delta)), 0)


def _range_infer(types: Types, consts: Arrays, call: Call) -> list[TensorType]:
    start = need(at(types, 0), "Range", "start")
    vals = [at(consts, i) for i in range(3)]
    if any(v is None for v in vals):
        return [TensorType(start.dtype, (UNKNOWN,))]
    s, lim, d = (float(np.asarray(v).reshape(-1)[0]) for v in vals)
    return [TensorType(start.dtype, (_range_count(s, lim, d),))]


def _range_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    start, limit, delta = (need(at(inputs, i), "Range").reshape(-1)[0] for i in range(3))
    n = _range_count(float(start), float(limit), float(delta))
    return [(start + np.arange(n, dtype=np.float64 if start.dtype.kind == "f" else np.int64)
             * delta).astype(start.dtype)]


# ----------------------------------------------------------------------------- Cast


def _cast_infer(types: Types, _c: object, call: Call) -> list[TensorType]:
    x = need(at(types, 0), "Cast")
    return [TensorType(from_onnx(iattr(call, "to")), x.shape)]


def _cast_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    x = need(at(inputs, 0), "Cast")
    return [cast(x, from_onnx(iattr(call, "to")), iattr(call, "saturate", 1),
                 sattr(call, "round_mode", "up"))]


def _castlike_infer(types: Types, _c: object, call: Call) -> list[TensorType]:
    x, like = need(at(types, 0), "CastLike"), need(at(types, 1), "CastLike", "target_type")
    return [TensorType(like.dtype, x.shape)]


def _castlike_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    x, like = need(at(inputs, 0), "CastLike"), need(at(inputs, 1), "CastLike")
    return [cast(x, like.dtype.name, iattr(call, "saturate", 1),
                 sattr(call, "round_mode", "up"))]


SCHEMAS = [
    schema("Constant", 1, "", "output", _constant_infer, _constant_kernel, unit="scalar",
           attrs=[attr(k, kind) for k, kind in zip(VALUE_ATTRS, (
               "tensor", "float", "floats", "int", "ints", "string", "strings", "tensor"),
               strict=True)],
           doc="a constant tensor from one value_* attribute"),
    schema("ConstantOfShape", 9, "input:i64", "output", _cos_infer, _cos_kernel, unit="scalar",
           attrs=[attr("value", "tensor")],
           doc="a tensor of the given shape filled with value (default float32 0)"),
    schema("Range", 11, "start limit delta", "output", _range_infer, _range_kernel,
           unit="scalar", doc="start, start + delta, ... up to (excluding) limit"),
    schema("Cast", 6, "input", "output", _cast_infer, _cast_kernel,
           attrs=[attr("to", "int", required=True), attr("saturate", "int", 1),
                  attr("round_mode", "string", "up")],
           traits={ELEMENTWISE}, widen_low=False, doc="convert to the element type 'to'"),
    schema("CastLike", 15, "input target_type", "output", _castlike_infer, _castlike_kernel,
           attrs=[attr("saturate", "int", 1), attr("round_mode", "string", "up")],
           traits={ELEMENTWISE}, widen_low=False,
           doc="convert to the element type of target_type"),
]
