"""Elementwise arithmetic and activations (ai.onnx).

Invariant: every kernel keeps its operand dtype (NumPy would promote int32 / float16 mixes;
``binary`` and ``unary`` cast back), and integer Div truncates toward zero as ONNX says.
"""

from __future__ import annotations

import numpy as np

from ._common import binary, unary

SCHEMAS = [
    binary("Add", 14, np.add, commutative=True, doc="Y = A + B with broadcasting"),
    binary("Sub", 14, np.subtract),
    binary("Mul", 14, np.multiply, commutative=True),
    unary("Relu", 14, lambda x: np.maximum(x, x.dtype.type(0))),
]
