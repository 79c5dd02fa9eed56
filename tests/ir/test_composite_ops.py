"""Composite ops (ops defined by a body, ``ir.composite``): the shipped ones against their
unfused ai.onnx chains, their types, cost and FLOPs, and bodies read from files."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from gerules.cost.model import NpuCostModel
from gerules.dsl import RuleLibrary, build_library, load_compiled, parse_text
from gerules.ir.composite import AttrRef, CompositeOp, body_problem, inlined_size
from gerules.ir.graph import Graph, Node, TensorType, Value
from gerules.ir.ops.api import evaluate
from gerules.ir.registry import OpSchema, Port, Registry, default_registry
from gerules.runtime.executor import run_graph

RNG = np.random.default_rng(3)


@pytest.fixture(scope="module")
def registry() -> Registry:
    """The registry with the shipped library's own ops."""
    return load_compiled(soundness=False).registry


def schema(registry: Registry, op: str) -> OpSchema:
    return registry.get(op, "ge")


def ev(op: str, *inputs: np.ndarray | None, **attrs: Any) -> np.ndarray:
    return evaluate(op, list(inputs), attrs, opset=17)[0]


def rand(*shape: int, dtype: Any = np.float32) -> np.ndarray:
    return RNG.standard_normal(shape).astype(dtype)


ADD_NORM = """
op t.AddNorm(x, r, scale, b?) {axis: int = -1, epsilon: float = 1e-5} =
    (LayerNormalization(Add(x, r) as s, scale, b) {axis = axis, epsilon = epsilon}, s)
"""


@pytest.fixture(scope="module")
def add_norm() -> OpSchema:
    """A composite op with two outputs and an optional input, defined in rule text."""
    lib = build_library(RuleLibrary((parse_text(ADD_NORM, "t.ger"),)), soundness=False)
    assert lib.errors == []
    return lib.program.registry.get("AddNorm", "t")


def test_a_two_output_composite_is_its_body(add_norm: OpSchema) -> None:
    x, r, scale, bias = rand(2, 5, 16), rand(2, 5, 16), rand(16), rand(16)
    s = add_norm
    assert s.kind == "composite" and s.max_outputs == 2
    y, total = s.kernel([x, r, scale, bias], s.call({"epsilon": 1e-6}, 2))
    want = ev("LayerNormalization", ev("Add", x, r), scale, bias, epsilon=1e-6)
    np.testing.assert_allclose(y, want, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(total, ev("Add", x, r))
    (y,) = s.kernel([x, r, scale], s.call({}, 1))[:1]  # no bias: an absent input in the body
    np.testing.assert_allclose(y, ev("LayerNormalization", ev("Add", x, r), scale), rtol=1e-6)


@pytest.mark.parametrize("opset", [17, 18])
def test_a_two_output_composite_runs_in_onnxruntime(add_norm: OpSchema, opset: int) -> None:
    """Written as a model-local ONNX function, read back, and run by onnxruntime."""
    pytest.importorskip("onnxruntime", reason="onnxruntime (the 'dev' extra) runs the export")
    from gerules.onnx_io import load_model, to_model_proto
    from gerules.testing import oracle

    feeds = {"x": rand(2, 3, 8), "r": rand(2, 3, 8), "g": rand(8)}
    node = Node("AddNorm", ("x", "r", "g"), ("y", "s"), {"epsilon": 0.1}, domain="t")
    graph = Graph((node,), tuple(Value.of(k, "float32", (2, 3, 8 if k != "g" else 8)[
        -v.ndim:]) for k, v in feeds.items()), (Value.of("y", "float32", None),
                                                Value.of("s", "float32", None)),
                  opset={"": opset, "t": 1}, functions=(add_norm.body,))
    model = to_model_proto(graph, default_registry())
    theirs = oracle.run_onnxruntime(model, feeds)
    ours = run_graph(graph, feeds)
    np.testing.assert_allclose(theirs[0], ours["y"], rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(theirs[1], ours["s"])
    back = load_model(model.SerializeToString())
    assert back.function("t", "AddNorm") is not None


@pytest.mark.parametrize(("op", "chain"), [
    ("SiLU", lambda a, b, c: ev("Mul", a, ev("Sigmoid", a))),
    ("AddRelu", lambda a, b, c: ev("Relu", ev("Add", a, b))),
    ("MulAdd", lambda a, b, c: ev("Add", ev("Mul", a, b), c)),
])
def test_elementwise_composites_are_their_chains(registry: Registry, op: str, chain: Any
                                                 ) -> None:
    s = schema(registry, op)
    a, b, c = rand(2, 3), rand(2, 3), rand(2, 3)
    args = [a, b, c][: len(s.inputs)]
    np.testing.assert_array_equal(s.kernel(args, s.call({}))[0], chain(a, b, c))
    assert s.has("elementwise") and s.has("inplace") and s.unit == "vector"


def test_constants_follow_their_sibling_and_attributes_reach_the_body() -> None:
    """``Mul(x, scale) + 1``: the 1 and the attribute take x's dtype (through CastLike)."""
    op = CompositeOp("my", "ScalePlusOne", (Port("x"),), ("y",),
                     (default_registry().get("LeakyRelu").attrs["alpha"],), (
        Node("Constant", (), ("s",), {"value_float": AttrRef("alpha")}),
        Node("CastLike", ("s", "x"), ("s2",)),
        Node("Mul", ("x", "s2"), ("m",)),
        Node("Constant", (), ("one",), {"value": np.array(1.0)}),
        Node("CastLike", ("one", "x"), ("one2",)),
        Node("Add", ("m", "one2"), ("y",))), opset=17)
    assert body_problem(op, default_registry()) is None
    s = op.schema(default_registry())
    x = rand(4, dtype=np.float16)
    (y,) = s.kernel([x], s.call({"alpha": 2.0}))
    assert y.dtype == np.float16
    np.testing.assert_array_equal(y, x * np.float16(2) + np.float16(1))
    assert s.infer([TensorType("float16", ("N",))], [None], s.call({}))[0] == TensorType(
        "float16", ("N",))


def test_priced_as_one_kernel_with_the_bodys_flops(registry: Registry) -> None:
    """One launch, the bytes of its inputs and outputs only, the FLOPs of its body."""
    g = Graph((Node("SiLU", ("x",), ("y",), domain="ge"),), (Value.of("x", "float32", (64, 64)),),
              (Value.of("y", "float32", (64, 64)),), opset={"": 17, "ge": 1},
              functions=(registry.get("SiLU", "ge").body,))
    model = NpuCostModel("Ascend910")
    est = model.graph(g).nodes[0][1]
    assert est.bytes == 2 * 64 * 64 * 4 and est.flops >= 2 * 64 * 64
    unfused = Graph((Node("Sigmoid", ("x",), ("s",)), Node("Mul", ("x", "s"), ("y",))),
                    g.inputs, g.outputs, opset={"": 17})
    assert model.graph(g).total_us < model.graph(unfused).total_us
    x = rand(64, 64)
    np.testing.assert_allclose(run_graph(g, {"x": x})["y"], run_graph(unfused, {"x": x})["y"])


@pytest.mark.parametrize(("nodes", "problem"), [
    ((Node("Rleu", ("x",), ("y",)),), "unknown op Rleu"),
    ((Node("Relu", ("z",), ("y",)),), "reads 'z' before it is computed"),
    ((Node("LeakyRelu", ("x",), ("y",), {"alpha": AttrRef("nope")}),), "does not declare"),
    ((Node("Relu", ("x",), ("r",)),), "output 'y' is not computed"),
    ((Node("Bad", ("x",), ("y",), domain="my"),), "uses the function itself"),
])
def test_bodies_read_from_files_are_checked(nodes: tuple[Node, ...], problem: str) -> None:
    op = CompositeOp("my", "Bad", (Port("x"),), ("y",), (), nodes, opset=17)
    found = body_problem(op, default_registry())
    assert found is not None and problem in found


def test_inlined_size_counts_each_call_as_its_body_recursively() -> None:
    """What onnxruntime runs once it inlines the functions: a call of AddRelu is two nodes,
    a call of an op whose body calls AddRelu and a Neg is three."""
    add_relu = CompositeOp("my", "AddRelu", (Port("x"), Port("y")), ("z",), (), (
        Node("Add", ("x", "y"), ("s",)), Node("Relu", ("s",), ("z",))), opset=17)
    outer = CompositeOp("my", "NegAddRelu", (Port("x"), Port("y")), ("z",), (), (
        Node("AddRelu", ("x", "y"), ("a",), domain="my"), Node("Neg", ("a",), ("z",))),
        opset=17, uses=(add_relu,))
    nodes = (Node("AddRelu", ("a", "b"), ("c",), domain="my"),
             Node("NegAddRelu", ("c", "b"), ("d",), domain="my"),
             Node("Abs", ("d",), ("e",)))
    assert inlined_size(nodes, (outer,)) == 2 + 3 + 1
    assert inlined_size(nodes[2:], ()) == 1
