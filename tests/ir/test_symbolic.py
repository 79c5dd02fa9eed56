"""Symbolic values of shape tensors: exporters' shape arithmetic on dynamic dims."""

from __future__ import annotations

import numpy as np
import pytest

from gerules.ir.graph import Graph, Node, TensorType, Value
from gerules.ir.symbolic import SymInts, of_array, sym_eval, sym_output_type
from gerules.ir.verify import verify
from gerules.runtime.executor import run_graph

X = TensorType("float32", ("batch", 128, 768))


def test_shape_gather_unsqueeze_concat_keep_the_dynamic_dim() -> None:
    shape = sym_eval("Shape", {"start": 0}, [None], [X])
    assert shape == SymInts(("batch", 128, 768))
    batch = sym_eval("Gather", {"axis": 0}, [shape, of_array(np.array(0))], [None, None])
    assert batch == SymInts(("batch",), scalar=True)
    one = sym_eval("Unsqueeze", {}, [batch, of_array(np.array([0]))], [None, None])
    target = sym_eval("Concat", {"axis": 0}, [one, of_array(np.array([128, 12, 64]))],
                      [None, None])
    assert target == SymInts(("batch", 128, 12, 64))
    out = sym_output_type("Reshape", {"allowzero": 0}, TensorType("float32", ("?",) * 4),
                          [X, None], [None, target])
    assert out.shape == ("batch", 128, 12, 64)


@pytest.mark.parametrize("op, a, b, want", [
    ("Mul", ("batch", 3), (2, 2), (None, 6)),
    ("Equal", ("batch", 3), (-1, 3), (0, 1)),  # a dim is never negative
    ("Equal", ("batch", 3), (2, 4), (None, 0)),
])
def test_arithmetic_and_comparison_are_exact_or_unknown(op: str, a: tuple, b: tuple,
                                                        want: tuple) -> None:
    assert sym_eval(op, {}, [SymInts(a), SymInts(b)], [None, None]).values == want


def test_where_picks_known_entries() -> None:
    cond = SymInts((0, 1), dtype="bool")
    got = sym_eval("Where", {}, [cond, SymInts((1, 1)), SymInts(("batch", -1))], [None] * 3)
    assert got.values == ("batch", 1)


def test_concrete_values_equal_the_kernels() -> None:
    s = sym_eval("Shape", {"start": 1}, [None], [TensorType("float32", (2, 3, 4))])
    assert s.concrete and s.array().tolist() == [3, 4]


def test_graph_inference_types_a_reshape_on_a_dynamic_batch() -> None:
    nodes = [Node("Shape", ["x"], ["s"]), Node("Gather", ["s", "zero"], ["n"], attrs={"axis": 0}),
             Node("Unsqueeze", ["n", "axes"], ["n1"]),
             Node("Concat", ["n1", "rest"], ["target"], attrs={"axis": 0}),
             Node("Reshape", ["x", "target"], ["y"])]
    g = Graph(nodes=nodes, inputs=[Value.of("x", "float32", ["batch", 6])],
              outputs=[Value.of("y", "float32", None)],
              initializers={"zero": np.array(0), "axes": np.array([0]),
                            "rest": np.array([2, 3])}, opset={"": 17})
    g = verify(g)
    assert g.type_of("y").shape == ("batch", 2, 3)
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    assert run_graph(g, {"x": x})["y"].shape == (4, 2, 3)
