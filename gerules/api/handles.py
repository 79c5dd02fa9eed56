"""Tensor handles: what the builder's methods return and take as operands.

Invariants:
- A ``Tensor`` is a light frozen value: the tensor's name, its type as inferred when it was
  made, and the id of the builder that made it (not part of equality). It holds no reference
  to the builder, so keeping handles never keeps a graph alive.
- An op ``Input`` is a ``Tensor``, a tensor name, ``None`` (an omitted optional input), or a
  NumPy array or Python value that the builder stores as a constant.
- Python values are *weak*: in elementwise ops they take the dtype of the first non-bool
  tensor operand, elsewhere ints become int64, floats float32 and bools bool. An integer
  target must hold the value exactly and a float target must not overflow to infinity;
  anything else is refused rather than silently changed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypeAlias

import numpy as np

from ..errors import UsageError
from ..ir import dtypes
from ..ir.graph import Shape, TensorType
from ..ir.registry import ELEMENTWISE, OpSchema

Weak: TypeAlias = "bool | int | float | Sequence[Weak]"
"""A Python number or a (nested) list of them: a value without a dtype of its own."""
Input: TypeAlias = "Tensor | str | None | np.ndarray | np.generic | Weak"
"""What an op takes as one input: a handle, a tensor name, ``None`` (omitted), a constant."""


@dataclass(frozen=True, slots=True)
class Tensor:
    """A tensor of a graph being built: its name and inferred type.

    Use it as an input of later ops, as a graph output, or read ``shape`` and ``dtype``.
    Symbolic dims are names (``"N"``); ``shape is None`` means the rank is unknown.
    """

    name: str
    type: TensorType
    owner: int = field(default=0, compare=False, repr=False)

    @property
    def shape(self) -> Shape | None:
        return self.type.shape

    @property
    def dtype(self) -> str:
        return self.type.dtype

    @property
    def rank(self) -> int | None:
        return self.type.rank

    def __str__(self) -> str:
        return f"{self.name}: {self.type}"


def dtype_name(dtype: object, where: str) -> str:
    """The IR name of a dtype given as a string, a NumPy dtype or a NumPy scalar type."""
    try:
        name = str(np.dtype(dtype).name)  # type: ignore[call-overload]
    except TypeError:
        raise UsageError(f"{where}: {dtype!r} is not a dtype") from None
    if name not in dtypes.ONNX_CODES:
        supported = ", ".join(sorted(dtypes.ONNX_CODES))
        raise UsageError(f"{where}: dtype {name} is not supported (supported: {supported})")
    return name


def is_weak(value: object) -> bool:
    """A Python number, bool or (nested) list/tuple of them: a value without a dtype."""
    if isinstance(value, bool | int | float):
        return True
    if isinstance(value, list | tuple):
        return all(is_weak(v) for v in value)
    return False


def natural_dtype(array: np.ndarray) -> str:
    """The dtype a weak value takes when no operand decides: int64, float32 or bool."""
    if array.dtype == np.bool_:
        return "bool"
    if np.issubdtype(array.dtype, np.integer):
        return "int64"
    return "float32"


def weak_array(value: object, dtype: str | None, where: str) -> np.ndarray:
    """A weak Python value as an array of ``dtype`` (its natural dtype when ``None``)."""
    try:
        raw = np.asarray(value)
    except ValueError as e:  # ragged lists
        raise UsageError(f"{where}: {e}") from None
    if raw.dtype == object or raw.dtype.kind not in "biuf":
        raise UsageError(f"{where}: cannot make a tensor of {value!r}")
    target = dtype or natural_dtype(raw)
    with np.errstate(all="ignore"):
        out = raw.astype(target)
    if not _holds(raw, out):
        raise UsageError(f"{where}: {value!r} does not fit {target}; pass a NumPy array of "
                         "the dtype you mean")
    return out


def _holds(raw: np.ndarray, out: np.ndarray) -> bool:
    """Integers and bools must be kept exactly; floats may round but not overflow."""
    if out.dtype.kind == "f":
        return bool(np.all(np.isfinite(out) | ~np.isfinite(raw.astype(np.float64))))
    return bool(np.array_equal(out.astype(np.float64), raw.astype(np.float64)))


def array_of(value: np.ndarray | np.generic, where: str) -> np.ndarray:
    """A NumPy operand as an array, refusing dtypes the IR cannot hold."""
    array = np.asarray(value)
    dtype_name(array.dtype, where)
    return array


def weak_dtype(schema: OpSchema, types: Sequence[TensorType | None]) -> str | None:
    """The dtype Python values take in this op: the first non-bool operand's, if elementwise."""
    if not schema.has(ELEMENTWISE):
        return None
    known = [t.dtype for t in types if t is not None]
    return next((d for d in known if d != "bool"), known[0] if known else None)


def type_of(array: np.ndarray) -> TensorType:
    """The static type of an array."""
    return TensorType(array.dtype.name, tuple(int(d) for d in array.shape))
