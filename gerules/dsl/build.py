"""Turning compile-time values into graph pieces: constant inputs and attribute values.

Shared by the soundness check (on synthetic values) and the compiler (on matched values),
so both build exactly the same right side.

Invariants:
- ``input_constant(value, like)`` gives a weight: arrays (and deferred constants, left
  uncomputed) keep their dtype; Python numbers
  and lists take the dtype ``like`` (the dtype of a sibling operand, so ``Mul(x, 0.5)``
  multiplies by a scalar of x's type), else int64 for integers and float32 for floats.
- ``attr_value(spec, value)`` gives a value of the attribute's kind or raises
  ``EvalError`` (an ``f32`` for an int attribute such as Cast's ``to`` is its ONNX code).
- Pattern constants match by value: ``matches_literal(array, value)`` is true when every
  element equals the literal after conversion to the array's dtype.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..ir.dtypes import ONNX_CODES
from ..ir.registry import AttrSpec
from ..ir.weights import Deferred, Weight
from .values import DType, EvalError, Tensor, kind


def _is_number(value: Any) -> bool:
    return isinstance(value, (bool, int, float, np.generic)) and not isinstance(value, str)


def input_constant(value: Any, like: str | None) -> Weight:
    """``value`` as a constant input (see the module invariants for its dtype)."""
    if isinstance(value, Tensor):
        return value.weight()
    if isinstance(value, np.ndarray | Deferred):
        return value
    if isinstance(value, DType):
        raise EvalError(f"an element type ({value}) is not a tensor")
    if _is_number(value) or (isinstance(value, tuple) and all(map(_is_number, value))):
        arr = np.asarray(value)
        target = like or ("int64" if arr.dtype.kind in "iub" else "float32")
        if like is None and arr.dtype.kind == "b":
            target = "bool"
        with np.errstate(all="ignore"):
            return arr.astype(target)
    raise EvalError(f"cannot make a tensor from {kind(value)}")


def attr_value(spec: AttrSpec, value: Any) -> Any:
    """``value`` converted to the kind of attribute ``spec``."""
    if isinstance(value, DType) and spec.kind == "int":
        return ONNX_CODES[value.name]
    if isinstance(value, np.ndarray) and spec.kind != "tensor":
        value = value.tolist() if value.ndim else value.item()
        value = tuple(value) if isinstance(value, list) else value
    convert = _CONVERT.get(spec.kind)
    if convert is None:
        return value
    try:
        return convert(value)
    except (TypeError, ValueError):
        raise EvalError(f"attribute '{spec.name}' takes {spec.kind}, got {kind(value)}"
                        ) from None


def _int(v: Any) -> int:
    if isinstance(v, float) and not v.is_integer():
        raise ValueError(v)
    if isinstance(v, (str, tuple)):
        raise TypeError(v)
    return int(v)


def _float(v: Any) -> float:
    if isinstance(v, (str, tuple)):
        raise TypeError(v)
    return float(v)


def _str(v: Any) -> str:
    if not isinstance(v, str):
        raise TypeError(v)
    return v


def _many(one: Any) -> Any:
    def convert(v: Any) -> tuple[Any, ...]:
        if not isinstance(v, tuple):
            raise TypeError(v)
        return tuple(one(x) for x in v)

    return convert


_CONVERT = {
    "int": _int, "float": _float, "string": _str,
    "ints": _many(_int), "floats": _many(_float), "strings": _many(_str),
}


def matches_literal(array: np.ndarray, value: Any) -> bool:
    """True when ``array`` equals the pattern literal ``value`` (a splat for a number)."""
    if isinstance(value, tuple):
        return array.shape == (len(value),) and bool(np.all(array == np.asarray(value)))
    if not _is_number(value) or array.size == 0:
        return False
    with np.errstate(all="ignore"):
        target = np.asarray(value).astype(array.dtype)
    return bool(np.all(array == target))
