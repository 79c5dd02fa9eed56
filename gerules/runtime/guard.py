"""What a kernel is about to allocate, known before it runs.

Most kernels' output sizes follow from their input *shapes*, which the graph already fixes.
Some follow from input *values*: a shape, repeats, sizes, pads, Range's limits, OneHot's
depth. A model (or a tampered ``.om``) can make those values huge, and NumPy would try to
allocate the result before anything could check it. ``predict`` runs the op's registry
inference on the actual inputs (small ones as constants) to get the output types first, so
the executors check them against the budgets, or against the ``.om``'s plan, before the
kernel runs.

Invariants:
- ``value_shaped(schema)``: the op has an integer port (``Port.dtype``: shapes, axes,
  sizes) or is one of ``VALUE_SHAPED_OPS``; only those pay for a prediction in the ``.om``
  runtime.
- ``predict`` returns the output types (static when the inputs make them so), or ``None``
  when inference cannot say (then the kernel's own checks decide, as before).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..errors import GeError
from ..ir.graph import Node, TensorType
from ..ir.registry import Call, OpSchema

VALUE_SHAPED_OPS = frozenset({"Range", "OneHot"})
CONST_ELEMENTS = 4096  # inputs this small are given to inference as values


def value_shaped(schema: OpSchema) -> bool:
    return schema.op in VALUE_SHAPED_OPS or any(p.dtype is not None for p in schema.inputs)


def predict(node: Node, schema: OpSchema, call: Call, args: Sequence[np.ndarray | None]
            ) -> list[TensorType] | None:
    """The output types ``schema`` infers for these actual inputs."""
    types = [None if a is None else TensorType(a.dtype.name, tuple(int(d) for d in a.shape))
             for a in args]
    for k, t in enumerate(call.types[:len(types)]):
        if t is not None and t.format != "ND":  # a physical array: its type says how to read it
            types[k] = t
    consts = [a if a is not None and a.size <= CONST_ELEMENTS else None for a in args]
    try:
        return list(schema.infer(types, consts, call))
    except GeError as e:
        raise e.with_place(node=node.label, op=node.qualified_op)
    except (ValueError, TypeError, IndexError, KeyError, ArithmeticError, AssertionError):
        return None


def output_bytes(types: Sequence[TensorType] | None) -> int:
    """Bytes of the static ones among ``types``."""
    return sum(t.nbytes() or 0 for t in types or ())
