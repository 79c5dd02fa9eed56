"""The optimizer on the test architectures: same outputs, expected fusions, honest reports."""

from __future__ import annotations

import json

import numpy as np
import onnxruntime as ort
import pytest

from gerules.engine import Limits
from gerules.errors import UsageError
from gerules.onnx_io import load_model, to_model_proto
from gerules.opt.optimize import OptimizeOptions, optimize
from gerules.runtime.executor import run_graph
from gerules.testing.models import MODELS, ModelCase

TOL = {"rtol": 1e-4, "atol": 1e-5}  # every shipped fusion is @exact: float rounding only


def _load(name: str) -> tuple[ModelCase, object]:
    case = MODELS[name]()
    return case, load_model(case.model.SerializeToString())


def _same_outputs(case: ModelCase, before, after) -> None:
    for seed in (0, 1):
        feeds = case.feeds(seed)
        want, got = run_graph(before, feeds), run_graph(after, feeds)
        assert list(got) == list(want)
        for k in want:
            np.testing.assert_allclose(got[k], want[k], **TOL, err_msg=k)


def _same_in_onnxruntime(case: ModelCase, source, optimized) -> None:
    """The optimized graph, exported, runs in onnxruntime with the source's outputs."""
    session = ort.InferenceSession(to_model_proto(optimized).SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    feeds = case.feeds(0)
    want = run_graph(source, feeds)
    got = dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds),
                   strict=True))
    for k in want:
        np.testing.assert_allclose(got[k], want[k], **TOL, err_msg=k)


EXPECTED_NPU = {
    "cnn": {"ge.FusedConv": 2},
    "residual_block": {"ge.FusedConv": 2},
    # with symbolic batch and sequence dims: shape arithmetic keeps them symbolic, so the
    # embeddings' sum + norm fuses too (four residual Add + LayerNorm pairs); each layer's
    # head split/merge and its Q, K, V projections go into one attention op
    "transformer_encoder": {"ge.MultiHeadAttention": 2, "ge.Attention": 0,
                            "ge.AddLayerNorm": 4, "Transpose": 0},
    # every Conv+BN+ReLU (and Conv+BN+Add+ReLU) fused; the two 1x1 downsample Conv+BN
    # branches feed their block's fused conv as its residual input
    "tiny_resnet": {"ge.FusedConv": 9, "Conv": 2, "BatchNormalization": 0, "Relu": 0,
                    "Add": 0},
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_npu_target_keeps_outputs_and_fuses(name: str) -> None:
    case, graph = _load(name)
    out, report = optimize(graph, OptimizeOptions(target="npu"))
    _same_outputs(case, graph, out)
    counts = out.op_counts()
    for op, n in EXPECTED_NPU[name].items():
        assert counts.get(op, 0) == n, (op, counts)
    assert "BatchNormalization" not in counts and "Erf" not in counts
    assert report.nodes_after < report.nodes_before
    assert report.estimate_after.total_us < report.estimate_before.total_us
    assert report.stop_reason in ("saturated", "schedule done") and not report.warnings


@pytest.mark.parametrize("name", sorted(MODELS))
def test_onnx_target_runs_in_onnxruntime(name: str) -> None:
    case, graph = _load(name)
    out, _ = optimize(graph, OptimizeOptions(target="onnx"))
    # only ai.onnx ops, and composite ops, which are written as ONNX functions
    assert all(out.function(*op.rsplit(".", 1)) for op in out.op_counts() if "." in op)
    _same_in_onnxruntime(case, graph, out)


def test_fusions_name_the_rule_and_the_replaced_nodes() -> None:
    _, graph = _load("residual_block")
    _, report = optimize(graph)
    by_rule = {f.rule: f for f in report.fusions}
    residual = by_rule["fuse_conv_add_relu"]
    assert residual.op == "ge.FusedConv"
    replaced = {op for _, op in residual.replaced}
    assert {"Relu", "Add", "Conv", "BatchNormalization"} <= replaced
    assert residual.chain == ("fold_conv_bn", "fuse_conv_add_relu")  # every rule behind it
    json.dumps(report.to_json())  # the report is plain data


def test_o0_changes_nothing_and_o1_fuses_nothing() -> None:
    _, graph = _load("cnn")
    same, report = optimize(graph, OptimizeOptions(opt_level="O0"))
    assert same.op_counts() == graph.op_counts() and report.stop_reason == "not run"
    o1, _ = optimize(graph, OptimizeOptions(opt_level="O1"))
    assert not [op for op in o1.op_counts() if op.startswith("ge.")]


def test_switched_off_rules_leave_their_pattern_alone() -> None:
    case, graph = _load("cnn")
    out, report = optimize(graph, OptimizeOptions(target="onnx",
                                                  disabled=frozenset({"fold_conv_bn"})))
    assert out.op_counts()["BatchNormalization"] == 2
    assert report.disabled == ["fold_conv_bn"]
    out, _ = optimize(graph, OptimizeOptions(disabled=frozenset({"fuse_conv"})))
    assert "ge.FusedConv" not in out.op_counts()
    _same_outputs(case, graph, out)


def test_unknown_switch_name_is_a_warning_listing_valid_names() -> None:
    _, graph = _load("cnn")
    _, report = optimize(graph, OptimizeOptions(disabled=frozenset({"fuse_conv_rleu"})))
    assert any("fuse_conv_rleu" in w and "fuse_conv" in w for w in report.warnings)


def test_all_off_runs_no_rule() -> None:
    _, graph = _load("cnn")
    out, report = optimize(graph, OptimizeOptions(disabled=frozenset({"ALL"})))
    assert out.op_counts() == graph.op_counts()
    assert not report.rules


def test_limits_are_reported_not_silent() -> None:
    case, graph = _load("transformer_encoder")
    out, report = optimize(graph, OptimizeOptions(limits=Limits(iterations=2, nodes=10_000,
                                                                seconds=30.0)))
    assert report.stop_reason == "iteration limit"
    assert any("iteration limit" in w for w in report.warnings)
    assert report.limits["iterations"] == 2
    _same_outputs(case, graph, out)


def test_o3_uses_ilp_extraction_and_is_no_worse_than_o2() -> None:
    case, graph = _load("residual_block")
    o2, r2 = optimize(graph, OptimizeOptions(opt_level="O2"))
    o3, r3 = optimize(graph, OptimizeOptions(opt_level="O3"))
    _same_outputs(case, graph, o3)
    assert r3.estimate_after.total_us <= r2.estimate_after.total_us + 1e-6


@pytest.mark.parametrize("bad", [{"opt_level": "O9"}, {"target": "gpu"}])
def test_bad_options_are_usage_errors(bad: dict[str, str]) -> None:
    _, graph = _load("cnn")
    with pytest.raises(UsageError):
        optimize(graph, OptimizeOptions(**bad))


def test_all_off_but_one_rule_on() -> None:
    _, graph = _load("cnn")
    out, _ = optimize(graph, OptimizeOptions(target="onnx", disabled=frozenset({"ALL"}),
                                             enabled=frozenset({"fold_conv_bn"})))
    assert "BatchNormalization" not in out.op_counts()


def test_static_transformer_for_onnxruntime_keeps_integer_shapes() -> None:
    """With static shapes the flat-Gemm and Reshape rules fire; what they add must be valid
    ONNX (Reshape shapes are int64) and compute the same in onnxruntime."""
    from gerules.compiler import fix_input_shapes
    from gerules.ir.verify import verify

    case, graph = _load("transformer_encoder")
    graph = verify(fix_input_shapes(graph, {"input_ids": (2, 8), "attention_mask": (2, 8)},
                                    keep_batch=False)[0])
    out, report = optimize(graph, OptimizeOptions(target="onnx"))
    assert report.rules["matmul_add_to_flat_gemm"]["applied"] > 0
    for node in out.nodes:
        if node.op == "Reshape":
            assert out.initializers[node.inputs[1]].dtype == np.int64
    _same_in_onnxruntime(case, graph, out)


def test_dynamic_batch_shape_chains_fold_and_every_batch_still_works() -> None:
    """With a symbolic batch, the exporters' Shape -> Gather -> Concat -> Reshape chains
    become constant targets (dims copied with 0), so nothing of them is left."""
    case, graph = _load("transformer_encoder")
    from gerules.compiler import fix_input_shapes
    from gerules.ir.verify import verify

    graph = verify(fix_input_shapes(graph, {"input_ids": (-1, 8), "attention_mask": (-1, 8)},
                                    keep_batch=True)[0])
    assert graph.inputs[0].shape == ("batch", 8)
    out, report = optimize(graph)
    counts = out.op_counts()
    assert "Shape" not in counts and "Concat" not in counts
    assert report.rules["reshape_copy_dims"]["applied"] > 0
    for batch in (1, 3):
        rng = np.random.default_rng(batch)
        feeds = {"input_ids": rng.integers(0, 50, (batch, 8)).astype(np.int64),
                 "attention_mask": np.ones((batch, 8), np.int64)}
        want, got = run_graph(graph, feeds), run_graph(out, feeds)
        for k in want:
            np.testing.assert_allclose(got[k], want[k], **TOL, err_msg=k)
