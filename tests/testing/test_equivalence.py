"""assert_equivalent and compare: what passes, what fails, and what the report says."""

from __future__ import annotations

import re

import numpy as np
import pytest

from gerules.ir.graph import Graph, Node, Value
from gerules.testing import Mismatch, assert_equivalent, compare, random_graph


def _graph(op: str = "Add", extra: tuple[Node, ...] = (), out: str = "y",
           shape: tuple[object, ...] = ("N", 3)) -> Graph:
    nodes = (Node(op, ("x", "w"), ("a",), name="first"), Node("Relu", ("a",), (out,)), *extra)
    return Graph(nodes, (Value.of("x", "float32", shape),),
                 (Value.of(out, "float32", shape),),
                 {"w": np.array([1.0, -2.0, 0.5], dtype=np.float32)})


def test_a_graph_is_equivalent_to_itself_and_to_a_renamed_copy() -> None:
    g = _graph()
    assert_equivalent(g, g)
    assert_equivalent(g, _graph(out="z"))  # outputs paired by position when names differ
    graph = random_graph(11, max_nodes=12, symbolic=True)
    assert_equivalent(graph, graph, runs=4)


def test_a_different_graph_fails_with_a_readable_report() -> None:
    with pytest.raises(AssertionError) as info:
        assert_equivalent(_graph("Add"), _graph("Mul"))
    report = str(info.value)
    assert report.startswith("graphs are not equivalent: output 'y' not close:")
    assert re.search(r"max abs error \d", report) and "max rel error" in report
    assert re.search(r"worst at \[\d+, \d+\]: expected .*, got ", report)
    assert "rtol=1e-05, atol=1e-06; run 0 with inputs x[" in report
    assert "first graph:  2 nodes: Add, Relu" in report
    assert "second graph: 2 nodes: Mul, Relu" in report


def test_tolerances_decide() -> None:
    g = _graph()
    nudged = g.replace(initializers={"w": np.array([1.0, -2.0, 0.5 + 1e-3], np.float32)})
    with pytest.raises(AssertionError, match="not close"):
        assert_equivalent(g, nudged)
    assert_equivalent(g, nudged, atol=2e-3)


def test_given_feeds_one_or_several() -> None:
    g1, g2 = _graph("Add"), _graph("Min")
    positive = {"x": np.full((2, 3), 5.0, np.float32)}  # Relu(x + w) != Relu(w)
    with pytest.raises(AssertionError):
        assert_equivalent(g1, g2, positive)
    small = {"x": np.full((2, 3), -10.0, np.float32)}  # both sides are Relu(negative) = 0
    assert_equivalent(g1, g2, small)
    with pytest.raises(AssertionError, match="run 1 with inputs x\\[2, 3\\]"):
        assert_equivalent(g1, g2, [small, positive])


def test_output_count_mismatch() -> None:
    g = _graph()
    two = g.replace(outputs=(*g.outputs, Value.of("a", "float32", ("N", 3))))
    with pytest.raises(AssertionError, match=r"1 outputs \['y'\] vs 2 outputs \['y', 'a'\]"):
        assert_equivalent(g, two)


def test_compare_rules() -> None:
    f = np.array([1.0, np.nan, np.inf, -np.inf], np.float32)
    assert compare(f, f.copy()) is None
    assert compare(f, f.astype(np.float64)) == Mismatch("dtype float64, expected float32")
    assert compare(f, f[:3]) == Mismatch("shape [3], expected [4]")
    m = compare(f, np.array([1.0, 0.0, np.inf, np.inf], np.float32))
    assert m is not None and m.count == 2 and m.max_abs == np.inf
    m = compare(np.array([100.0]), np.array([100.5]), rtol=1e-3)
    assert m is not None and m.max_abs == 0.5 and m.max_rel == pytest.approx(0.005)
    assert compare(np.array([100.0]), np.array([100.05]), rtol=1e-3) is None
    ints = compare(np.arange(4), np.array([0, 1, 2, 4]))
    assert ints is not None and ints.index == (3,) and ints.describe().startswith(
        "values differ: 1 element(s) differ")
    scalar = compare(np.float32(1.0), np.float32(2.0))
    assert scalar is not None and scalar.index == ()
