"""Counterexamples the verifier found in the shipped library, kept as regression tests the
way ``rules verify`` prints them (``check_instance`` on the shrunk instance): each fails if
its rule is wrong there again. And one instance where only the left side rounds badly,
which the verifier judges against the exact value."""

from __future__ import annotations

import numpy as np
import pytest

from gerules import GraphBuilder
from gerules.dsl import load_compiled
from gerules.dsl.compile import CompiledRules
from gerules.verify import COUNTEREXAMPLE, NO_INSTANCE, VERIFIED, check_instance

F16, F32 = np.float16, np.float32


@pytest.fixture(scope="module")
def shipped() -> CompiledRules:
    return load_compiled()


def test_layer_norm_with_a_negative_epsilon_is_not_fused(shipped: CompiledRules) -> None:
    """eps = -1.179 nearly cancels the row's variance: the float16 subgraph stays finite
    while LayerNormalization's float32 statistics go below zero (NaN)."""
    g = GraphBuilder("ln", opset=17)
    x = g.input("x", [1, 4], "float16")
    d = g.op("Sub", x, g.op("ReduceMean", x, axes=[-1], keepdims=1))
    var = g.op("ReduceMean", g.op("Pow", d, np.array(2.0, F16)), axes=[-1], keepdims=1)
    root = g.op("Sqrt", g.op("Add", var, np.array(-1.179, F16)))
    g.output(g.op("Add", g.op("Mul", g.op("Div", d, root), np.ones(4, F16)), np.zeros(4, F16)))
    feeds = {"x": np.array([[1.1, 2.3, -0.7, 0.45]], F16)}
    result = check_instance(shipped.rule("fuse_layer_norm[opset<18]"), g.build(), feeds,
                            rewrite="fuse_layer_norm[opset<18]")
    assert result.status != COUNTEREXAMPLE, result.detail


def test_batchnorm_with_zero_variance_and_epsilon_is_not_expanded(
        shipped: CompiledRules) -> None:
    """var + epsilon == 0: the scale is infinite and beta - mean * s is NaN."""
    g = GraphBuilder("bn", opset=21)
    x = g.input("x", [1, 2, 1, 1], "float32")
    g.output(g.op("BatchNormalization", x, np.array([1.0, 2.0], F32), np.array([0.5, 0.0], F32),
                  np.array([0.0, 1.0], F32), np.array([0.0, 1.0], F32), epsilon=0.0))
    feeds = {"x": np.array([[[[-1.0]], [[2.0]]]], F32)}
    result = check_instance(shipped.rule("batchnorm_to_mul_add"), g.build(), feeds)
    assert result.status == NO_INSTANCE, result.detail


def test_a_fold_that_overflows_float16_is_refused(shipped: CompiledRules) -> None:
    """600 * 100 / sqrt(0.5) is past float16's 65504: the folded weight would be inf."""
    g = GraphBuilder("cb", opset=21)
    x = g.input("x", [1, 1, 1, 1], "float16")
    conv = g.op("Conv", x, np.array([[[[600.0]]]], F16), np.array([0.0], F16))
    g.output(g.op("BatchNormalization", conv, np.array([100.0], F16), np.array([0.0], F16),
                  np.array([0.0], F16), np.array([0.0], F16), epsilon=0.5))
    result = check_instance(shipped.rule("fold_conv_bn"), g.build(),
                            {"x": np.array([[[[0.01]]]], F16)})
    assert result.status == NO_INSTANCE, result.detail


def test_a_right_side_that_rounds_less_is_not_a_counterexample(
        shipped: CompiledRules) -> None:
    """A mask of 806 absorbs float16 scores of 0.014 and 0.13 (its ulp is 0.5): the subgraph
    weighs v evenly (8.0), ge.Attention in float32 does not (8.23, the float64 value)."""
    g = GraphBuilder("att", opset=21)
    q, kt = g.input("q", [1, 1, 1, 1], "float16"), g.input("kt", [1, 2], "float16")
    mask, v = g.input("mask", [1, 1, 1], "float16"), g.input("v", [2, 1], "float16")
    scores = g.op("Add", g.op("Div", g.op("MatMul", q, kt), np.array(70.0, F16)), mask)
    g.output(g.op("MatMul", g.op("Softmax", scores, axis=-1), v))
    feeds = {"q": np.array([[[[1.0]]]], F16), "kt": np.array([[1.0, 9.0]], F16),
             "mask": np.array([[[806.0]]], F16), "v": np.array([[4.0], [12.0]], F16)}
    result = check_instance(shipped.rule("fuse_attention_div_mask"), g.build(), feeds)
    assert result.status == VERIFIED, result.detail
