"""ONNX import: the bad-model catalogue in process, names, dims, defaults, typed tensors."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import onnx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

from gerules.errors import GeError, ModelError
from gerules.onnx_io import load_model
from gerules.onnx_io.tensors import tensor_to_array
from gerules.runtime.executor import run_graph
from gerules.testing.bad_models import CASES, BadCase, external_ok, good_model

X = np.array([[1.0, -2.0, 3.0, -4.0]], dtype=np.float32)


def _graph_model(nodes: list[onnx.NodeProto], inits: list[onnx.TensorProto] | None = None,
                 inputs: list[onnx.ValueInfoProto] | None = None, ir_version: int = 8,
                 outputs: tuple[str, ...] = ("y",)) -> onnx.ModelProto:
    inputs = inputs or [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])]
    graph = helper.make_graph(nodes, "g", inputs,
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, None)
                               for o in outputs], inits or [])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = ir_version
    return model


def _w(values: object = (0.0, 1.0, 2.0, 3.0), name: str = "w") -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(values, dtype=np.float32), name)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_bad_model_names_file_and_place(case: BadCase, tmp_path: Path) -> None:
    folder = tmp_path / "case"
    folder.mkdir()
    path = case.build(folder)
    with pytest.raises(GeError) as info:
        load_model(path)
    message = str(info.value)
    assert message.startswith(f"{path}: "), message
    assert re.search(case.expect, message[len(str(path)) + 2:]), message
    assert "\n" not in message
    assert info.value.exit_code == case.exit_code


def test_the_base_models_load(tmp_path: Path) -> None:
    graph = load_model(good_model().SerializeToString())
    assert run_graph(graph, {"x": X})["y"].tolist() == [[1.0, 2.0, 15.0, 4.0]]
    path = external_ok()(tmp_path)
    assert load_model(path).initializers["w"].tolist() == [0.0, 1.0, 2.0, 3.0]


def test_bytes_with_external_data_need_base_dir(tmp_path: Path) -> None:
    path = external_ok()(tmp_path)
    with pytest.raises(ModelError, match=r"^<bytes>: tensor 'w': uses external data; loading "
                                         r"from bytes needs base_dir"):
        load_model(path.read_bytes())
    graph = load_model(path.read_bytes(), base_dir=path.parent)
    assert graph.initializers["w"].tolist() == [0.0, 1.0, 2.0, 3.0]


def test_names_are_kept_and_unnamed_nodes_get_stable_names() -> None:
    nodes = [helper.make_node("Add", ["x", "w"], ["s"], name=""),
             helper.make_node("Mul", ["s", "x"], ["t"], name="Add_0"),
             helper.make_node("Mul", ["t", "x"], ["y"])]
    graph = load_model(_graph_model(nodes, [_w()]).SerializeToString())
    assert [n.name for n in graph.nodes] == ["Add_0_2", "Add_0", "Mul_2"]
    assert [n.outputs for n in graph.nodes] == [("s",), ("t",), ("y",)]


def test_nodes_out_of_order_are_sorted() -> None:
    nodes = [helper.make_node("Mul", ["s", "x"], ["y"], name="second"),
             helper.make_node("Add", ["x", "w"], ["s"], name="first")]
    graph = load_model(_graph_model(nodes, [_w()]).SerializeToString())
    assert [n.name for n in graph.nodes] == ["first", "second"]


def test_symbolic_dims_kept_and_unknown_dims_named_apart() -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", None])
    x2 = helper.make_tensor_value_info("x2", TensorProto.FLOAT, ["N", None])
    nodes = [helper.make_node("Add", ["x", "x2"], ["y"], name="add")]
    graph = load_model(_graph_model(nodes, inputs=[x, x2]).SerializeToString())
    (a, b) = (v.shape for v in graph.inputs)
    assert a is not None and b is not None
    assert a[0] == b[0] == "N"
    assert isinstance(a[1], str) and isinstance(b[1], str) and a[1] != b[1]


def test_input_with_initializer_is_an_input_with_a_default() -> None:
    w_input = helper.make_tensor_value_info("w", TensorProto.FLOAT, [4])
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    nodes = [helper.make_node("Add", ["x", "w"], ["y"], name="add")]
    graph = load_model(_graph_model(nodes, [_w()], inputs=[x, w_input]).SerializeToString())
    assert graph.input_names == ("x", "w")
    assert run_graph(graph, {"x": X})["y"].tolist() == [[1.0, -1.0, 5.0, -1.0]]
    override = np.ones(4, dtype=np.float32)
    assert run_graph(graph, {"x": X, "w": override})["y"].tolist() == [[2.0, -1.0, 4.0, -3.0]]


def test_before_ir4_initializers_listed_as_inputs_are_constants() -> None:
    w_input = helper.make_tensor_value_info("w", TensorProto.FLOAT, [4])
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    nodes = [helper.make_node("Add", ["x", "w"], ["y"], name="add")]
    model = _graph_model(nodes, [_w()], inputs=[x, w_input], ir_version=3)
    assert load_model(model.SerializeToString()).input_names == ("x",)


@pytest.mark.parametrize("dtype", ["float32", "float16", "float64", "int64", "int32", "int8",
                                   "uint8", "uint16", "uint32", "uint64", "bool"])
def test_typed_fields_and_raw_data_give_the_same_array(dtype: str) -> None:
    values = np.array([[0, 1, 2], [3, 4, 5]]).astype(dtype)
    code = helper.np_dtype_to_tensor_dtype(values.dtype)
    typed = helper.make_tensor("c", code, values.shape, values.flatten().tolist(), raw=False)
    raw = numpy_helper.from_array(values, "c")
    assert not typed.HasField("raw_data") and raw.HasField("raw_data")
    for proto in (typed, raw):
        got = tensor_to_array(proto, name="c", max_bytes=1 << 20)
        assert got.dtype == values.dtype and np.array_equal(got, values)
        assert not got.flags.writeable


def test_typed_field_count_mismatch_names_the_tensor() -> None:
    t = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[4], float_data=[1, 2, 3])
    model = _graph_model([helper.make_node("Add", ["x", "w"], ["y"], name="add")], [t])
    with pytest.raises(ModelError, match=r"tensor 'w': float_data has 3 values but the shape "
                                         r"needs 4"):
        load_model(model.SerializeToString())


def test_raw_data_and_typed_data_together_are_refused() -> None:
    t = _w()
    t.float_data.extend([1.0, 2.0, 3.0, 4.0])
    model = _graph_model([helper.make_node("Add", ["x", "w"], ["y"], name="add")], [t])
    with pytest.raises(ModelError, match="tensor 'w': holds both raw_data and float_data"):
        load_model(model.SerializeToString())


def test_declared_value_info_is_kept_and_checked() -> None:
    nodes = [helper.make_node("Add", ["x", "w"], ["s"], name="add"),
             helper.make_node("Mul", ["s", "x"], ["y"], name="mul")]
    model = _graph_model(nodes, [_w()])
    model.graph.value_info.append(helper.make_tensor_value_info("s", TensorProto.FLOAT, [1, 4]))
    graph = load_model(model.SerializeToString())
    assert graph.value_info["s"].shape == (1, 4)
    model.graph.value_info[0].CopyFrom(
        helper.make_tensor_value_info("s", TensorProto.FLOAT, [1, 5]))
    with pytest.raises(GeError, match=r"node 'add' \(Add\): tensor 's': inferred shape "):
        load_model(model.SerializeToString())


@pytest.mark.parametrize("mutate, message", [
    (lambda m: setattr(m, "ir_version", 99), r"ir_version 99 is newer"),
    (lambda m: setattr(m, "ir_version", 0), r"has no ir_version"),
    (lambda m: m.graph.ClearField("node"), r"the graph is empty"),
    (lambda m: m.graph.ClearField("output"), r"the graph has no outputs"),
    (lambda m: m.ClearField("opset_import"), r"imports no ai.onnx opset"),
    (lambda m: m.functions.add(name="Mul", domain=""), r"function 'Mul': a function needs a "
                                                       r"domain other than ai.onnx"),
    (lambda m: m.graph.input[0].type.CopyFrom(
        helper.make_sequence_type_proto(helper.make_tensor_type_proto(1, [4]))),
     r"tensor 'x': has type sequence_type; only tensors are supported"),
    (lambda m: m.graph.input[0].ClearField("type"), r"tensor 'x': has no type"),
    (lambda m: m.graph.input[0].type.tensor_type.shape.dim[1].__setattr__("dim_value", -3),
     r"tensor 'x': negative dim -3 at axis 1"),
    (lambda m: m.graph.node[0].attribute.append(helper.make_attribute("alpha", 1.0)),
     r"node 'add' \(Add\): Add has no attribute 'alpha'"),
    (lambda m: m.graph.node[0].__setattr__("domain", "ge"),
     r"node 'add' \(ge.Add\): uses domain 'ge', which the model does not import"),
])
def test_header_and_node_checks(mutate: object, message: str) -> None:
    model = good_model()
    mutate(model)  # type: ignore[operator]
    with pytest.raises(GeError, match=message):
        load_model(model.SerializeToString())


def test_invalid_utf8_name_is_refused() -> None:
    data = bytearray(good_model().SerializeToString())
    at = data.find(b"mul")
    data[at] = 0xFF
    with pytest.raises(ModelError, match=r"node name '\ufffdul' is not valid UTF-8"):
        load_model(bytes(data))


def test_missing_file_and_folder(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match=r"nope.onnx: no such file"):
        load_model(tmp_path / "nope.onnx")
    with pytest.raises(ModelError, match=r": is a folder, not a model file"):
        load_model(tmp_path)


@given(st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 7)), min_size=1,
                max_size=8))
def test_bit_flips_only_ever_raise_our_errors(flips: list[tuple[int, int]]) -> None:
    data = bytearray(GOOD_BYTES)
    for at, bit in flips:
        data[at % len(data)] ^= 1 << bit
    try:
        load_model(bytes(data))
    except GeError as e:
        assert str(e).startswith("<bytes>: ") and "\n" not in str(e)


GOOD_BYTES = good_model().SerializeToString()
