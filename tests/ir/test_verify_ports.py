"""verify: inputs whose port takes integers (shapes, axes) must be integer tensors."""

from __future__ import annotations

import numpy as np
import pytest

from gerules.errors import GraphError
from gerules.ir.graph import Graph, Node, Value
from gerules.ir.verify import verify


def _reshape(shape: np.ndarray) -> Graph:
    return Graph(nodes=[Node("Reshape", ["x", "s"], ["y"], name="r")],
                 inputs=[Value.of("x", "float32", [2, 3])],
                 outputs=[Value.of("y", "float32", None)], initializers={"s": shape})


def test_float_shape_is_refused_naming_node_and_tensor() -> None:
    with pytest.raises(GraphError, match=r"node 'r' \(Reshape\): tensor 's': input 'shape' "
                                         r"must be an integer tensor, got float32"):
        verify(_reshape(np.array([3.0, 2.0], np.float32)))


def test_int64_shape_passes() -> None:
    assert verify(_reshape(np.array([3, 2], np.int64))).type_of("y").shape == (3, 2)
