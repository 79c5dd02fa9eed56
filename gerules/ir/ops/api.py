"""Evaluate or infer one op outside a graph: constant folding, rule checks, tests.

Invariants:
- ``evaluate`` resolves the schema in force at ``opset`` (latest when ``None``), applies
  attribute defaults and runs its kernel; ``infer_types`` runs its inference. Both raise the
  same ``GeError`` subclasses a graph would (with the op named as the place).
- ``evaluate(..., check=True)`` also infers the output types from the operands (their values
  given as constants) and raises ``AssertionError`` when a kernel output's dtype or a static
  dim differs: that is a bug in the op, never bad user input.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ...errors import GeError
from ..graph import TensorType
from ..registry import OpSchema, Registry, default_registry


def _schema(op: str, domain: str, opset: int | None, registry: Registry | None) -> OpSchema:
    return (registry or default_registry()).get(op, domain, opset)


def type_of(x: np.ndarray | None) -> TensorType | None:
    return None if x is None else TensorType(x.dtype.name, tuple(int(d) for d in x.shape))


def infer_types(op: str, types: Sequence[TensorType | None],
                consts: Sequence[np.ndarray | None] | None = None,
                attrs: Mapping[str, Any] | None = None, *, domain: str = "",
                opset: int | None = None, num_outputs: int = 1,
                registry: Registry | None = None) -> list[TensorType]:
    """Output types of ``op`` for these operand types (and known constant operands)."""
    schema = _schema(op, domain, opset, registry)
    try:
        call = schema.call(dict(attrs or {}), num_outputs)
        return list(schema.infer(types, list(consts or [None] * len(types)), call))
    except GeError as e:
        raise e.with_place(op=schema.qualified_op) from None


def evaluate(op: str, inputs: Sequence[np.ndarray | None],
             attrs: Mapping[str, Any] | None = None, *, domain: str = "",
             opset: int | None = None, num_outputs: int = 1, registry: Registry | None = None,
             check: bool = False, types: Sequence[TensorType | None] = ()) -> list[np.ndarray]:
    """The outputs of ``op`` on ``inputs`` (``None`` for an omitted optional input);
    ``types`` are the operands' logical types when some are held in a blocked format (their
    arrays are then the physical ones, ``ir.formats``)."""
    schema = _schema(op, domain, opset, registry)
    try:
        call = schema.call(dict(attrs or {}), num_outputs, types=types)
        outs = [np.asarray(y) for y in schema.kernel(list(inputs), call)][:num_outputs]
    except GeError as e:
        raise e.with_place(op=schema.qualified_op) from None
    if check:
        types = [type_of(x) for x in inputs]
        agree(schema.qualified_op, infer_types(op, types, list(inputs), attrs, domain=domain,
                                                opset=opset, num_outputs=num_outputs,
                                                registry=registry), outs)
    return outs


def agree(op: str, types: Sequence[TensorType], outs: Sequence[np.ndarray]) -> None:
    """Assert each inferred type matches its array (dtype, rank and every static dim)."""
    for k, (t, y) in enumerate(zip(types, outs, strict=False)):
        assert t.dtype == y.dtype.name, f"{op} output {k}: inferred {t}, kernel {y.dtype}"
        if t.shape is None:
            continue
        assert len(t.shape) == y.ndim, f"{op} output {k}: inferred {t}, kernel {y.shape}"
        for want, got in zip(t.shape, y.shape, strict=True):
            assert not isinstance(want, int) or want == got, (
                f"{op} output {k}: inferred {t}, kernel {list(y.shape)}")
