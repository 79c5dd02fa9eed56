"""Compile-time values of the rule language and the operations on them.

Values are Python ``int``/``float``/``bool``/``str``/``None``, tuples (list literals,
shapes, attribute lists), NumPy arrays, ``DType`` and ``Tensor`` (a pattern variable: the
type of its e-class and its constant value when known).

Invariants:
- Arithmetic on arrays runs the op registry's kernels (Add, Sub, Mul, Div, Pow, Neg and the
  unary math built-ins), elementwise; tuples and tensors become arrays first; on two plain
  numbers it is Python's. A result over ``ir.weights.DEFER_BYTES`` (a folded weight,
  ``w * bcast(s, rank(w), axis=0)``) is a ``Deferred`` constant: its type now, its values
  computed by the same kernel when the ``.om`` is written, if it is kept. Anything but
  arithmetic that reads a deferred value (a guard such as ``all(abs(w2) < inf)``) computes it
  then and drops it. ``==`` and
  ``!=`` between two non-array values compare whole values (``shape(a) == shape(b)`` is a
  bool); with an array on either side they are elementwise. An element type equals its
  ONNX code (``f32 == 1``), so Cast's ``to`` attribute compares with ``f32``.
- Integers stay within 64 bits and arrays within ``MAX_ELEMENTS``; anything larger is an
  ``EvalError`` (so no rule text can make evaluation hang or exhaust memory).
- Failures are ``EvalError``: the caller turns them into a guard's failure reason (apply
  time) or an inconclusive candidate (the soundness check). Never a ``GeError``: a guard
  that cannot be evaluated on one match is not bad input.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import GeError
from ..ir.dtypes import ONNX_CODES
from ..ir.graph import TensorType
from ..ir.weights import DEFER_BYTES, Deferred, Weight, materialize

MAX_ELEMENTS = 1 << 24
INT_LIMIT = 1 << 63


class EvalError(Exception):
    """An expression could not be evaluated on these values (message says why)."""


@dataclass(frozen=True, slots=True)
class DType:
    """An element type as a value (``f32``); ``name`` is the NumPy name."""

    name: str

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True, slots=True, eq=False)
class Tensor:
    """A pattern variable's e-class: its type and, if known, its constant value."""

    name: str
    type: TensorType | None
    value: Weight | None = None
    dims: tuple[int | str | None, ...] | None = None  # symbolic value of a shape tensor

    def array(self) -> np.ndarray:
        """The constant value (a deferred one computed now)."""
        return materialize(self.weight())

    def weight(self) -> Weight:
        """The constant value as it is held (a deferred one not computed)."""
        if self.value is None:
            raise EvalError(f"{self.name} is not a constant")
        if self.type is not None and self.type.format != "ND":
            raise EvalError(f"{self.name} is held in format {self.type.format}: its array is "
                            "not its elements (transdata() gives them in another format)")
        return self.value


def kind(value: Any) -> str:
    """A short description of a value's kind for messages."""
    if isinstance(value, Tensor):
        return f"tensor {value.name}"
    if isinstance(value, np.ndarray | Deferred):
        return f"array of shape {list(value.shape)}"
    if value is None:
        return "none"
    return type(value).__name__


def to_array(value: Any) -> np.ndarray:
    """A value as a NumPy array (tensors by their constant value)."""
    if isinstance(value, Tensor):
        return value.array()
    if isinstance(value, np.ndarray):
        return value
    if isinstance(value, Deferred):
        return value.materialize()
    if isinstance(value, (bool, int, float, np.generic)):
        return np.asarray(value)
    if isinstance(value, tuple) and all(isinstance(v, (int, float, np.generic)) for v in value):
        return np.asarray(value)
    raise EvalError(f"expected numbers, got {kind(value)}")


def is_array_like(value: Any) -> bool:
    return isinstance(value, (np.ndarray, Tensor, Deferred))


def check_int(value: Any) -> Any:
    """``value`` unchanged unless it is an integer beyond 64 bits."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= INT_LIMIT:
        raise EvalError("integer overflow (beyond 64 bits)")
    return value


def check_size(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    """The broadcast shape; refuses shapes that do not broadcast or whose broadcast is too
    large."""
    try:
        out = np.broadcast_shapes(*shapes)
    except ValueError:
        raise EvalError(f"shapes {' and '.join(str(list(s)) for s in shapes)} "
                        "do not broadcast") from None
    if int(np.prod(out, dtype=np.int64)) > MAX_ELEMENTS:
        raise EvalError(f"result would hold more than {MAX_ELEMENTS} elements")
    return tuple(int(d) for d in out)


def _scalar(value: Any) -> bool:
    return isinstance(value, (bool, int, float)) and not isinstance(value, np.generic)


def _pow(a: Any, b: Any) -> Any:
    if isinstance(a, int) and isinstance(b, int) and not isinstance(b, bool):
        if b < 0:
            return float(a) ** b if a else _raise("0 cannot be raised to a negative power")
        if a not in (0, 1, -1) and b * max(abs(a).bit_length(), 1) > 64:
            raise EvalError("integer overflow (beyond 64 bits)")
    return a**b


def _raise(message: str) -> Any:
    raise EvalError(message)


def _div(a: Any, b: Any) -> Any:
    if _scalar(a) and _scalar(b) and b == 0:
        raise EvalError("division by zero")
    return a / b


def _floordiv(a: Any, b: Any) -> Any:
    if _scalar(a) and _scalar(b) and b == 0:
        raise EvalError("division by zero")
    return a // b


def _mod(a: Any, b: Any) -> Any:
    if _scalar(a) and _scalar(b) and b == 0:
        raise EvalError("division by zero")
    return a % b


ARITHMETIC: dict[str, Callable[[Any, Any], Any]] = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": _div, "//": _floordiv,
    "%": _mod, "**": _pow,
}
ORDERING: dict[str, Callable[[Any, Any], Any]] = {
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
}


def arithmetic(op: str, a: Any, b: Any) -> Any:
    """``a op b``: Python's on two scalars; otherwise the op registry's kernel (``+`` Add,
    ``-`` Sub, ``*`` Mul, ``/`` Div, ``**`` Pow), so a folded constant is computed exactly as
    the graph node it replaces would compute it. ``//`` and ``%`` on arrays are NumPy's."""
    fn = ARITHMETIC[op]
    if _scalar(a) and _scalar(b):
        try:
            return check_int(fn(a, b))
        except (OverflowError, ZeroDivisionError) as e:
            raise EvalError(str(e)) from None
    x, y = _operand(a), _operand(b)
    shape = check_size(np.shape(x), np.shape(y))
    if op == "**" and _dtype_of(x).kind in "iu" and np.any(to_array(y) < 0):
        raise EvalError("integers cannot be raised to negative powers")
    if op in KERNELS:
        return _elementwise(KERNELS[op], x, y, shape, keep_second=op == "**")
    with np.errstate(all="ignore"):
        return fn(to_array(x) if isinstance(x, Deferred) else x,
                  to_array(y) if isinstance(y, Deferred) else y)


KERNELS = {"+": "Add", "-": "Sub", "*": "Mul", "/": "Div", "**": "Pow"}


def same_dtype(x: Any, y: Any, keep_second: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Both operands as arrays of one dtype, NumPy's promotion with Python scalars weak
    (``f32 array + 1e-5`` stays f32; ``i64 array * 0.5`` becomes f64)."""
    target = np.result_type(x, y)
    xa = np.asarray(x, dtype=target)
    ya = np.asarray(y) if keep_second and not _scalar(y) else np.asarray(y, dtype=target)
    return xa, ya


def _dtype_of(value: Any) -> np.dtype[Any]:
    return value.dtype if isinstance(value, np.ndarray | Deferred) else np.asarray(value).dtype


def _elementwise(op: str, x: Any, y: Any, shape: tuple[int, ...], keep_second: bool) -> Any:
    """``kernel(op, *same_dtype(x, y))``, deferred when the result is over ``DEFER_BYTES``."""
    proto = [v if _scalar(v) else _dtype_of(v) for v in (x, y)]
    dtype = np.result_type(*proto)
    size = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if size <= DEFER_BYTES:
        return kernel(op, *same_dtype(to_array(x) if isinstance(x, Deferred) else x,
                                      to_array(y) if isinstance(y, Deferred) else y,
                                      keep_second=keep_second))
    slots = [v for v in (x, y) if not _scalar(v)]

    def compute(*arrays: np.ndarray) -> np.ndarray:
        given = iter(arrays)
        a, b = (v if _scalar(v) else next(given) for v in (x, y))
        return kernel(op, *same_dtype(a, b, keep_second=keep_second))

    label = f"{op}({', '.join(repr(v) if _scalar(v) else '_' for v in (x, y))})"
    return Deferred(dtype, shape, compute, slots, label)


def kernel(op: str, *inputs: np.ndarray) -> np.ndarray:
    """The registry's NumPy kernel of ai.onnx ``op`` on ``inputs`` (no attributes)."""
    from ..ir.registry import default_registry

    schema = default_registry().get(op)
    try:
        with np.errstate(all="ignore"):
            return np.asarray(schema.kernel(list(inputs), schema.call({}))[0])
    except (GeError, ValueError, TypeError) as e:
        raise EvalError(f"{op}: {e}") from None


def _operand(value: Any) -> Any:
    """Python scalars stay scalars (weak in dtype promotion); a deferred constant stays
    deferred; anything else an array."""
    if _scalar(value) or isinstance(value, Deferred):
        return value
    if isinstance(value, Tensor):
        return value.weight()
    return to_array(value)


def negate(value: Any) -> Any:
    if _scalar(value):
        return check_int(-value)
    return kernel("Neg", to_array(value))


def equal(a: Any, b: Any) -> Any:
    """``a == b``: elementwise with an array on either side, a bool otherwise."""
    if is_array_like(a) or is_array_like(b):
        x, y = to_array(a), to_array(b)
        check_size(x.shape, y.shape)
        return np.equal(x, y)
    return same(a, b)


def same(a: Any, b: Any) -> bool:
    """Whole-value equality (arrays: same shape and elements)."""
    if is_array_like(a) or is_array_like(b):
        try:
            x, y = to_array(a), to_array(b)
        except EvalError:
            return False
        return x.shape == y.shape and bool(np.all(x == y))
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(same(p, q) for p, q in zip(a, b, strict=True))
    if isinstance(a, DType) != isinstance(b, DType):  # Cast's `to` holds an ONNX type code
        dt, code = (a, b) if isinstance(a, DType) else (b, a)
        return isinstance(code, int) and ONNX_CODES.get(dt.name) == code
    return bool(a == b)


def order(op: str, a: Any, b: Any) -> Any:
    if is_array_like(a) or is_array_like(b):
        x, y = to_array(a), to_array(b)
        check_size(x.shape, y.shape)
        return ORDERING[op](x, y)
    try:
        return bool(ORDERING[op](a, b))
    except TypeError:
        raise EvalError(f"cannot compare {kind(a)} and {kind(b)} with {op}") from None


def contains(container: Any, item: Any) -> bool:
    """``item in container`` by whole-value equality."""
    if isinstance(container, Tensor | np.ndarray):
        return bool(np.any(to_array(container) == to_array(item)))
    if isinstance(container, tuple):
        return any(same(item, c) for c in container)
    if isinstance(container, str) and isinstance(item, str):
        return item in container
    raise EvalError(f"'in' needs a list, a tuple or an array, got {kind(container)}")


def truth(value: Any) -> bool:
    """A guard's value as a bool: ``true``/``false`` or a one-element boolean array."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, np.ndarray) and value.dtype == np.bool_:
        if value.size == 1:
            return bool(value.reshape(()))
        raise EvalError(f"a condition gave {value.size} values; wrap it in all() or any()")
    raise EvalError(f"a condition must be true or false, got {kind(value)}")


def index(base: Any, idx: Any) -> Any:
    """``base[idx]``: an element, or a gather when ``idx`` is a list (``p[q]``)."""
    if isinstance(base, Tensor):
        base = base.array()
    if isinstance(idx, (tuple, np.ndarray, Tensor)):
        positions = to_array(idx)
        if positions.dtype.kind not in "iu":
            raise EvalError(f"indices must be integers, got {kind(idx)}")
        gathered = [index(base, int(i)) for i in positions.reshape(-1)]
        return tuple(gathered) if not isinstance(base, np.ndarray) else np.asarray(gathered)
    if not isinstance(idx, (int, np.integer)) or isinstance(idx, bool):
        raise EvalError(f"an index must be an integer, got {kind(idx)}")
    try:
        item = base[int(idx)]
    except IndexError:
        raise EvalError(f"index {idx} is out of range for length {len(base)}") from None
    except TypeError:
        raise EvalError(f"{kind(base)} cannot be indexed") from None
    return item.item() if isinstance(item, np.generic) else item


def slice_of(base: Any, lo: Any, hi: Any) -> Any:
    if isinstance(base, Tensor):
        base = base.array()
    for bound in (lo, hi):
        if bound is not None and (not isinstance(bound, (int, np.integer))
                                  or isinstance(bound, bool)):
            raise EvalError(f"slice bounds must be integers, got {kind(bound)}")
    if not isinstance(base, (tuple, np.ndarray, str)):
        raise EvalError(f"{kind(base)} cannot be sliced")
    return base[lo:hi]
