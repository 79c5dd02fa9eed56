"""Precision modes on real graphs: where the Casts go, what runs in float16, the error."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from gerules.compiler import fix_input_shapes
from gerules.errors import UsageError
from gerules.ir.graph import Graph
from gerules.ir.verify import verify
from gerules.memory.plan import weights_bytes
from gerules.onnx_io import load_model
from gerules.opt.optimize import OptimizeOptions, optimize
from gerules.precision import (
    KeepDtype,
    PrecisionOptions,
    apply_precision,
    measure_error,
    parse_keep_dtype,
)
from gerules.precision.measure import compare
from gerules.runtime.executor import run_graph
from gerules.testing.models import cnn


def _graph(model: onnx.ModelProto, shapes: dict[str, tuple[int, ...]]) -> Graph:
    graph, _ = fix_input_shapes(load_model(model.SerializeToString()), shapes, keep_batch=False)
    return verify(graph)


def _classifier() -> onnx.ModelProto:
    """The test CNN with a Softmax over its logits (output ``probs``)."""
    model = cnn().model
    model.graph.node.append(helper.make_node("Softmax", ["logits"], ["probs"], name="softmax"))
    del model.graph.output[:]
    model.graph.output.append(helper.make_tensor_value_info("probs", TensorProto.FLOAT,
                                                            ["N", 10]))
    return model


@pytest.fixture(scope="module")
def source() -> Graph:
    return _graph(_classifier(), {"input": (2, 3, 16, 16)})


@pytest.fixture(scope="module")
def optimized(source: Graph) -> tuple[Graph, list]:
    graph, report = optimize(source, OptimizeOptions(soc_version="Ascend310P3"))
    return graph, report.fusions


def _dtype_of_op(graph: Graph, op: str) -> set[str]:
    types = {graph.type_of(o).dtype for n in graph.nodes if n.qualified_op == op  # type: ignore
             for o in n.outputs}
    return types


def _feeds() -> dict[str, np.ndarray]:
    return {"input": np.random.default_rng(1).standard_normal((2, 3, 16, 16)).astype("float32")}


def test_force_fp16_runs_in_float16_within_1e_2(optimized: tuple[Graph, list]) -> None:
    graph, _ = optimized
    out, report = apply_precision(graph, PrecisionOptions("force_fp16"))
    assert _dtype_of_op(out, "ge.FusedConv") == {"float16"}
    assert _dtype_of_op(out, "Softmax") == {"float16"}
    assert [(v.name, v.dtype) for v in out.inputs] == [("input", "float32")]
    assert [(v.name, v.dtype) for v in out.outputs] == [("probs", "float32")]
    casts = [n for n in out.nodes if n.op == "Cast"]
    assert len(casts) == 2  # the input in, the output back
    assert not any(i in out.initializers for n in casts for i in n.inputs)  # weights: ahead
    fused = [n for n in out.nodes if n.op == "FusedConv"]
    assert all(out.initializers[n.inputs[1]].dtype == np.float16 for n in fused)
    want = run_graph(graph, _feeds())["probs"]
    got = run_graph(out, _feeds())["probs"]
    np.testing.assert_allclose(got, want, rtol=1e-2, atol=1e-2 * float(np.abs(want).max()))
    assert report.conversion is not None and report.conversion.weights >= 4
    assert report.to_json()["weight_bytes"]["after"] * 2 == \
        report.to_json()["weight_bytes"]["before"]


def test_mix_precision_keeps_softmax_in_float32(optimized: tuple[Graph, list]) -> None:
    graph, _ = optimized
    out, report = apply_precision(graph, PrecisionOptions("allow_mix_precision"))
    assert _dtype_of_op(out, "Softmax") == {"float32"}
    assert _dtype_of_op(out, "ge.FusedConv") == {"float16"}
    kept = {k.op: k.reason for k in report.conversion.kept}  # type: ignore[union-attr]
    assert kept["Softmax"] == "black list (Softmax)"
    errors = measure_error(graph, out)
    assert errors[0].finite and errors[0].max_rel < 1e-2


def test_mixlist_changes_what_stays_float32(optimized: tuple[Graph, list]) -> None:
    graph, _ = optimized
    changes = {"white-list": {"to-add": ("Softmax",)}, "black-list": {"to-add": ("Gemm",)}}
    out, _ = apply_precision(graph, PrecisionOptions("allow_mix_precision", changes))
    assert _dtype_of_op(out, "Softmax") == {"float16"}
    gemm_like = [n for n in out.nodes if n.qualified_op in ("Gemm", "ge.FusedMatMul")]
    assert gemm_like and all(out.type_of(n.outputs[0]).dtype == "float32"  # type: ignore
                             for n in gemm_like)


def test_allow_fp32_to_fp16_narrows_only_cube_ops(optimized: tuple[Graph, list]) -> None:
    graph, _ = optimized
    out, report = apply_precision(graph, PrecisionOptions("allow_fp32_to_fp16"))
    assert _dtype_of_op(out, "ge.FusedConv") == {"float16"}
    assert _dtype_of_op(out, "AveragePool") == {"float32"}
    assert "vector unit keeps float32" in {k.reason for k in report.conversion.kept}  # type: ignore


def test_keep_dtype_pins_a_source_node_through_its_fusion(source: Graph,
                                                          optimized: tuple[Graph, list]) -> None:
    graph, fusions = optimized
    keep = parse_keep_dtype("conv2\n", "keep.cfg")
    out, _ = apply_precision(graph, PrecisionOptions("force_fp16", keep=keep),
                             source_names=[n.label for n in source.nodes], fusions=fusions)
    fused = {n.name: out.type_of(n.outputs[0]).dtype for n in out.nodes  # type: ignore
             if n.op == "FusedConv"}
    assert sorted(fused.values()) == ["float16", "float32"]
    assert any("conv2" in name for name, dtype in fused.items() if dtype == "float32")
    with pytest.raises(UsageError, match=r"keep.cfg:2: no node of the model is called 'conv9'"):
        apply_precision(graph, PrecisionOptions("force_fp16",
                                                keep=parse_keep_dtype("conv1\nconv9", "keep.cfg")),
                        source_names=[n.label for n in source.nodes], fusions=fusions)


def test_must_keep_origin_dtype_changes_nothing_and_estimates_fp16(
        optimized: tuple[Graph, list]) -> None:
    graph, _ = optimized
    out, report = apply_precision(graph, PrecisionOptions(), soc="Ascend310P3")
    assert out is graph
    est = report.to_json()["estimate"]
    assert est["weights_bytes_fp16"] * 2 == est["weights_bytes"]
    assert est["estimated_us_fp16"] > 0 and "estimated" in est["label"]


def test_fp16_estimate_matches_a_real_conversion_without_copying_weights() -> None:
    """Two readers of one weight, an identical copy of it and an integer weight: the estimate
    (stand-ins, no float16 copy) counts the bytes the converted graph really holds."""
    w = np.arange(16, dtype=np.float32).reshape(4, 4)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["a"]),
             helper.make_node("MatMul", ["a", "w_copy"], ["b"]),
             helper.make_node("Add", ["b", "w"], ["c"]),
             helper.make_node("Reshape", ["c", "shape"], ["y"])]
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(w.copy(), "w_copy"),
             numpy_helper.from_array(np.array([16], np.int64), "shape")]
    model = helper.make_model(helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [16])], inits),
        opset_imports=[helper.make_opsetid("", 17)])
    graph = _graph(model, {})
    real, _ = apply_precision(graph, PrecisionOptions("force_fp16"))
    _, report = apply_precision(graph, PrecisionOptions())
    est = report.to_json()["estimate"]
    assert est["weights_bytes"] == w.nbytes + 8
    assert est["weights_bytes_fp16"] == weights_bytes(real) == w.nbytes // 2 + 8


# ---- models that already hold Casts: the simplify rules cancel the redundant ones --------


def _half_model() -> onnx.ModelProto:
    """float16 in and out, an autocast-style float32 island: Cast -> Softmax -> Cast."""
    w = numpy_helper.from_array(np.linspace(-1, 1, 32).astype(np.float16).reshape(8, 4), "w")
    nodes = [helper.make_node("Cast", ["x"], ["x32"], name="up", to=TensorProto.FLOAT),
             helper.make_node("Softmax", ["x32"], ["p"], name="softmax"),
             helper.make_node("Cast", ["p"], ["p16"], name="down", to=TensorProto.FLOAT16),
             helper.make_node("MatMul", ["p16", "w"], ["y"], name="mm")]
    graph = helper.make_graph(
        nodes, "half", [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [2, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [2, 4])], [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("mode", ["force_fp16", "force_fp32"])
def test_redundant_casts_cancel_through_the_rules(mode: str) -> None:
    graph = _graph(_half_model(), {})
    out, report = apply_precision(graph, PrecisionOptions(mode))
    assert report.casts_after_rules < report.casts_before_rules
    feeds = {"x": np.random.default_rng(0).standard_normal((2, 8)).astype(np.float16)}
    want = run_graph(graph, feeds)["y"].astype(np.float32)
    got = run_graph(out, feeds)["y"]
    assert got.dtype == np.float16
    np.testing.assert_allclose(got.astype(np.float32), want, rtol=1e-2, atol=1e-3)
    if mode == "force_fp16":
        assert not [n for n in out.nodes if n.op == "Cast"]
    else:
        assert _dtype_of_op(out, "MatMul") == {"float32"}


def _mask_model() -> onnx.ModelProto:
    """y = x + (1 - float(mask)) * -10000: the mask arithmetic is integer-derived."""
    big = numpy_helper.from_array(np.array(-1e4, np.float32), "big")
    one = numpy_helper.from_array(np.array(1, np.float32), "one")
    nodes = [helper.make_node("Cast", ["mask"], ["m"], name="cast", to=TensorProto.FLOAT),
             helper.make_node("Sub", ["one", "m"], ["inv"], name="inv"),
             helper.make_node("Mul", ["inv", "big"], ["bias"], name="bias"),
             helper.make_node("Add", ["x", "bias"], ["y"], name="add")]
    graph = helper.make_graph(
        nodes, "mask", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4]),
                        helper.make_tensor_value_info("mask", TensorProto.INT64, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])], [big, one])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_integer_derived_values_keep_float32() -> None:
    graph = _graph(_mask_model(), {})
    out, report = apply_precision(graph, PrecisionOptions("force_fp16"))
    conv = report.conversion
    assert conv is not None
    assert {k.node: k.reason for k in conv.kept} == {
        "cast": "computed from integers", "inv": "computed from integers",
        "bias": "computed from integers"}
    assert _dtype_of_op(out, "Add") == {"float16"}
    x = np.full((2, 4), 0.5, np.float32)
    y = run_graph(out, {"x": x, "mask": np.array([[1, 0, 1, 0]] * 2)})["y"]
    assert list(y[0]) == [0.5, -10000.0, 0.5, -10000.0]


def test_weights_beyond_float16_saturate_and_are_counted() -> None:
    w = numpy_helper.from_array(np.array([1e6, -1e6, 1.0, 2.0], np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("Mul", ["x", "w"], ["y"], name="mul")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    out, report = apply_precision(_graph(model, {}), PrecisionOptions("force_fp16"))
    assert report.to_json()["weight_saturated"] == 2
    y = run_graph(out, {"x": np.ones(4, np.float32)})["y"]
    assert list(y) == [65504.0, -65504.0, 1.0, 2.0]


def test_compare_reports_non_finite_outputs() -> None:
    want = np.array([1.0, 2.0], np.float32)
    assert compare(want, np.array([1.0, np.inf], np.float32), "y").finite is False
    err = compare(want, np.array([1.5, 2.0], np.float32), "y")
    assert err.max_abs == 0.5 and err.max_rel == 0.25
    assert compare(want, np.array([1.0, np.nan]), "y").to_json()["max_abs"] is None


def test_keep_dtype_is_ignored_when_nothing_converts(optimized: tuple[Graph, list]) -> None:
    graph, _ = optimized
    out, _ = apply_precision(graph, PrecisionOptions(keep=KeepDtype(frozenset({"nope"}))))
    assert out is graph
