"""Shared helpers for op definitions: broadcasting, axis handling, schema builders.

Invariants:
- ``broadcast`` follows NumPy/ONNX multidirectional broadcasting; a symbolic dim broadcasts
  against 1 and equals only itself; a mismatch of two known dims raises ``ShapeError``.
- Builders return ``OpSchema`` objects whose ``infer`` and ``kernel`` agree on dtype and shape.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ...errors import KernelError, ShapeError
from ..graph import Dim, Shape, TensorType
from ..registry import (
    COMMUTATIVE,
    ELEMENTWISE,
    INPLACE,
    AttrSpec,
    Call,
    OpSchema,
    Port,
)


def broadcast(*shapes: Shape | None) -> Shape | None:
    """The broadcast of several shapes (``None`` if any rank is unknown)."""
    if any(s is None for s in shapes):
        return None
    rank = max((len(s) for s in shapes), default=0)  # type: ignore[arg-type]
    out: list[Dim] = []
    for i in range(rank):
        dims = [s[len(s) - rank + i] for s in shapes if len(s) - rank + i >= 0]  # type: ignore
        out.append(_broadcast_dim(dims, shapes))
    return tuple(out)


def _broadcast_dim(dims: list[Dim], shapes: Sequence[Shape | None]) -> Dim:
    known = {d for d in dims if isinstance(d, int) and d != 1}
    symbols = {d for d in dims if isinstance(d, str)}
    if len(known) > 1:
        raise ShapeError(f"shapes {' and '.join(_fmt(s) for s in shapes)} do not broadcast")
    if known:
        return known.pop()
    if len(symbols) == 1:
        return symbols.pop()
    if symbols:
        return sorted(symbols)[0]  # equal at run time or the run fails; keep one name
    return 1


def _fmt(shape: Shape | None) -> str:
    return "?" if shape is None else "[" + ",".join(str(d) for d in shape) + "]"


def norm_axis(axis: int, rank: int, what: str = "axis") -> int:
    """``axis`` in ``[-rank, rank)`` mapped to ``[0, rank)``."""
    if not -rank <= axis < rank:
        raise ShapeError(f"{what} {axis} is out of range for rank {rank}")
    return axis % rank


def same_dtype(types: Sequence[TensorType | None], op: str) -> str:
    """The common dtype of the present operands; mixing dtypes raises."""
    dts = {t.dtype for t in types if t is not None}
    if len(dts) > 1:
        raise ShapeError(f"{op} operands have different dtypes {sorted(dts)}")
    if not dts:
        raise ShapeError(f"{op} has no typed operands")
    return dts.pop()


def unary(
    op: str,
    since: int,
    fn: Callable[..., np.ndarray],
    *,
    attrs: Sequence[AttrSpec] = (),
    doc: str = "",
    flops_per_elem: int = 1,
) -> OpSchema:
    """An elementwise unary op; ``fn(x, **attrs)`` computes it in x's dtype."""

    def infer(types: Sequence[TensorType | None], _c: object, call: Call) -> list[TensorType]:
        x = types[0]
        assert x is not None
        return [x]

    def kernel(inputs: Sequence[np.ndarray | None], call: Call) -> list[np.ndarray]:
        x = inputs[0]
        assert x is not None
        return [np.asarray(fn(x, **call.attrs)).astype(x.dtype, copy=False)]

    return OpSchema(
        op=op,
        since_version=since,
        inputs=(Port("X"),),
        outputs=(Port("Y"),),
        infer=infer,
        kernel=kernel,
        attrs={a.name: a for a in attrs},
        traits=frozenset({ELEMENTWISE, INPLACE}),
        flops=lambda ins, outs, call: flops_per_elem * (outs[0].numel() or 0),
        doc=doc,
    )


def binary(
    op: str,
    since: int,
    fn: Callable[[np.ndarray, np.ndarray], np.ndarray],
    *,
    commutative: bool = False,
    out_dtype: str | None = None,
    doc: str = "",
) -> OpSchema:
    """An elementwise binary op with multidirectional broadcasting.

    ``out_dtype`` fixes the result type (``"bool"`` for comparisons); otherwise the result
    has the operands' common dtype.
    """

    def infer(types: Sequence[TensorType | None], _c: object, call: Call) -> list[TensorType]:
        a, b = types[0], types[1]
        assert a is not None and b is not None
        dtype = same_dtype([a, b], op)
        return [TensorType(out_dtype or dtype, broadcast(a.shape, b.shape))]

    def kernel(inputs: Sequence[np.ndarray | None], call: Call) -> list[np.ndarray]:
        a, b = inputs[0], inputs[1]
        assert a is not None and b is not None
        try:
            y = fn(a, b)
        except ValueError as e:
            raise KernelError(f"{op}: {e}") from None
        return [np.asarray(y, dtype=out_dtype or a.dtype)]

    traits = {ELEMENTWISE}
    if commutative:
        traits.add(COMMUTATIVE)
    if out_dtype is None:
        traits.add(INPLACE)
    return OpSchema(
        op=op,
        since_version=since,
        inputs=(Port("A"), Port("B")),
        outputs=(Port("C"),),
        infer=infer,
        kernel=kernel,
        traits=frozenset(traits),
        doc=doc,
    )
