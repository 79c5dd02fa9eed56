"""Symbolic values of small integer tensors: shape arithmetic with dynamic dims.

Exporters compute shapes at run time: ``Reshape(x, Concat(Unsqueeze(Gather(Shape(x), 0)),
[128], [12], [64]))``. With a dynamic batch, ``Shape(x)`` is no constant, so plain constant
folding learns nothing and every shape after the Reshape is unknown. Here such tensors carry a
*symbolic value*: a tuple whose entries are ints, dim symbols (``"batch"``) or ``None``
(unknown), so the Reshape's target is ``("batch", 128, 12, 64)`` and its output type is known.

Invariants:
- ``SymInts`` only describes int32/int64/bool tensors of rank 0 or 1 with at most ``MAX_LEN``
  elements; an entry is an int (0/1 for bool), a symbol that equals the named dim at run
  time, or ``None``; ``dtype`` is the tensor's element type.
- ``sym_eval`` is exact: it returns ``None`` rather than guess, and a value whose entries are
  all ints equals what the op's kernel computes.
- ``sym_output_type`` only ever *adds* knowledge to an inferred type (dims ``"?"`` filled in).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import SupportsIndex, SupportsInt

import numpy as np

from .graph import Dim, TensorType

MAX_LEN = 16
Entry = int | str | None
_TYPES = ("int64", "int32", "bool")


@dataclass(frozen=True, slots=True)
class SymInts:
    values: tuple[Entry, ...]
    scalar: bool = False
    dtype: str = "int64"

    @property
    def concrete(self) -> bool:
        return all(isinstance(v, int) for v in self.values)

    def array(self) -> np.ndarray:
        """The value as an array (only when ``concrete``)."""
        arr = np.array(self.values, dtype=self.dtype)
        return arr.reshape(()) if self.scalar else arr

    def like(self, values: tuple[Entry, ...], scalar: bool | None = None,
             dtype: str | None = None) -> SymInts:
        return SymInts(values, self.scalar if scalar is None else scalar, dtype or self.dtype)


# The symbolic value of one op's output from its attributes, operands' values and types.
Rule = Callable[[Mapping[str, object], Sequence[SymInts | None], Sequence[TensorType | None]],
                SymInts | None]


def of_array(value: np.ndarray | None) -> SymInts | None:
    """A constant as a symbolic value (small int or bool tensors of rank 0 or 1 only)."""
    if value is None or value.dtype.name not in _TYPES or value.ndim > 1:
        return None
    if value.size > MAX_LEN:
        return None
    return SymInts(tuple(int(v) for v in value.reshape(-1)), value.ndim == 0, value.dtype.name)


def _ints(s: SymInts | None) -> list[int] | None:
    if s is None or not s.concrete:
        return None
    return [int(v) for v in s.values]  # type: ignore[arg-type]


def _as_int(value: object) -> int:
    """An attribute value as an int (``int(value)``); a value ``int`` refuses raises."""
    if isinstance(value, (str, SupportsInt, SupportsIndex)):
        return int(value)
    raise TypeError(f"{type(value).__name__} is no int")


def sym_eval(op: str, attrs: Mapping[str, object], ins: Sequence[SymInts | None],
             types: Sequence[TensorType | None]) -> SymInts | None:
    """The symbolic value of ``op``'s (single) output, or ``None``."""
    fn = _RULES.get(op)
    if fn is None:
        return None
    try:
        out = fn(attrs, ins, types)
    except (IndexError, TypeError, ValueError, ZeroDivisionError):
        return None
    if out is None or len(out.values) > MAX_LEN:
        return None
    return out


def _shape(attrs: Mapping[str, object], ins: Sequence[SymInts | None],
           types: Sequence[TensorType | None]) -> SymInts | None:
    x = types[0] if types else None
    if x is None or x.shape is None:
        return None
    start = _as_int(attrs.get("start", 0) or 0)
    end = attrs.get("end")
    dims = x.shape[start:] if end is None else x.shape[start:_as_int(end)]
    return SymInts(tuple(None if d == "?" else d for d in dims))


def _gather(attrs: Mapping[str, object], ins: Sequence[SymInts | None],
            types: Sequence[TensorType | None]) -> SymInts | None:
    data, idx = ins[0], _ints(ins[1])
    if data is None or data.scalar or idx is None or _as_int(attrs.get("axis", 0) or 0) != 0:
        return None
    n = len(data.values)
    picked = tuple(data.values[i + n if i < 0 else i] for i in idx)
    return data.like(picked, scalar=ins[1] is not None and ins[1].scalar)


def _unsqueeze(attrs: Mapping[str, object], ins: Sequence[SymInts | None],
               types: Sequence[TensorType | None]) -> SymInts | None:
    x = ins[0]
    axes = _ints(ins[1]) if len(ins) > 1 else list(attrs.get("axes", ()) or ())  # type: ignore
    if x is None or not x.scalar or axes not in ([0], [-1]):
        return None
    return x.like(x.values, scalar=False)


def _squeeze(attrs: Mapping[str, object], ins: Sequence[SymInts | None],
             types: Sequence[TensorType | None]) -> SymInts | None:
    x = ins[0]
    if x is None or x.scalar or len(x.values) != 1:
        return None
    return x.like(x.values, scalar=True)


def _concat(attrs: Mapping[str, object], ins: Sequence[SymInts | None],
            types: Sequence[TensorType | None]) -> SymInts | None:
    if any(s is None or s.scalar for s in ins) or _as_int(attrs.get("axis", 0) or 0) not in (0, -1):
        return None
    return ins[0].like(tuple(v for s in ins for v in s.values))  # type: ignore[union-attr]


def _reshape_value(attrs: Mapping[str, object], ins: Sequence[SymInts | None],
                   types: Sequence[TensorType | None]) -> SymInts | None:
    """Reshape of a 1-D or scalar value to 1-D or scalar keeps its entries."""
    x, target = ins[0], _ints(ins[1]) if len(ins) > 1 else None
    if x is None or target is None or len(target) > 1:
        return None
    if target and target[0] not in (-1, len(x.values)):
        return None
    return x.like(x.values, scalar=not target)


def _same(attrs: Mapping[str, object], ins: Sequence[SymInts | None],
          types: Sequence[TensorType | None]) -> SymInts | None:
    return ins[0] if ins else None


_CAST_TO: Mapping[object, str] = {6: "int32", 7: "int64"}  # ONNX element type codes


def _cast(attrs: Mapping[str, object], ins: Sequence[SymInts | None],
          types: Sequence[TensorType | None]) -> SymInts | None:
    to = _CAST_TO.get(attrs.get("to"))
    return None if to is None or ins[0] is None else ins[0].like(ins[0].values, dtype=to)


def _slice(attrs: Mapping[str, object], ins: Sequence[SymInts | None],
           types: Sequence[TensorType | None]) -> SymInts | None:
    x = ins[0]
    params = [_ints(s) for s in ins[1:]]
    if x is None or x.scalar or any(p is None for p in params) or len(params) < 2:
        return None
    starts, ends = params[0], params[1]
    axes = params[2] if len(params) > 2 else [0]
    steps = params[3] if len(params) > 3 else [1]
    if axes not in ([0], [-1]) or len(starts) != 1:  # type: ignore[arg-type]
        return None
    return x.like(x.values[slice(starts[0], ends[0], steps[0])])  # type: ignore[index]


def _spread(*xs: SymInts) -> list[tuple[Entry, ...]] | None:
    """The entries of several values broadcast to one length (1-D or scalar only)."""
    n = max(len(x.values) for x in xs)
    if any(len(x.values) not in (1, n) for x in xs):
        return None
    return [x.values * n if len(x.values) == 1 else x.values for x in xs]


def _arith(fn: Callable[[int, int], int]) -> Rule:
    def rule(attrs: Mapping[str, object], ins: Sequence[SymInts | None],
             types: Sequence[TensorType | None]) -> SymInts | None:
        a, b = ins[0], ins[1]
        spread = None if a is None or b is None else _spread(a, b)
        if spread is None:
            return None
        out = tuple(fn(x, y) if isinstance(x, int) and isinstance(y, int)
                    else None for x, y in zip(*spread, strict=True))
        return a.like(out, scalar=a.scalar and b.scalar)  # type: ignore[union-attr]
    return rule


def _equal(attrs: Mapping[str, object], ins: Sequence[SymInts | None],
           types: Sequence[TensorType | None]) -> SymInts | None:
    a, b = ins[0], ins[1]
    spread = None if a is None or b is None else _spread(a, b)
    if spread is None:
        return None
    out = tuple(_same_entry(x, y) for x, y in zip(*spread, strict=True))
    return SymInts(out, a.scalar and b.scalar, "bool")  # type: ignore[union-attr]


def _same_entry(x: Entry, y: Entry) -> Entry:
    if isinstance(x, int) and isinstance(y, int):
        return int(x == y)
    if isinstance(x, str) and isinstance(y, str) and x == y:
        return 1  # one symbol is one size
    if isinstance(x, str) and isinstance(y, int) and y < 0 or (
            isinstance(y, str) and isinstance(x, int) and x < 0):
        return 0  # a dim is never negative
    return None


def _where(attrs: Mapping[str, object], ins: Sequence[SymInts | None],
           types: Sequence[TensorType | None]) -> SymInts | None:
    c, x, y = ins[0], ins[1], ins[2]
    spread = None if c is None or x is None or y is None else _spread(c, x, y)
    if spread is None:
        return None
    out = tuple(None if k is None else (a if k else b) for k, a, b in zip(*spread, strict=True))
    return x.like(out, scalar=c.scalar and x.scalar and y.scalar)  # type: ignore[union-attr]


def _div(x: int, y: int) -> int:
    return int(x / y) if y else 0  # ONNX integer Div truncates toward zero


_RULES: dict[str, Rule] = {
    "Shape": _shape, "Gather": _gather, "Unsqueeze": _unsqueeze, "Squeeze": _squeeze,
    "Concat": _concat, "Identity": _same, "Cast": _cast, "Slice": _slice,
    "Add": _arith(lambda x, y: x + y), "Sub": _arith(lambda x, y: x - y),
    "Mul": _arith(lambda x, y: x * y), "Div": _arith(_div), "Equal": _equal, "Where": _where,
    "Reshape": _reshape_value,
}

SYM_OPS = frozenset(_RULES)  # the ops ``sym_eval`` knows

# Ops whose output shape is an input's value: (op, index of that input).
SHAPE_INPUT = {"Reshape": 1, "Expand": 1, "ConstantOfShape": 0}


def sym_output_type(op: str, attrs: Mapping[str, object], inferred: TensorType,
                    types: Sequence[TensorType | None], syms: Sequence[SymInts | None]
                    ) -> TensorType:
    """``inferred`` with the dims it could not know filled in from a symbolic shape input."""
    index = SHAPE_INPUT.get(op)
    if index is None or index >= len(syms) or syms[index] is None or inferred.shape is None:
        return inferred
    if all(d != "?" for d in inferred.shape):
        return inferred
    target = syms[index].values  # type: ignore[union-attr]
    if op == "Reshape":
        dims = _reshape(types[0], target, bool(attrs.get("allowzero", 0)))
    elif op == "Expand":
        dims = _expand(types[0], target)
    else:
        dims = tuple("?" if v is None else v for v in target)
    if dims is None or len(dims) != len(inferred.shape):
        return inferred
    merged = tuple(d if d != "?" else s for d, s in zip(inferred.shape, dims, strict=True))
    return TensorType(inferred.dtype, merged)


def _reshape(x: TensorType | None, target: Sequence[Entry], allowzero: bool
             ) -> tuple[Dim, ...] | None:
    if x is None or x.shape is None:
        return None
    from .ops.shape import _infer_minus_one

    out: list[Dim] = []
    for i, t in enumerate(target):
        if t == 0 and not allowzero:
            out.append(x.shape[i] if i < len(x.shape) else "?")
        else:
            out.append("?" if t is None else t)
    if -1 in out:
        try:
            out[out.index(-1)] = _infer_minus_one(x.shape, out)
        except Exception:  # noqa: BLE001 - an impossible reshape is the kernel's to report
            return None
    return tuple(out)


def _expand(x: TensorType | None, target: Sequence[Entry]) -> tuple[Dim, ...] | None:
    if x is None or x.shape is None:
        return None
    rank = max(len(x.shape), len(target))
    a = (1,) * (rank - len(x.shape)) + tuple(x.shape)
    b = (1,) * (rank - len(target)) + tuple("?" if v is None else v for v in target)
    return tuple(_expand_dim(p, q) for p, q in zip(a, b, strict=True))


def _expand_dim(p: Dim, q: Dim) -> Dim:
    if p == 1:
        return q
    if q == 1 or isinstance(p, int):
        return p
    return q if isinstance(q, int) else p  # a symbol against a size: the size
