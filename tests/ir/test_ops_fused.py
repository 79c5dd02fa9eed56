"""The fused ``ge`` ops against compositions of the unfused ai.onnx kernels."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from gerules.errors import ShapeError
from gerules.ir.graph import Graph, Node, TensorType, Value
from gerules.ir.ops.api import evaluate, infer_types
from gerules.ir.registry import default_registry
from gerules.ir.verify import verify
from gerules.runtime.executor import run_graph

RNG = np.random.default_rng(7)


def rand(*shape: int, scale: float = 1.0, dtype: Any = np.float32) -> np.ndarray:
    return (RNG.standard_normal(shape) * scale).astype(dtype)


def ev(op: str, *inputs: np.ndarray | None, **attrs: Any) -> np.ndarray:
    return evaluate(op, list(inputs), attrs, opset=20)[0]


def ge(op: str, *inputs: np.ndarray | None, num_outputs: int = 1,
       **attrs: Any) -> list[np.ndarray]:
    return evaluate(op, list(inputs), attrs, domain="ge", num_outputs=num_outputs, check=True)


# (fused attributes, the same activation as an ai.onnx op applied to y)
ACTIVATIONS: list[tuple[dict[str, Any], Any]] = [
    ({"activation": ""}, lambda y: y),
    ({"activation": "Relu"}, lambda y: ev("Relu", y)),
    ({"activation": "Clip", "clip_min": 0.0, "clip_max": 6.0},
     lambda y: ev("Clip", y, np.float32(0), np.float32(6))),
    ({"activation": "Clip", "clip_max": 0.5}, lambda y: ev("Clip", y, None, np.float32(0.5))),
    ({"activation": "LeakyRelu", "alpha": 0.2}, lambda y: ev("LeakyRelu", y, alpha=0.2)),
    ({"activation": "LeakyRelu"}, lambda y: ev("LeakyRelu", y)),
    ({"activation": "Sigmoid"}, lambda y: ev("Sigmoid", y)),
    ({"activation": "HardSigmoid", "alpha": 0.3, "beta": 0.4},
     lambda y: ev("HardSigmoid", y, alpha=0.3, beta=0.4)),
    ({"activation": "HardSwish"}, lambda y: ev("HardSwish", y)),
    ({"activation": "Tanh"}, lambda y: ev("Tanh", y)),
    ({"activation": "Gelu"}, lambda y: ev("Gelu", y)),
    ({"activation": "Gelu", "gelu_approximate": "tanh"},
     lambda y: ev("Gelu", y, approximate="tanh")),
]
ACT_IDS = [f"{a['activation'] or 'none'}-{i}" for i, (a, _) in enumerate(ACTIVATIONS)]


# ----------------------------------------------------------------------------- FusedConv


@pytest.mark.parametrize(("act", "ref"), ACTIVATIONS, ids=ACT_IDS)
def test_fused_conv_equals_conv_add_activation(act: dict[str, Any], ref: Any) -> None:
    x, w, b = rand(2, 4, 9, 9), rand(6, 2, 3, 3), rand(6)
    z = rand(2, 6, 5, 5)
    conv = {"group": 2, "strides": (2, 2), "pads": (1, 1, 1, 1)}
    want = ref(ev("Add", ev("Conv", x, w, b, **conv), z))
    (got,) = ge("FusedConv", x, w, b, z, **conv, **act)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_fused_conv_without_bias_and_residual_depthwise() -> None:
    x, w = rand(1, 8, 10, 10), rand(8, 1, 3, 3)
    attrs = {"group": 8, "dilations": (2, 2), "auto_pad": "SAME_UPPER"}
    want = ev("Relu", ev("Conv", x, w, **attrs))
    (got,) = ge("FusedConv", x, w, **attrs, activation="Relu")
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_fused_conv_residual_must_not_grow_output() -> None:
    types = [TensorType("float32", s) for s in [(1, 2, 4, 4), (3, 2, 1, 1), (3,), (2, 3, 4, 4)]]
    with pytest.raises(ShapeError, match="residual Z"):
        infer_types("FusedConv", types, domain="ge")


def test_fused_conv_unknown_activation() -> None:
    with pytest.raises(ShapeError, match="unknown activation 'Swish'"):
        ge("FusedConv", rand(1, 1, 3, 3), rand(1, 1, 1, 1), activation="Swish")


def test_fused_conv_flops_count_conv_macs() -> None:
    sch = default_registry().get("FusedConv", "ge")
    ins = [TensorType("float32", (1, 64, 56, 56)), TensorType("float32", (64, 64, 3, 3))]
    outs = [TensorType("float32", (1, 64, 56, 56))]
    assert sch.flops is not None
    flops = sch.flops(ins, outs, sch.call({"activation": "Relu"}))
    assert flops == 2 * 64 * 56 * 56 * 64 * 9 + 64 * 56 * 56


# ----------------------------------------------------------------------------- FusedMatMul


@pytest.mark.parametrize(("act", "ref"), ACTIVATIONS[:6], ids=ACT_IDS[:6])
def test_fused_matmul_equals_matmul_add_activation(act: dict[str, Any], ref: Any) -> None:
    a, b, c = rand(2, 3, 4), rand(5, 4), rand(5)
    want = ref(ev("Add", ev("MatMul", a, ev("Transpose", b)), c))
    (got,) = ge("FusedMatMul", a, b, c, transB=1, **act)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_fused_matmul_batched_broadcast_no_bias() -> None:
    a, b = rand(3, 1, 4, 6), rand(2, 6, 5)
    (got,) = ge("FusedMatMul", a, b, activation="Tanh")
    np.testing.assert_allclose(got, ev("Tanh", ev("MatMul", a, b)), rtol=1e-6)
    assert got.shape == (3, 2, 4, 5)


def test_fused_matmul_inner_dims_error() -> None:
    types = [TensorType("float32", (2, 4)), TensorType("float32", (5, 3))]
    with pytest.raises(ShapeError, match="inner dims 4 and 5 differ"):
        infer_types("FusedMatMul", types, domain="ge")


# ----------------------------------------------------------------------------- Attention


def _attention_ref(q: np.ndarray, kt: np.ndarray, v: np.ndarray, mask: np.ndarray | None,
                   scale: float) -> np.ndarray:
    s = ev("Mul", ev("MatMul", q, kt), np.array(scale, q.dtype))
    if mask is not None:
        s = ev("Add", s, mask)
    return ev("MatMul", evaluate("Softmax", [s], {"axis": -1}, opset=13)[0], v)


def test_attention_equals_unfused_graph_with_mask() -> None:
    q, kt, v = rand(2, 4, 5, 8), rand(2, 4, 8, 6), rand(2, 4, 6, 8)
    mask = np.where(RNG.random((2, 1, 1, 6)) < 0.3, -1e4, 0).astype(np.float32)
    (got,) = ge("Attention", q, kt, v, mask, scale=0.125)
    np.testing.assert_allclose(got, _attention_ref(q, kt, v, mask, 0.125), rtol=1e-5,
                               atol=1e-6)


def test_attention_default_scale_is_inverse_sqrt_depth() -> None:
    q, kt, v = rand(1, 3, 16), rand(1, 16, 3), rand(1, 3, 2)
    (got,) = ge("Attention", q, kt, v)
    np.testing.assert_allclose(got, _attention_ref(q, kt, v, None, 0.25), rtol=1e-5)


def test_attention_is_stable_for_large_logits_and_float16() -> None:
    q, kt, v = rand(1, 4, 8, scale=300), rand(1, 8, 4, scale=300), rand(1, 4, 8)
    (got,) = ge("Attention", q, kt, v, scale=1.0)
    assert np.isfinite(got).all()
    (half,) = ge("Attention", q.astype(np.float16) / 300, kt.astype(np.float16), v.astype(
        np.float16), scale=1.0)
    want = _attention_ref(q / 300, kt, v, None, 1.0)
    assert half.dtype == np.float16
    np.testing.assert_allclose(half.astype(np.float32), want, rtol=2e-2, atol=2e-2)


def test_attention_mask_must_broadcast_to_scores() -> None:
    types = [TensorType("float32", s) for s in [(1, 4, 8), (1, 8, 5), (1, 5, 8), (1, 4, 7)]]
    with pytest.raises(ShapeError):
        infer_types("Attention", types, domain="ge")


# ----------------------------------------------------------------------------- MultiHeadAttention


def _heads_ref(q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray | None,
               heads: int, scale: float) -> np.ndarray:
    """Reshape + Transpose around the unfused attention, as exporters write it."""
    def split(x: np.ndarray, perm: tuple[int, ...]) -> np.ndarray:
        shape = np.array([x.shape[0], x.shape[1], heads, x.shape[2] // heads], np.int64)
        return ev("Transpose", ev("Reshape", x, shape), perm=perm)

    y = _attention_ref(split(q, (0, 2, 1, 3)), split(k, (0, 2, 3, 1)), split(v, (0, 2, 1, 3)),
                       mask, scale)
    merged = ev("Transpose", y, perm=(0, 2, 1, 3))
    return ev("Reshape", merged, np.array([q.shape[0], q.shape[1], -1], np.int64))


def test_multi_head_attention_equals_split_attention_merge() -> None:
    q, k, v = rand(2, 5, 12), rand(2, 7, 12), rand(2, 7, 6)
    mask = np.where(RNG.random((2, 1, 1, 7)) < 0.3, -1e4, 0).astype(np.float32)
    (got,) = ge("MultiHeadAttention", q, k, v, mask, num_heads=3, scale=0.4)
    assert got.shape == (2, 5, 6)
    np.testing.assert_allclose(got, _heads_ref(q, k, v, mask, 3, 0.4), rtol=1e-5, atol=1e-6)


def test_packed_qkv_is_q_k_v_side_by_side() -> None:
    q, k, v = rand(1, 4, 8), rand(1, 4, 8), rand(1, 4, 8)
    (got,) = ge("MultiHeadAttention", np.concatenate([q, k, v], axis=-1), None, None,
                num_heads=2)
    np.testing.assert_allclose(got, _heads_ref(q, k, v, None, 2, 0.5), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("shapes", [
    [(1, 4, 8), (1, 4, 9), (1, 4, 9)],  # K does not split into the heads
    [(1, 4, 8), (1, 4, 8), None],  # K without V
    [(1, 4, 10), None, None],  # packed, not a multiple of 3
    [(1, 4, 8), (1, 6, 8), (1, 6, 8), (1, 1, 4, 5)],  # the mask does not fit the scores
])
def test_multi_head_attention_refuses_bad_shapes(shapes: list) -> None:
    types = [None if s is None else TensorType("float32", s) for s in shapes]
    with pytest.raises(ShapeError):
        infer_types("MultiHeadAttention", types, attrs={"num_heads": 2}, domain="ge")


# ----------------------------------------------------------------------------- AddLayerNorm


def test_add_layernorm_equals_add_then_layernorm() -> None:
    x, r, scale, bias = rand(2, 5, 16), rand(2, 5, 16), rand(16), rand(16)
    s = ev("Add", x, r)
    want = evaluate("LayerNormalization", [s, scale, bias], {"epsilon": 1e-6}, opset=17)[0]
    y, s_out = ge("AddLayerNorm", x, r, scale, bias, num_outputs=2, epsilon=1e-6)
    np.testing.assert_allclose(y, want, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(s_out, s)


def test_add_layernorm_single_output_no_bias() -> None:
    x, r, scale = rand(3, 8), rand(1, 8), rand(8)
    want = evaluate("LayerNormalization", [ev("Add", x, r), scale], opset=17)[0]
    (y,) = ge("AddLayerNorm", x, r, scale)
    np.testing.assert_allclose(y, want, rtol=1e-6, atol=1e-6)


# ----------------------------------------------------------------------------- Gelu


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_ge_gelu_equals_gelu20(approximate: str) -> None:
    x = rand(64, scale=3)
    (got,) = ge("Gelu", x, approximate=approximate)
    np.testing.assert_array_equal(got, ev("Gelu", x, approximate=approximate))


def test_ge_gelu_equals_erf_composition() -> None:
    x = rand(64, scale=3)
    erf = ev("Erf", ev("Div", x, np.array(np.sqrt(2), np.float32)))
    want = ev("Mul", ev("Mul", x, ev("Add", erf, np.array(1, np.float32))),
              np.array(0.5, np.float32))
    np.testing.assert_allclose(ge("Gelu", x)[0], want, rtol=1e-6, atol=1e-7)


def test_ge_ops_run_in_an_opset17_graph() -> None:
    """A graph at ai.onnx opset 17 (no Gelu there) can hold ge.Gelu and ge.FusedMatMul."""
    g = Graph(
        nodes=(Node("FusedMatMul", ("x", "w"), ("h",), {"activation": "Relu"}, domain="ge"),
               Node("Gelu", ("h",), ("y",), domain="ge")),
        inputs=(Value.of("x", "float32", ("N", 4)),),
        outputs=(Value.of("y", "float32", None),),
        initializers={"w": rand(4, 3)},
        opset={"": 17, "ge": 1},
    )
    inferred = verify(g)
    assert inferred.value_info["y"].shape == ("N", 3)
    x = rand(2, 4)
    y = run_graph(g, {"x": x})["y"]
    want = ev("Gelu", ev("Relu", ev("MatMul", x, g.initializers["w"])))
    np.testing.assert_allclose(y, want, rtol=1e-6)
