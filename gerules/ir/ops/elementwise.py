"""Elementwise arithmetic, comparison, logic and math ops (ai.onnx).

Invariants:
- Every kernel keeps its operand dtype (NumPy would promote int32 / float16 mixes; the
  builders cast back), comparisons and logic give ``bool``.
- Integer Div truncates toward zero and refuses a zero divisor, as ONNX says; integer Mod
  follows the divisor's sign unless ``fmod=1``.
- Variadic Min/Max/Sum/Mean broadcast all their operands together (opset 8 semantics).
- float16 transcendental math runs in float32 and is rounded back once.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ...errors import KernelError, ShapeError
from ..dtypes import INTS, OP_FLOATS
from ..graph import TensorType
from ..registry import COMMUTATIVE, ELEMENTWISE, INPLACE, Call, OpSchema
from . import _special
from ._common import (
    Arrays,
    Types,
    at,
    attr,
    binary,
    broadcast,
    need,
    out_elems,
    same_dtype,
    schema,
    unary,
    widen,
    with_step,
)

BOOL = frozenset({"bool"})


def _div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype.kind not in "iu":
        return np.asarray(np.divide(a, b))
    if np.any(b == 0):
        raise KernelError("Div: integer division by zero")
    q = np.floor_divide(a, b)
    fix = (np.remainder(a, b) != 0) & ((a < 0) != (b < 0))
    return np.asarray(q + fix.astype(q.dtype))


def _div_into(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
    if a.dtype.kind in "iu":
        out[...] = _div(a, b)
    else:
        np.divide(a, b, out=out)


def _mod(a: np.ndarray, b: np.ndarray, fmod: int = 0) -> np.ndarray:
    """``A - trunc(A / B) * B`` with fmod=1, else ``A - floor(A / B) * B`` (opset 28 also
    defines the latter for floats; earlier opsets leave it undefined, so it is allowed)."""
    if a.dtype.kind in "iu" and np.any(b == 0):
        raise KernelError("Mod: integer modulo by zero")
    return np.asarray(np.fmod(a, b) if fmod else np.mod(a, b))


def _pow_infer(types: Types, _c: object, call: Call) -> list[TensorType]:
    x, y = need(at(types, 0), "Pow", "X"), need(at(types, 1), "Pow", "Y")
    return [TensorType(x.dtype, broadcast(x.shape, y.shape))]


def _pow_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    x, y = need(at(inputs, 0), "Pow", "X"), need(at(inputs, 1), "Pow", "Y")
    with np.errstate(all="ignore"):
        if x.dtype.kind in "iu" and y.dtype.kind in "iu" and not np.any(y < 0):
            out = np.power(x, y.astype(x.dtype))
        elif x.dtype.kind in "iu":
            out = np.power(x.astype(np.float64), y.astype(np.float64))
        else:
            out = np.power(widen(x), y.astype(widen(x).dtype))
    return [np.asarray(out).astype(x.dtype)]


def _shift(a: np.ndarray, b: np.ndarray, direction: str = "") -> np.ndarray:
    """Opset 28 rules: right shifts of signed values are arithmetic, left shifts drop bits
    past the sign bit, and a shift outside ``[0, bits)`` leaves only the sign fill."""
    if direction not in ("LEFT", "RIGHT"):
        raise KernelError(f"BitShift: direction must be LEFT or RIGHT, got {direction!r}")
    a, b = np.broadcast_arrays(a, b)
    bits = np.iinfo(a.dtype).bits
    valid = (b >= 0) & (b < bits)
    count = np.where(valid, b, 0)
    if direction == "RIGHT":
        out = np.right_shift(a, count.astype(a.dtype))
        fill = np.where(a < 0, -1, 0) if a.dtype.kind == "i" else 0
        return np.where(valid, out, fill).astype(a.dtype)
    unsigned = np.dtype(f"uint{bits}")
    out = np.left_shift(a.view(unsigned) if a.dtype.kind == "i" else a, count.astype(unsigned))
    return np.where(valid, out.view(a.dtype), 0).astype(a.dtype)


def variadic(op: str, since: int, fn: Callable[[list[np.ndarray]], np.ndarray],
             doc: str) -> OpSchema:
    """Min/Max/Sum/Mean: one or more operands broadcast together."""

    def infer(types: Types, _c: object, call: Call) -> list[TensorType]:
        present = [t for t in types if t is not None]
        if not present:
            raise ShapeError(f"{op} needs at least one input")
        return [TensorType(same_dtype(present, op), broadcast(*[t.shape for t in present]))]

    def kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
        xs = [x for x in inputs if x is not None]
        return [np.asarray(fn(xs)).astype(xs[0].dtype, copy=False)]

    return schema(op, since, "data_0*", "out", infer, kernel, doc=doc,
                  traits={ELEMENTWISE, COMMUTATIVE, INPLACE},
                  flops=lambda ins, outs, call: max(1, len(ins) - 1) * (outs[0].numel() or 0))


def _reduce_all(fn: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Callable[..., np.ndarray]:
    def run(xs: list[np.ndarray]) -> np.ndarray:
        out = xs[0]
        for x in xs[1:]:
            out = fn(out, x)
        return np.broadcast_to(out, np.broadcast_shapes(*[x.shape for x in xs]))

    return run


def _mean(xs: list[np.ndarray]) -> np.ndarray:
    return _reduce_all(np.add)(xs) / len(xs)


def _where_infer(types: Types, _c: object, call: Call) -> list[TensorType]:
    c = need(at(types, 0), "Where", "condition")
    x, y = need(at(types, 1), "Where", "X"), need(at(types, 2), "Where", "Y")
    if c.dtype != "bool":
        raise ShapeError(f"Where: condition must be bool, got {c.dtype}")
    return [TensorType(same_dtype([x, y], "Where"), broadcast(c.shape, x.shape, y.shape))]


def _where_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    c, x, y = (need(at(inputs, i), "Where") for i in range(3))
    return [np.where(c, x, y)]


def _round(x: np.ndarray) -> np.ndarray:
    return np.round(x)  # NumPy rounds halves to even, as ONNX does


def _isinf(x: np.ndarray, detect_negative: int = 1, detect_positive: int = 1) -> np.ndarray:
    return (np.isneginf(x) & bool(detect_negative)) | (np.isposinf(x) & bool(detect_positive))


SIGNED = frozenset(OP_FLOATS | {"int8", "int16", "int32", "int64"})

FLOAT = OP_FLOATS

SCHEMAS = [
    binary("Add", 7, np.add, commutative=True, doc="C = A + B with broadcasting"),
    binary("Sub", 7, np.subtract, doc="C = A - B with broadcasting"),
    binary("Mul", 7, np.multiply, commutative=True, doc="C = A * B with broadcasting"),
    binary("Div", 7, _div, into=_div_into, doc="C = A / B; integer division truncates toward zero"),
    binary("Mod", 10, _mod, attrs=[attr("fmod", "int", 0)],
           doc="remainder with the divisor's sign, or the dividend's with fmod=1"),
    binary("BitShift", 11, _shift, attrs=[attr("direction", "string", required=True)],
           dtypes=frozenset({"uint8", "uint16", "uint32", "uint64"}),
           doc="unsigned shift LEFT or RIGHT by B bits"),
    binary("BitShift", 28, _shift, attrs=[attr("direction", "string", required=True)],
           dtypes=frozenset(INTS),
           doc="shift LEFT or RIGHT by B bits; signed right shifts are arithmetic"),
    schema("Pow", 7, "X Y", "Z", _pow_infer, _pow_kernel, traits={ELEMENTWISE, INPLACE},
           flops=out_elems(4), doc="Z = X ** Y; the exponent's dtype may differ, Z has X's"),
    binary("Equal", 7, np.equal, commutative=True, out_dtype="bool",
           doc="elementwise A == B as bool"),
    binary("Less", 7, np.less, out_dtype="bool", doc="elementwise A < B as bool"),
    binary("Greater", 7, np.greater, out_dtype="bool", doc="elementwise A > B as bool"),
    binary("LessOrEqual", 12, np.less_equal, out_dtype="bool",
           doc="elementwise A <= B as bool"),
    binary("GreaterOrEqual", 12, np.greater_equal, out_dtype="bool",
           doc="elementwise A >= B as bool"),
    binary("And", 7, np.logical_and, commutative=True, dtypes=BOOL,
           doc="elementwise logical and of bools"),
    binary("Or", 7, np.logical_or, commutative=True, dtypes=BOOL,
           doc="elementwise logical or of bools"),
    binary("Xor", 7, np.logical_xor, commutative=True, dtypes=BOOL,
           doc="elementwise logical xor of bools"),
    binary("BitwiseAnd", 18, np.bitwise_and, commutative=True, dtypes=frozenset(INTS),
           doc="bitwise and of integers"),
    binary("BitwiseOr", 18, np.bitwise_or, commutative=True, dtypes=frozenset(INTS),
           doc="bitwise or of integers"),
    binary("BitwiseXor", 18, np.bitwise_xor, commutative=True, dtypes=frozenset(INTS),
           doc="bitwise xor of integers"),
    unary("BitwiseNot", 18, np.invert, dtypes=frozenset(INTS), doc="bitwise not of integers"),
    unary("Not", 1, np.logical_not, dtypes=BOOL, doc="elementwise logical not of bools"),
    variadic("Min", 8, _reduce_all(np.minimum), "elementwise minimum of all inputs"),
    variadic("Max", 8, _reduce_all(np.maximum), "elementwise maximum of all inputs"),
    variadic("Sum", 8, _reduce_all(np.add), "elementwise sum of all inputs"),
    variadic("Mean", 8, _mean, "elementwise mean of all inputs"),
    schema("Where", 9, "condition X Y", "output", _where_infer, _where_kernel,
           traits={ELEMENTWISE}, doc="X where condition else Y, broadcast"),
    unary("Neg", 6, np.negative, dtypes=SIGNED, doc="elementwise negation, Y = -X"),
    unary("Abs", 6, np.abs, doc="elementwise absolute value, Y = |X|"),
    unary("Sign", 9, np.sign, doc="-1, 0 or 1 by the sign of X"),
    unary("Reciprocal", 6, lambda x: 1 / x, dtypes=FLOAT,
          doc="elementwise reciprocal, Y = 1 / X"),
    unary("Sqrt", 6, np.sqrt, dtypes=FLOAT, flops_per_elem=4, doc="elementwise square root"),
    unary("Exp", 6, np.exp, dtypes=FLOAT, flops_per_elem=4,
          doc="elementwise exponential, Y = e^X"),
    unary("Log", 6, np.log, dtypes=FLOAT, flops_per_elem=4,
          doc="elementwise natural logarithm"),
    unary("Floor", 6, np.floor, dtypes=FLOAT, doc="elementwise round toward -inf"),
    unary("Ceil", 6, np.ceil, dtypes=FLOAT, doc="elementwise round toward +inf"),
    unary("Round", 11, _round, dtypes=FLOAT, doc="round half to even"),
    with_step(unary("Erf", 9, _special.erf, into=_special.erf, flops_per_elem=8,
                    doc="the Gauss error function"), _special.erf32, frozenset({"float32"})),
    unary("Sin", 7, np.sin, flops_per_elem=4, doc="elementwise sine"),
    unary("Cos", 7, np.cos, flops_per_elem=4, doc="elementwise cosine"),
    unary("Tan", 7, np.tan, flops_per_elem=4, doc="elementwise tangent"),
    unary("Asin", 7, np.arcsin, flops_per_elem=4, doc="elementwise arcsine"),
    unary("Acos", 7, np.arccos, flops_per_elem=4, doc="elementwise arccosine"),
    unary("Atan", 7, np.arctan, flops_per_elem=4, doc="elementwise arctangent"),
    unary("Sinh", 9, np.sinh, flops_per_elem=4, doc="elementwise hyperbolic sine"),
    unary("Cosh", 9, np.cosh, flops_per_elem=4, doc="elementwise hyperbolic cosine"),
    unary("Asinh", 9, np.arcsinh, flops_per_elem=4, doc="inverse hyperbolic sine"),
    unary("Acosh", 9, np.arccosh, flops_per_elem=4, doc="inverse hyperbolic cosine"),
    unary("Atanh", 9, np.arctanh, flops_per_elem=4, doc="inverse hyperbolic tangent"),
    unary("IsNaN", 9, np.isnan, dtypes=FLOAT, out_dtype="bool",
          doc="elementwise test for NaN (bool)"),
    unary("IsInf", 10, _isinf, dtypes=FLOAT, out_dtype="bool",
          attrs=[attr("detect_negative", "int", 1), attr("detect_positive", "int", 1)],
          doc="X is +inf or -inf (each side can be switched off)"),
]
