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
from ..dtypes import PACKED_BITS, from_onnx, itemsize, to_numpy
from ..graph import TensorType
from ..registry import ELEMENTWISE, SHAPE_OP, Call, InferFn, KernelFn
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


# ----------------------------------------------------------------------------- BitCast


def _bitcast_infer(types: Types, _c: object, call: Call) -> list[TensorType]:
    x = need(at(types, 0), "BitCast")
    to = from_onnx(iattr(call, "to"))
    if itemsize(to) != itemsize(x.dtype) or {to, x.dtype} & set(PACKED_BITS):
        raise ShapeError(f"BitCast: {x.dtype} and {to} differ in bit width")
    return [TensorType(to, x.shape)]


def _bitcast_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    x = need(at(inputs, 0), "BitCast")
    x = x if x.flags.c_contiguous else x.copy()  # ascontiguousarray would make 0-d 1-d
    return [x.view(to_numpy(from_onnx(iattr(call, "to"))))]


# ----------------------------------------------------------------------------- EyeLike, windows


def _eye_dtype(x: TensorType, call: Call) -> str:
    code = iattr(call, "dtype")
    return from_onnx(code) if code else x.dtype


def _eye_rank(rank: int) -> None:
    if rank != 2:
        raise ShapeError(f"EyeLike needs a 2-D input, got rank {rank}")


def _eye_infer(types: Types, _c: object, call: Call) -> list[TensorType]:
    x = need(at(types, 0), "EyeLike")
    if x.shape is not None:
        _eye_rank(len(x.shape))
    return [TensorType(_eye_dtype(x, call), x.shape)]


def _eye_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    x = need(at(inputs, 0), "EyeLike")
    _eye_rank(x.ndim)
    rows, cols = x.shape
    dtype = _eye_dtype(TensorType(x.dtype.name, None), call)
    return [cast(np.eye(rows, cols, k=iattr(call, "k")), dtype)]


# a window's cosine terms: w[n] = sum_k c_k cos(2 pi k n / N')
WINDOWS = {"HannWindow": (0.5, -0.5), "HammingWindow": (25 / 46, -21 / 46),
           "BlackmanWindow": (0.42, -0.5, 0.08)}


def _window(op: str) -> tuple[InferFn, KernelFn]:
    def infer(types: Types, consts: Arrays, call: Call) -> list[TensorType]:
        size = at(consts, 0)
        n: int | str = UNKNOWN if size is None else ints(size)[0]
        return [TensorType(from_onnx(iattr(call, "output_datatype", 1)), (n,))]

    def kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
        n = ints(need(at(inputs, 0), op, "size"))[0]
        denom = n if iattr(call, "periodic", 1) else n - 1
        phase = 2 * np.pi * np.arange(n) / max(denom, 1)
        w = sum(c * np.cos(k * phase) for k, c in enumerate(WINDOWS[op]))
        return [cast(np.asarray(w, dtype=np.float32), from_onnx(iattr(call, "output_datatype",
                                                                          1)))]

    return infer, kernel


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
    schema("BitCast", 26, "input", "output", _bitcast_infer, _bitcast_kernel, widen_low=False,
           attrs=[attr("to", "int", required=True)], traits={SHAPE_OP},
           doc="reinterpret the bits as the element type 'to' of the same width"),
    schema("EyeLike", 9, "input", "output", _eye_infer, _eye_kernel, unit="scalar",
           attrs=[attr("dtype", "int", 0), attr("k", "int", 0)],
           doc="ones on diagonal k of the input's 2-D shape, zeros elsewhere"),
    *(schema(op, 17, "size:i64", "output", *_window(op), unit="scalar",
             attrs=[attr("output_datatype", "int", 1), attr("periodic", "int", 1)],
             doc=f"the {op[:-6]} window of the given size") for op in WINDOWS),
]
