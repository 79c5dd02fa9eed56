"""The extraction cost: the NPU cost model's estimate of each e-node, in microseconds.

Invariants:
- Leaves and projections cost nothing but a tie-break proportional to constant bytes (so of two
  equal graphs the one with smaller weights wins); an op costs its roofline estimate computed
  from its class's and its children's types.
- An op the target cannot run costs ``inf`` (``--target onnx`` forbids the ``ge`` ops with
  kernels of their own; composite ops are written as ONNX functions, so they stay), and so
  does an e-node whose types are unknown in a way the estimate needs (never chosen over a known
  alternative, still chosen when it is the only one: extraction then reports the cost as inf).
- Costs are memoised per (e-node, types); they never change while types stay the same.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from ..cost.model import NpuCostModel
from ..engine import EGraph, ENode
from ..ir.graph import TensorType
from ..ir.registry import OpSchema
from ..terms.tensor import ConstTensor
from ..terms.terms import (
    ABSENT,
    CONST,
    INPUT,
    OUTPUTS_ATTR,
    PROJ,
    SHAPE,
    VALUE,
    TermContext,
    TupleType,
)

CONST_BYTE_COST = 1e-9  # microseconds per weight byte: a tie-break, far below any launch


def onnx_only(op: str, schema: OpSchema | None = None) -> bool:
    """Ops a standard ONNX runtime executes: domain ai.onnx, and composite ops (written as
    ONNX model-local functions)."""
    return "." not in op or (schema is not None and schema.body is not None)


def any_op(op: str, schema: OpSchema | None = None) -> bool:
    return True


class ExtractionCost:
    """A ``CostFunction`` for ``gerules.engine.extract``."""

    def __init__(self, ctx: TermContext, model: NpuCostModel,
                 allowed: Callable[[str, OpSchema | None], bool] = any_op) -> None:
        self.ctx = ctx
        self.model = model
        self.allowed = allowed
        self._memo: dict[tuple[ENode, object, tuple[object, ...], tuple[bool, ...]],
                         float] = {}

    def __call__(self, egraph: EGraph, cid: int, enode: ENode) -> float:
        op = enode.op
        if op in (INPUT, ABSENT, PROJ):
            return 0.0
        if op == CONST:
            value: ConstTensor = enode.get("value")
            return CONST_BYTE_COST * value.nbytes
        if not self.allowed(op, self.ctx.schema(op)):
            return math.inf
        out = egraph.data(cid, SHAPE)
        kids = tuple(egraph.data(c, SHAPE) for c in enode.children)
        constant = tuple(egraph.data(c, VALUE) is not None for c in enode.children)
        key = (enode, out, kids, constant)
        found = self._memo.get(key)
        if found is None:
            found = self._estimate(enode, out, kids, constant)
            self._memo[key] = found
        return found

    def _estimate(self, enode: ENode, out: object, kids: tuple[object, ...],
                  constant: tuple[bool, ...]) -> float:
        if isinstance(out, TupleType):
            outs = [t for t in out.items if t is not None]
        elif isinstance(out, TensorType):
            outs = [out]
        else:
            return math.inf
        schema = self.ctx.schema(enode.op)
        ins = [k if isinstance(k, TensorType) else None for k in kids]
        if not self.model.allowed(ins, outs):
            return math.inf  # the small-channel formats without --enable_small_channel
        n = int(enode.get(OUTPUTS_ATTR, 1))
        return self.model.estimate(schema, ins, outs, self.ctx.call(enode, n), constant).us
