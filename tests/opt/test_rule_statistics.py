"""Truthful rule statistics: matched, applied and kept in the graph written are different
things; a pattern literal that differs is no match; atc's fusion_result.json agrees."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from gerules.cli.main import main
from gerules.compiler import fix_input_shapes
from gerules.ir.verify import verify
from gerules.onnx_io import load_model
from gerules.opt.optimize import OptimizeOptions, optimize
from gerules.report.fusion_result import fusion_result
from gerules.testing.models import cnn, residual_block


def _graph(case):  # noqa: ANN001, ANN202 - a ModelCase -> Graph with static shapes
    graph, _ = fix_input_shapes(load_model(case.model.SerializeToString()), {}, keep_batch=False)
    return verify(graph)


def test_a_rule_that_applies_but_loses_at_extraction_is_not_kept() -> None:
    graph = _graph(cnn())
    _, npu = optimize(graph, OptimizeOptions(target="npu"))
    result, onnx_only = optimize(graph, OptimizeOptions(target="onnx"))
    assert npu.rules["fuse_conv_activation"]["kept"] == 2
    assert npu.rules["fuse_conv_activation"]["variants"]["fuse_conv_activation[Act=Relu]"][
        "kept"] == 2  # the one op of its class that fired
    stats = onnx_only.rules["fuse_conv_activation"]
    assert stats["matches"] == stats["applied"] == 2 and stats["kept"] == 0
    assert result.op_counts()["Relu"] == 2 and not any(n.domain for n in result.nodes)


def test_bn_lowering_without_folding_is_not_kept() -> None:
    graph = _graph(residual_block())
    result, report = optimize(graph, OptimizeOptions(disabled=frozenset({"fold_conv_bn"})))
    stats = report.rules["batchnorm_to_mul_add"]
    assert stats["applied"] == 2 and stats["kept"] == 0
    assert result.op_counts()["BatchNormalization"] == 2


def test_kept_counts_the_rules_inside_a_later_fusion() -> None:
    _, report = optimize(_graph(residual_block()), OptimizeOptions())
    fused = [f for f in report.fusions if f.rule == "fuse_conv_add_relu"]
    assert fused and "fold_conv_bn" in fused[0].chain
    assert report.rules["fold_conv_bn"]["kept"] == 2  # both folds live on in fused convs
    for stats in report.rules.values():
        assert stats["matches"] >= stats["applied"] >= stats["kept"]


def _add_constant(value: float) -> onnx.ModelProto:
    c = numpy_helper.from_array(np.full((4,), value, np.float32), "c")
    node = helper.make_node("Add", ["x", "c"], ["y"], name="add")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [2, 4])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, [2, 4])], [c])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_a_pattern_constant_that_differs_is_no_match() -> None:
    _, report = optimize(verify(load_model(_add_constant(1.0).SerializeToString())))
    assert "add_zero" not in report.rules  # x + 1 is not x + 0: nothing to report
    _, report = optimize(verify(load_model(_add_constant(0.0).SerializeToString())))
    assert report.rules["add_zero"]["kept"] == 1


def test_fusion_result_uses_atc_names_and_fields() -> None:
    rules = {"fold_conv_bn": {"matches": 3, "applied": 3, "kept": 2, "ruleset": "fold"},
             "fold_conv_bn_no_bias": {"matches": 1, "applied": 1, "kept": 1, "ruleset": "fold"},
             "fuse_conv_activation": {
                 "matches": 3, "applied": 3, "kept": 0, "ruleset": "fuse_conv", "variants": {
                     "fuse_conv_activation[Act=Relu]": {"matches": 2, "applied": 2, "kept": 0},
                     "fuse_conv_activation[Act=Tanh]": {"matches": 1, "applied": 1,
                                                        "kept": 0}}},
             "fuse_mul_add": {"matches": 4, "applied": 0, "kept": 0,
                              "ruleset": "fuse_elementwise"},
             "never": {"matches": 0, "applied": 0, "kept": 0, "ruleset": "simplify"}}
    data = fusion_result(rules)
    graph = data["session_and_graph_id_0_0"]
    assert graph["graph_fusion"]["ConvBatchnormFusionPass"] == {"effect_times": "3",
                                                                "match_times": "4"}
    assert graph["ub_fusion"]["TbeConvReluFusionPass"] == {
        "effect_times": "0", "match_times": "2", "repository_hit_times": "0"}
    assert "fuse_mul_add" in graph["ub_fusion"]
    assert graph["graph_fusion"]["fuse_conv_activation[Act=Tanh]"]["match_times"] == "1"
    assert "never" not in json.dumps(data)


def test_compile_writes_fusion_result_next_to_the_om(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]
                                                     ) -> None:
    onnx.save(residual_block().model, tmp_path / "block.onnx")
    (tmp_path / "out").mkdir()
    assert main(["compile", str(tmp_path / "block.onnx"), f"--output={tmp_path / 'out' / 'b'}",
                 "--input_shape=x:1,16,8,8"]) == 0
    text = capsys.readouterr().out
    path = tmp_path / "out" / "fusion_result.json"
    assert f"wrote {path}" in text
    graph = json.loads(path.read_text())["session_and_graph_id_0_0"]
    assert graph["graph_fusion"]["ConvBatchnormFusionPass"]["effect_times"] == "2"
    line = next(x for x in text.splitlines() if x.startswith("fold_conv_bn "))
    assert line.split()[1:] == ["2", "2", "2"]  # matched, applied, kept
