"""ONNX export: checker-valid models, names kept, onnxruntime agrees, atomic and external saves."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from gerules.errors import UsageError
from gerules.ir.graph import Graph, Node, Value
from gerules.onnx_io import load_model, save_model, to_model_proto
from gerules.onnx_io import writer as writer_module
from gerules.runtime.executor import run_graph
from gerules.testing.bad_models import good_model

X = np.array([[1.0, -2.0, 3.0, -4.0]], dtype=np.float32)


def _ort(model: onnx.ModelProto | str, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    source = model if isinstance(model, str) else model.SerializeToString()
    session = ort.InferenceSession(source, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)  # type: ignore[no-any-return]


def test_export_is_checker_valid_and_runs_the_same() -> None:
    graph = load_model(good_model().SerializeToString())
    model = to_model_proto(graph)
    onnx.checker.check_model(model, full_check=True)
    (ours,) = run_graph(graph, {"x": X}).values()
    (theirs,) = _ort(model, {"x": X})
    assert np.array_equal(ours, theirs)


def test_round_trip_keeps_names_order_types_and_weights() -> None:
    first = load_model(good_model().SerializeToString())
    second = load_model(to_model_proto(first).SerializeToString())
    assert second.nodes == first.nodes
    assert second.inputs == first.inputs and second.outputs == first.outputs
    assert second.name == first.name and dict(second.opset) == dict(first.opset)
    assert second.initializers.keys() == first.initializers.keys()
    for name, array in first.initializers.items():
        assert second.initializers[name].dtype == array.dtype
        assert np.array_equal(second.initializers[name], array)
    assert dict(second.value_info) == dict(first.value_info)


def test_inputs_with_defaults_stay_inputs_with_defaults() -> None:
    model = good_model()
    model.graph.input.append(onnx.helper.make_tensor_value_info("w", onnx.TensorProto.FLOAT,
                                                                [4]))
    graph = load_model(model.SerializeToString())
    exported = to_model_proto(graph)
    assert [i.name for i in exported.graph.input] == ["x", "w"]
    assert [t.name for t in exported.graph.initializer] == ["w"]
    w = np.full(4, 2.0, dtype=np.float32)
    assert np.array_equal(_ort(exported, {"x": X, "w": w})[0],
                          run_graph(graph, {"x": X, "w": w})["y"])


def test_ge_ops_are_written_in_domain_ge_with_an_opset_import() -> None:
    graph = Graph(
        nodes=(Node("FusedMatMul", ("x", "w"), ("y",), {"activation": "Relu", "alpha": 0.5,
                                                        "perm": (1, 0)},
                    name="fused", domain="ge"),),
        inputs=(Value.of("x", "float32", (1, 4)),),
        outputs=(Value.of("y", "float32", (1, 4)),),
        initializers={"w": np.eye(4, dtype=np.float32)},
        opset={"": 17},
    )
    model = to_model_proto(graph)
    onnx.checker.check_model(model, full_check=True)
    assert {(o.domain, o.version) for o in model.opset_import} == {("", 17), ("ge", 1)}
    node = model.graph.node[0]
    assert node.domain == "ge" and node.name == "fused"
    kinds = {a.name: a.type for a in node.attribute}
    A = onnx.AttributeProto
    assert kinds == {"activation": A.STRING, "alpha": A.FLOAT, "perm": A.INTS}


def test_save_is_atomic_and_refuses_a_missing_folder(tmp_path: Path) -> None:
    graph = load_model(good_model().SerializeToString())
    with pytest.raises(UsageError, match="does not exist"):
        save_model(graph, tmp_path / "missing" / "m.onnx")
    path = save_model(graph, tmp_path / "m.onnx")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx"]
    onnx.checker.check_model(str(path), full_check=True)
    assert load_model(path).nodes == graph.nodes


def test_external_data_sidecar_round_trips(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                           ) -> None:
    rng = np.random.default_rng(0)
    big = rng.standard_normal((1, 600)).astype(np.float32)
    graph = Graph(
        nodes=(Node("Add", ("x", "b"), ("s",), name="add"),
               Node("Mul", ("s", "c"), ("y",), name="mul")),
        inputs=(Value.of("x", "float32", ("N", 600)),),
        outputs=(Value.of("y", "float32", ("N", 600)),),
        initializers={"b": big, "c": np.float32(2.0) * np.ones(1, np.float32)},
    )
    monkeypatch.setattr(writer_module, "EXTERNAL_THRESHOLD", 1000)  # "big" at 2.4 KB
    path = save_model(graph, tmp_path / "m.onnx")
    sidecar = tmp_path / "m.onnx.data"
    assert sidecar.stat().st_size == big.nbytes
    assert path.stat().st_size < big.nbytes
    onnx.checker.check_model(str(path), full_check=True)
    loaded = load_model(path)
    assert np.array_equal(loaded.initializers["b"], big)
    x = rng.standard_normal((3, 600)).astype(np.float32)
    assert np.array_equal(run_graph(loaded, {"x": x})["y"], _ort(str(path), {"x": x})[0])


def test_scalar_and_empty_initializers_keep_their_shapes() -> None:
    graph = Graph(
        nodes=(Node("Mul", ("x", "k"), ("s",), name="scale"),
               Node("Add", ("s", "e"), ("y",), name="add")),
        inputs=(Value.of("x", "float32", (0, 4)),),
        outputs=(Value.of("y", "float32", (0, 4)),),
        initializers={"k": np.array(3.0, dtype=np.float32),
                      "e": np.zeros((0, 4), dtype=np.float32)},
    )
    model = to_model_proto(graph)
    onnx.checker.check_model(model, full_check=True)
    assert {t.name: list(t.dims) for t in model.graph.initializer} == {"k": [], "e": [0, 4]}
    loaded = load_model(model.SerializeToString())
    assert loaded.initializers["k"].shape == () and loaded.initializers["e"].shape == (0, 4)


def test_constant_nodes_stay_constants_and_attribute_kinds_follow_the_schema() -> None:
    value = np.array([[1.5, -2.0]], dtype=np.float32)
    graph = Graph(
        nodes=(Node("Constant", (), ("c",), {"value": value}, name="const"),
               Node("LeakyRelu", ("c",), ("y",), {"alpha": 1}, name="leaky")),
        inputs=(),
        outputs=(Value.of("y", "float32", (1, 2)),),
    )
    model = to_model_proto(graph)
    onnx.checker.check_model(model, full_check=True)
    const, leaky = model.graph.node
    A = onnx.AttributeProto
    assert (const.attribute[0].name, const.attribute[0].type) == ("value", A.TENSOR)
    assert (leaky.attribute[0].type, leaky.attribute[0].f) == (A.FLOAT, 1.0)
    loaded = load_model(model.SerializeToString())
    assert [n.op for n in loaded.nodes] == ["Constant", "LeakyRelu"]
    assert np.array_equal(loaded.nodes[0].attrs["value"], value)
    assert np.array_equal(run_graph(loaded, {})["y"], _ort(model, {})[0])
