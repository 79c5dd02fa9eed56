"""GraphBuilder: graphs built op by op, and every bad call named by its node."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from api_graphs import image, tiny_cnn

import gerules as ge
from gerules.ir.registry import MAX_OPSET
from gerules.runtime.executor import run_graph

# ----------------------------------------------------------------------------- building


def test_handles_carry_inferred_types_with_symbolic_dims() -> None:
    g = ge.GraphBuilder("t")
    x = g.input("x", ["N", 3, 8, 8])
    w = g.const(np.ones((5, 3, 3, 3), np.float32))
    y = g.op("Conv", x, w, strides=[2, 2], pads=[1] * 4, name="conv")
    assert (y.name, y.dtype, y.shape) == ("conv", "float32", ("N", 5, 4, 4))
    assert y.rank == 4 and str(y) == "conv: float32[N,5,4,4]"
    assert g["conv"] == y and "conv" in g and "nope" not in g


def test_build_gives_a_verified_graph_that_computes_what_numpy_does() -> None:
    g = ge.GraphBuilder("t")
    x = g.input("x", [2, 3])
    y = g.ops.Mul(g.ops.Add(x, 1.0), np.full((1, 3), 2.0, np.float32))
    g.output(g.ops.Relu(y), name="out")
    graph = g.build()
    assert isinstance(graph, ge.Graph)
    assert graph.output_names == ("out",) and graph.outputs[0].shape == (2, 3)
    feed = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    got = run_graph(graph, {"x": feed})["out"]
    np.testing.assert_allclose(got, np.maximum((feed + 1) * 2, 0), rtol=1e-6)


def test_the_builder_stays_usable_after_build() -> None:
    g = tiny_cnn()
    first = g.build()
    g.output(g.ops.Softmax(g["features"]))
    assert len(g.build().outputs) == len(first.outputs) + 1


def test_constant_folding_keeps_shape_subgraphs_static() -> None:
    g = ge.GraphBuilder("t")
    x = g.input("x", [2, 3, 4])
    shape = g.ops.Shape(x)
    flat = g.ops.Concat(g.ops.Gather(shape, [0]), [-1], axis=0)
    assert g.ops.Reshape(x, flat).shape == (2, 12)


def test_multi_output_ops_return_tuples_named_after_their_ports() -> None:
    g = ge.GraphBuilder("t")
    x = g.input("x", [2, 6])
    a, b = g.op("Split", x, axis=1, num_outputs=2, outputs=2, name="split")
    assert (a.name, a.shape, b.name) == ("split.outputs0", (2, 3), "split.outputs1")
    values, indices = g.ops.TopK(x, [2], outputs=2, name="top")
    assert (values.name, indices.name, indices.dtype) == ("top.Values", "top.Indices", "int64")
    named = g.op("TopK", x, [1], outputs=["v", "i"])
    assert [t.name for t in named] == ["v", "i"]
    single = g.op("Relu", x, outputs=["r"])
    assert isinstance(single, tuple) and single[0].name == "r"


def test_domain_by_prefix_by_keyword_and_by_namespace_give_the_same_node() -> None:
    nodes = []
    for spell in ("prefix", "keyword", "namespace"):
        g = ge.GraphBuilder("t")
        x = g.input("x", [1, 2, 4, 4])
        w = g.const(np.ones((2, 2, 1, 1), np.float32), name="w")
        if spell == "prefix":
            g.op("ge.FusedConv", x, w, activation="Relu", name="f")
        elif spell == "keyword":
            g.op("FusedConv", x, w, domain="ge", activation="Relu", name="f")
        else:
            g.ops.ge.FusedConv(x, w, activation="Relu", name="f")
        assert g.opset == {"": ge.GraphBuilder("u").opset[""], "ge": MAX_OPSET["ge"]}
        nodes.append(g.nodes[-1])
    assert nodes[0] == nodes[1] == nodes[2] and nodes[0].qualified_op == "ge.FusedConv"


def test_ai_onnx_domain_alias_and_opset_mapping() -> None:
    g = ge.GraphBuilder("t", opset={"ai.onnx": 13})
    x = g.input("x", [2, 3])
    assert g.op("ai.onnx.Relu", x).shape == (2, 3) and g.opset == {"": 13}


def test_constants_names_and_dtypes() -> None:
    g = ge.GraphBuilder("t")
    a, b = g.const([1, 2]), g.const([1.5, 2.5])
    c = g.const(np.arange(3, dtype=np.int32), name="c")
    d = g.const([1, 2], dtype=np.float16)
    assert [t.dtype for t in (a, b, c, d)] == ["int64", "float32", "int32", "float16"]
    assert a.name != b.name and c.name == "c"
    g.output(g.ops.Add(c, 1))
    assert np.array_equal(g.build().initializers["c"], np.arange(3, dtype=np.int32))


def test_weak_python_values_take_the_operand_dtype_in_elementwise_ops() -> None:
    g = ge.GraphBuilder("t")
    i = g.input("i", [3], "int32")
    f = g.input("f", [3], np.float16)
    cond = g.input("c", [3], "bool")
    assert g.ops.Add(i, 2).dtype == "int32"
    assert g.ops.Mul(f, 0.1).dtype == "float16"
    assert g.ops.Where(cond, 1.0, f).dtype == "float16"
    assert g.ops.Gather(f, [0, 2]).shape == (2,)  # non-elementwise: indices are int64
    with pytest.raises(ge.UsageError, match="does not fit int32"):
        g.ops.Add(i, 1.5)
    with pytest.raises(ge.UsageError, match="does not fit float16"):
        g.ops.Add(f, 1e10)


def test_output_renames_through_identity_and_keeps_handles_valid() -> None:
    g = ge.GraphBuilder("t")
    x = g.input("x", [2])
    y = g.ops.Neg(x)
    out = g.output(y, name="result")
    assert out.name == "result" and g.nodes[-1].op == "Identity"
    g.output(y)
    assert [t.name for t in g.outputs] == ["result", y.name]
    with pytest.raises(ge.UsageError, match="already an output"):
        g.output(y)


def test_onnx_round_trip_keeps_names_types_and_numbers(tmp_path: Path) -> None:
    g = tiny_cnn()
    proto = g.to_onnx()
    onnx.checker.check_model(proto, full_check=True)
    again = ge.GraphBuilder.from_onnx(proto)
    assert [n.name for n in again.nodes] == [n.name for n in g.nodes]
    assert again.outputs == g.outputs and again.inputs == g.inputs
    path = g.save(tmp_path / "tiny.onnx")
    from_file = ge.GraphBuilder.from_onnx(path)
    feeds = {"x": image(3)}
    want = run_graph(g.build(), feeds)["features"]
    np.testing.assert_array_equal(run_graph(from_file.build(), feeds)["features"], want)


def test_from_graph_can_be_extended_with_new_ops() -> None:
    g = ge.GraphBuilder.from_graph(tiny_cnn().build())
    y = g.ops.Softmax(g.outputs[0], name="probs")
    assert y.shape == ("N", 4)
    g.output(y)
    assert g.build().output_names == ("features", "probs")


def test_from_graph_keeps_input_defaults_and_shares_weights() -> None:
    g = ge.GraphBuilder("t")
    x = g.input("x", [2])
    g.output(g.ops.Add(x, g.const(np.ones(2, np.float32), name="w")))
    graph = g.build()
    with_default = graph.replace(initializers={**graph.initializers,
                                               "x": np.zeros(2, np.float32)})
    again = ge.GraphBuilder.from_graph(with_default).build()
    assert np.array_equal(again.initializers["x"], np.zeros(2, np.float32))
    assert again.initializers["w"] is graph.initializers["w"]  # read-only: not copied
    assert again.input_names == ("x",)


def test_constants_are_copied_from_arrays_the_caller_may_change() -> None:
    g = ge.GraphBuilder("t")
    weights = np.ones(3, np.float32)
    g.output(g.const(weights, name="w"))
    weights[:] = 5
    assert np.array_equal(g.build().initializers["w"], np.ones(3, np.float32))


def test_repr_and_reading_properties() -> None:
    g = tiny_cnn()
    assert repr(g) == "<GraphBuilder 'tiny_cnn': 1 inputs, 7 nodes, 1 outputs>"
    assert g.inputs[0].name == "x" and g.registry is not None
    assert "ge" not in g.opset and g.opset_of("ge") == MAX_OPSET["ge"]


# ----------------------------------------------------------------------------- bad calls


def _builder() -> tuple[ge.GraphBuilder, ge.Tensor, ge.Tensor]:
    g = ge.GraphBuilder("bad")
    x = g.input("x", ["N", 3, 8, 8])
    w = g.const(np.ones((4, 3, 3, 3), np.float32), name="w")
    return g, x, w


def test_unknown_op_names_the_node_and_suggests() -> None:
    g, x, w = _builder()
    with pytest.raises(ge.ModelError) as err:
        g.op("Cnv", x, w, name="conv1")
    assert str(err.value) == "node 'conv1' (Cnv): unknown op Cnv (did you mean Conv?)"
    with pytest.raises(ge.ModelError, match="unsupported domain 'foo'"):
        g.op("foo.Conv", x, w)
    with pytest.raises(ge.ModelError, match=r"node 'Gelu_0' \(Gelu\): op Gelu needs opset 20"):
        ge.GraphBuilder("old", opset=17).op("Gelu", ge.GraphBuilder("old").input("x", [1]))


@pytest.mark.parametrize(("attrs", "message"), [
    ({"strides": 2}, "attribute 'strides' expects a list of int (ints), got int 2"),
    ({"group": 1.5}, "attribute 'group' expects an int (int), got float 1.5"),
    ({"auto_pad": 3}, "attribute 'auto_pad' expects a str (string), got int 3"),
    ({"pads": [1, 1, 1, 1.0]}, "attribute 'pads' expects a list of int (ints)"),
    ({"stride": [1, 1]}, "Conv has no attribute 'stride' (did you mean strides?)"),
])
def test_wrong_attributes_name_the_node(attrs: dict[str, object], message: str) -> None:
    g, x, w = _builder()
    with pytest.raises(ge.GraphError) as err:
        g.op("Conv", x, w, name="conv1", **attrs)
    assert str(err.value).startswith(f"node 'conv1' (Conv): {message}")


def test_attribute_kinds_are_converted_to_canonical_values() -> None:
    g = ge.GraphBuilder("t")
    x = g.input("x", [1, 2, 4, 4])
    g.op("LeakyRelu", x, alpha=1, name="a")  # an int for a float attribute
    g.op("Transpose", x, perm=np.array([0, 1, 3, 2]), name="b")
    g.op("Constant", value=np.float32(2.0), name="c")
    a, b, c = g.nodes
    assert a.attrs["alpha"] == 1.0 and isinstance(a.attrs["alpha"], float)
    assert b.attrs["perm"] == (0, 1, 3, 2)
    assert isinstance(c.attrs["value"], np.ndarray)
    with pytest.raises(ge.GraphError, match="expects a NumPy array"):
        g.op("Constant", value=[1.0])


def test_missing_required_attribute_and_none_means_default() -> None:
    g, x, _ = _builder()
    with pytest.raises(ge.GraphError, match=r"node 'cat' \(Concat\): attribute 'axis' \(int\) "
                                            "is required"):
        g.op("Concat", x, x, name="cat")
    assert g.op("Softmax", x, axis=None).shape == x.shape


def test_missing_input_names_the_port() -> None:
    g, x, w = _builder()
    with pytest.raises(ge.GraphError) as err:
        g.op("Conv", x, name="conv1")
    assert str(err.value) == ("node 'conv1' (Conv): required input 'W' is missing "
                              "(Conv takes X, W, B?)")
    with pytest.raises(ge.GraphError, match="required input 'W' is missing"):
        g.op("Conv", x, None, w)
    with pytest.raises(ge.GraphError, match="takes at most 3 inputs"):
        g.op("Conv", x, w, w, w)
    with pytest.raises(ge.GraphError, match="input 'nope' is not a graph input"):
        g.op("Relu", "nope", name="r")


def test_shape_mismatch_names_the_node() -> None:
    g, x, _ = _builder()
    wrong = g.const(np.ones((4, 2, 3, 3), np.float32))
    with pytest.raises(ge.ShapeError) as err:
        g.op("Conv", x, wrong, name="conv1")
    assert str(err.value).startswith("node 'conv1' (Conv): ")
    assert "3 channels" in str(err.value)
    y = g.input("y", [2, 5])
    with pytest.raises(ge.ShapeError, match=r"node 'add' \(Add\)"):
        g.op("Add", g.input("z", [2, 4]), y, name="add")


def test_a_failed_call_adds_nothing() -> None:
    g, x, w = _builder()
    names = {"x", "w"}
    assert all(n in g for n in names)
    before = (g.nodes, g.opset)
    for bad in (lambda: g.op("Conv", x, np.ones((4, 2, 3, 3), np.float32)),
                lambda: g.op("ge.FusedConv", x, w, activation=1),
                lambda: g.op("Relu", x, outputs=0)):
        with pytest.raises(ge.GeError):
            bad()
    assert (g.nodes, g.opset) == before
    assert "Conv_0.W" not in g  # the constant made for the failed Conv was not kept
    assert g.ops.Relu(x).name == "Relu_0"  # no counter was used up by the failures
    g.output(g["Relu_0"])
    assert set(g.build().initializers) == {"w"}


@pytest.mark.parametrize("bad", [
    lambda g, x: g.input("x", [1]),
    lambda g, x: g.input("", [1]),
    lambda g, x: g.input("a", [-1]),
    lambda g, x: g.input("a", [1.5]),
    lambda g, x: g.input("a", [1], "complex64"),
    lambda g, x: g.input("a", [1], "no-such-type"),
    lambda g, x: g.const(object()),
    lambda g, x: g.const([1], name="x"),
    lambda g, x: g.op("Relu", x, name="x"),
    lambda g, x: g.op("Relu", x, outputs="y"),
    lambda g, x: g.op("Relu", x, outputs=["a", "a"]),
    lambda g, x: g.op("Relu", 1j),
    lambda g, x: g.op("Relu", ge.GraphBuilder("other").input("x", [1])),
    lambda g, x: g.op("", x),
    lambda g, x: g.op("ge.Relu", x, domain=""),
    lambda g, x: g["missing"],
    lambda g, x: ge.GraphBuilder("t", opset=99),
    lambda g, x: ge.GraphBuilder("t", opset={"com.microsoft": 1}),
])
def test_bad_api_calls_are_usage_errors(bad: object) -> None:
    g = ge.GraphBuilder("t")
    x = g.input("x", [1])
    g.op("Relu", x, name="r")
    with pytest.raises(ge.UsageError):
        bad(g, x)  # type: ignore[operator]


def test_duplicate_node_name_and_wrong_output_counts() -> None:
    g, x, _ = _builder()
    g.op("Relu", x, name="r")
    with pytest.raises(ge.UsageError, match="already has a node called 'r'"):
        g.op("Sigmoid", x, name="r", outputs=["s"])
    with pytest.raises(ge.GraphError, match="asked for 2 outputs; Relu gives 1"):
        g.op("Relu", x, outputs=2)


def test_validate_reports_what_build_would() -> None:
    g, x, _ = _builder()
    with pytest.raises(ge.GraphError, match="the graph has no outputs"):
        g.validate()
    g.output(g.ops.Relu(x))
    g.validate()
