"""atc --mode=3 pre-check: one entry per node, supported or not and why."""

from __future__ import annotations

from onnx import TensorProto, helper

from gerules.report.precheck import precheck
from gerules.testing.models import cnn


def _model(nodes: list, opset: int = 17, extra_domains: tuple[str, ...] = ()) -> bytes:
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info(nodes[-1].output[0], TensorProto.FLOAT, None)])
    imports = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, 1)
                                                   for d in extra_domains]
    return helper.make_model(graph, opset_imports=imports).SerializeToString()


def test_supported_model_succeeds() -> None:
    result = precheck(cnn().model.SerializeToString(), "cnn.onnx")
    assert result["result"] == "success"
    assert result["summary"]["supported"] == result["summary"]["nodes"] == 10
    assert result["op_types"]["Conv"] == 2 and not result["errors"]


def test_each_unsupported_node_says_why() -> None:
    data = _model([
        helper.make_node("Relu", ["x"], ["a"], name="ok"),
        helper.make_node("Relux", ["a"], ["b"], name="typo"),
        helper.make_node("ImageDecoder", ["b"], ["c"], name="decoder"),
        helper.make_node("Frob", ["c"], ["d"], name="custom", domain="com.acme"),
        helper.make_node("LayerNormalization", ["d", "x"], ["e"], name="old"),
    ], opset=16, extra_domains=("com.acme",))
    result = precheck(data, "m.onnx")
    by_name = {n["name"]: n for n in result["nodes"]}
    assert result["result"] == "failed"
    assert by_name["ok"]["result"] == "supported"
    assert "did you mean Relu" in by_name["typo"]["reason"]
    assert by_name["decoder"]["result"] == "unsupported"
    assert by_name["custom"]["reason"] == "unknown domain 'com.acme'"
    assert "needs opset 17" in by_name["old"]["reason"]
    assert result["summary"]["unsupported_op_types"] == [
        "ImageDecoder", "LayerNormalization", "Relux", "com.acme.Frob"]


def test_known_ops_that_do_not_fit_fail_on_their_node() -> None:
    w = helper.make_tensor("w", TensorProto.FLOAT, [4], [1.0] * 4)
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "w"], ["y"], name="bad_add")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    data = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    result = precheck(data.SerializeToString(), "m.onnx")
    assert result["result"] == "failed"
    assert result["nodes"][0]["result"] == "failed" and result["errors"][0]["node"] == "bad_add"
