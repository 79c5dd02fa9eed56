"""Every registered kernel against onnxruntime (the second oracle), and every fused ``ge.*``
kernel against its unfused ai.onnx graph run by onnxruntime.

Instances: ``gerules.testing.oracle`` (node-suite templates with fresh values, and fresh shapes
for elementwise ops); hypothesis picks the template and the seed. In the ``ci`` profile the
draws are derandomized (the same every run) and bounded; ``HYPOTHESIS_PROFILE=nightly`` draws
new ones every run.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

from gerules.ir.ops.api import evaluate
from gerules.ir.registry import default_registry
from gerules.testing import oracle

TEMPLATES = oracle.templates()
OPS = sorted(TEMPLATES)
# Ops whose every template is one onnxruntime 1.32 cannot run (newer opset, bfloat16 or
# float8 feeds from Python): they are checked by the node suite alone. The test below fails
# when one of them gains an oracle, so the list cannot go stale.
NO_ORT = {"BitCast", "CumProd", "SwiGLU", "TensorScatter", "CausalConvWithState",
          "MelWeightMatrix"}


@pytest.mark.parametrize("op", OPS)
@settings(max_examples=3)
@given(data=st.data())
def test_kernel_agrees_with_onnxruntime(op: str, data: st.DataObject) -> None:
    ts = TEMPLATES[op]
    t = ts[data.draw(st.integers(0, len(ts) - 1), label="template")]
    v = oracle.check(t, data.draw(st.integers(0, 2**16), label="seed"))
    ok = ("agree", "no oracle", "disputed")
    assert v.status in ok, f"{v.case} seed {v.seed}: {v.status}: {v.detail}"


def test_most_ops_have_an_oracle() -> None:
    """Each op with a runnable template agrees on it; the ops without one are listed."""
    missing = []
    for op in OPS:
        verdicts = [oracle.check(t, 0) for t in TEMPLATES[op]]
        if not any(v.status == "agree" for v in verdicts):
            missing.append(op)
        bad = [v for v in verdicts if v.status not in ("agree", "no oracle")
               and (v.status != "disputed" or v.case not in oracle.DISPUTED)]
        assert not bad, f"{op}: {bad[0].case}: {bad[0].status}: {bad[0].detail}"
        stale = [v.case for v in verdicts if v.case in oracle.DISPUTED and v.status == "agree"]
        assert not stale, f"disputed but agreeing, drop from DISPUTED: {stale}"
    assert set(missing) <= NO_ORT, f"no onnxruntime oracle for {sorted(set(missing) - NO_ORT)}"
    assert len(OPS) - len(missing) >= 150, f"only {len(OPS) - len(missing)} ops checked"


def test_a_wrong_kernel_is_caught() -> None:
    """The comparison itself can fail: a value off by 1 % is a difference."""
    x = np.linspace(1, 2, 12, dtype=np.float32)
    assert oracle.compare(x * 1.01, x) is not None
    assert oracle.compare(x.astype(np.int64), x.astype(np.int64) + 1) is not None
    assert oracle.compare(np.array([np.nan], np.float32), np.array([np.nan], np.float32)) is None


# ----------------------------------------------------------------------------- fused ops


def _ort(nodes: list[onnx.NodeProto], feeds: dict[str, np.ndarray],
         inits: dict[str, np.ndarray]) -> np.ndarray:
    """Run ai.onnx ``nodes`` (output ``y``) in onnxruntime."""
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, a.shape)
              for n, a in feeds.items()]
    graph = helper.make_graph(nodes, "unfused", inputs,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [onnx.numpy_helper.from_array(a, n) for n, a in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    return oracle.run_onnxruntime(model, feeds)[0]


ACTS = {"": [], "Relu": [("Relu", {})], "Sigmoid": [("Sigmoid", {})], "Tanh": [("Tanh", {})],
        "LeakyRelu": [("LeakyRelu", {"alpha": 0.1})], "HardSwish": [("HardSwish", {})],
        "HardSigmoid": [("HardSigmoid", {"alpha": 0.3, "beta": 0.4})],
        "Gelu": [("Gelu", {})]}
ACT_ATTRS = {"LeakyRelu": {"alpha": 0.1}, "HardSigmoid": {"alpha": 0.3, "beta": 0.4}}


def _act_nodes(act: str, src: str) -> list[onnx.NodeProto]:
    if not act:
        return [helper.make_node("Identity", [src], ["y"])]
    op, attrs = ACTS[act][0]
    return [helper.make_node(op, [src], ["y"], **attrs)]


def _close(ours: np.ndarray, theirs: np.ndarray) -> None:
    assert oracle.compare(ours, theirs) is None, oracle.compare(ours, theirs)


@settings(max_examples=12)
@given(act=st.sampled_from(sorted(ACTS)), residual=st.booleans(), group=st.sampled_from([1, 2]),
       stride=st.sampled_from([1, 2]), seed=st.integers(0, 2**16))
def test_fused_conv_matches_unfused(act: str, residual: bool, group: int, stride: int,
                                    seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((1, 4, 6, 6)).astype(np.float32)
    w = rng.standard_normal((4, 4 // group, 3, 3)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    conv = {"group": group, "strides": [stride, stride], "pads": [1, 1, 1, 1]}
    out = (6 + 2 - 3) // stride + 1
    z = rng.standard_normal((1, 4, out, out)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], **conv)]
    if residual:
        nodes.append(helper.make_node("Add", ["c", "z"], ["s"]))
    nodes += _act_nodes(act, "s" if residual else "c")
    feeds = {"x": x, **({"z": z} if residual else {})}
    theirs = _ort(nodes, feeds, {"w": w, "b": b})
    (ours,) = evaluate("FusedConv", [x, w, b, z if residual else None],
                       {**conv, "activation": act, **ACT_ATTRS.get(act, {})}, domain="ge")
    _close(ours, theirs)


@settings(max_examples=12)
@given(act=st.sampled_from(sorted(ACTS)), bias=st.booleans(), trans=st.booleans(),
       seed=st.integers(0, 2**16))
def test_fused_matmul_matches_unfused(act: str, bias: bool, trans: bool, seed: int) -> None:
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((2, 3, 5)).astype(np.float32)
    w = rng.standard_normal((4, 5) if trans else (5, 4)).astype(np.float32)
    c = rng.standard_normal(4).astype(np.float32)
    nodes = []
    src = "w"
    if trans:
        nodes.append(helper.make_node("Transpose", ["w"], ["wt"], perm=[1, 0]))
        src = "wt"
    nodes.append(helper.make_node("MatMul", ["a", src], ["m"]))
    if bias:
        nodes.append(helper.make_node("Add", ["m", "c"], ["s"]))
    nodes += _act_nodes(act, "s" if bias else "m")
    theirs = _ort(nodes, {"a": a}, {"w": w, "c": c})
    (ours,) = evaluate("FusedMatMul", [a, w, c if bias else None],
                       {"activation": act, "transB": int(trans), **ACT_ATTRS.get(act, {})},
                       domain="ge")
    _close(ours, theirs)


@settings(max_examples=8)
@given(mask=st.booleans(), seed=st.integers(0, 2**16))
def test_fused_attention_matches_unfused(mask: bool, seed: int) -> None:
    rng = np.random.default_rng(seed)
    q, kt, v = (rng.standard_normal(s).astype(np.float32) for s in ((1, 2, 3, 4), (1, 2, 4, 5),
                                                                    (1, 2, 5, 4)))
    m = np.where(rng.random((1, 1, 3, 5)) < 0.3, -1e4, 0).astype(np.float32)
    scale = np.array(0.5, np.float32)
    nodes = [helper.make_node("MatMul", ["q", "kt"], ["s"]),
             helper.make_node("Mul", ["s", "scale"], ["ss"])]
    if mask:
        nodes.append(helper.make_node("Add", ["ss", "m"], ["sm"]))
    nodes += [helper.make_node("Softmax", ["sm" if mask else "ss"], ["p"], axis=-1),
              helper.make_node("MatMul", ["p", "v"], ["y"])]
    theirs = _ort(nodes, {"q": q, "kt": kt, "v": v}, {"scale": scale, "m": m})
    (ours,) = evaluate("Attention", [q, kt, v, m if mask else None], {"scale": 0.5},
                       domain="ge")
    _close(ours, theirs)


@settings(max_examples=8)
@given(mask=st.booleans(), packed=st.booleans(), seed=st.integers(0, 2**16))
def test_fused_multi_head_attention_matches_unfused(mask: bool, packed: bool, seed: int) -> None:
    """Reshape + Transpose per head around the attention, as exporters write it."""
    rng = np.random.default_rng(seed)
    b, s, h, d = 2, 3, 2, 4
    q, k, v = (rng.standard_normal((b, s, h * d)).astype(np.float32) for _ in range(3))
    m = np.where(rng.random((b, 1, 1, s)) < 0.3, -1e4, 0).astype(np.float32)
    inits = {"heads": np.array([b, s, h, d], np.int64), "merged": np.array([b, s, h * d],
                                                                          np.int64),
             "scale": np.array(0.5, np.float32), "m": m}
    nodes = []
    for name, perm in (("q", (0, 2, 1, 3)), ("k", (0, 2, 3, 1)), ("v", (0, 2, 1, 3))):
        nodes += [helper.make_node("Reshape", [name, "heads"], [f"{name}4"]),
                  helper.make_node("Transpose", [f"{name}4"], [f"{name}h"], perm=perm)]
    nodes += [helper.make_node("MatMul", ["qh", "kh"], ["sc"]),
              helper.make_node("Mul", ["sc", "scale"], ["ss"])]
    if mask:
        nodes.append(helper.make_node("Add", ["ss", "m"], ["sm"]))
    nodes += [helper.make_node("Softmax", ["sm" if mask else "ss"], ["p"], axis=-1),
              helper.make_node("MatMul", ["p", "vh"], ["o"]),
              helper.make_node("Transpose", ["o"], ["ot"], perm=(0, 2, 1, 3)),
              helper.make_node("Reshape", ["ot", "merged"], ["y"])]
    theirs = _ort(nodes, {"q": q, "k": k, "v": v}, inits)
    args = [np.concatenate([q, k, v], axis=-1), None, None] if packed else [q, k, v]
    (ours,) = evaluate("MultiHeadAttention", [*args, m if mask else None],
                       {"num_heads": h, "scale": 0.5}, domain="ge")
    _close(ours, theirs)


@settings(max_examples=8)
@given(bias=st.booleans(), eps=st.sampled_from([1e-5, 1e-3, 0.3]), seed=st.integers(0, 2**16))
def test_fused_add_layer_norm_and_gelu_match_unfused(bias: bool, eps: float, seed: int) -> None:
    rng = np.random.default_rng(seed)
    x, r = (rng.standard_normal((2, 3, 8)).astype(np.float32) for _ in range(2))
    g, b = rng.standard_normal(8).astype(np.float32), rng.standard_normal(8).astype(np.float32)
    nodes = [helper.make_node("Add", ["x", "r"], ["s"]),
             helper.make_node("LayerNormalization", ["s", "g", "b" if bias else ""], ["y"],
                              epsilon=eps)]
    theirs = _ort(nodes, {"x": x, "r": r}, {"g": g, "b": b})
    ours = evaluate("AddLayerNorm", [x, r, g, b if bias else None], {"epsilon": eps},
                    domain="ge", num_outputs=2)
    _close(ours[0], theirs)
    _close(ours[1], x + r)
    for approximate in ("none", "tanh"):
        want = _ort([helper.make_node("Gelu", ["x"], ["y"], approximate=approximate)],
                    {"x": x}, {})
        (got,) = evaluate("Gelu", [x], {"approximate": approximate}, domain="ge")
        _close(got, want)


def _shipped():  # noqa: ANN202 - the registry with the shipped library's own ops
    from gerules.dsl import load_compiled

    return load_compiled(soundness=False).registry


@settings(max_examples=6)
@given(seed=st.integers(0, 2**16))
def test_shipped_composite_ops_match_their_onnx_functions(seed: int) -> None:
    """Every op the shipped library defines by a body, against onnxruntime running the ONNX
    function it is written as (its body at the model's opset, inlined by onnxruntime)."""
    from gerules.ir.graph import Graph, Node, Value
    from gerules.onnx_io import to_model_proto

    rng = np.random.default_rng(seed)
    registry = _shipped()
    composites = [s for s in registry if s.body is not None]
    assert {s.op for s in composites} >= {"SiLU", "AddRelu", "MulAdd"}
    for schema in composites:
        n = len(schema.inputs)
        feeds = {f"x{k}": rng.standard_normal((2, 3, 8)).astype(np.float32) for k in range(n)}
        outs = tuple(f"y{k}" for k in range(len(schema.outputs)))
        graph = Graph((Node(schema.op, tuple(feeds), outs, domain=schema.domain),),
                      tuple(Value.of(k, "float32", (2, 3, 8)) for k in feeds),
                      tuple(Value.of(o, "float32", None) for o in outs),
                      opset={"": 18, schema.domain: 1}, functions=(schema.body,))
        theirs = oracle.run_onnxruntime(to_model_proto(graph, registry), feeds)
        ours = schema.kernel(list(feeds.values()), schema.call({}, len(outs)))
        for a, b in zip(ours, theirs, strict=True):
            _close(np.asarray(a), np.asarray(b))


def _pad_c_reshape_transpose(shape: tuple[int, ...], fmt: str) -> list[onnx.NodeProto]:
    """TransData from the plain layout as onnxruntime computes it: Pad, Reshape, Transpose."""
    def ints(name: str, values: list[int]) -> onnx.NodeProto:
        return helper.make_node("Constant", [], [name], value=helper.make_tensor(
            name, TensorProto.INT64, [len(values)], values))

    if fmt == "NC1HWC0":
        n, c, h, w = shape
        c1 = -(-c // 16)
        return [ints("p", [0, 0, 0, 0, 0, c1 * 16 - c, 0, 0]), ints("s", [n, c1, 16, h, w]),
                helper.make_node("Pad", ["x", "p"], ["a"]),
                helper.make_node("Reshape", ["a", "s"], ["b"]),
                helper.make_node("Transpose", ["b"], ["y"], perm=[0, 1, 3, 4, 2])]
    if fmt == "FRACTAL_NZ":
        *lead, m, k = shape
        r = len(lead)
        m1, k1 = -(-m // 16), -(-k // 16)
        return [ints("p", [0] * (r + 2) + [0] * r + [m1 * 16 - m, k1 * 16 - k]),
                ints("s", [*lead, m1, 16, k1, 16]),
                helper.make_node("Pad", ["x", "p"], ["a"]),
                helper.make_node("Reshape", ["a", "s"], ["b"]),
                helper.make_node("Transpose", ["b"], ["y"],
                                 perm=[*range(r), r + 2, r, r + 1, r + 3])]
    assert fmt == "NHWC"
    return [helper.make_node("Transpose", ["x"], ["y"], perm=[0, 2, 3, 1])]


@settings(max_examples=6)
@given(seed=st.integers(0, 2**16), fmt=st.sampled_from(["NC1HWC0", "FRACTAL_NZ", "NHWC"]))
def test_transdata_matches_pad_reshape_transpose_in_onnxruntime(seed: int, fmt: str) -> None:
    """ge.TransData against the same transfer written as ai.onnx ops run by onnxruntime, and
    back: the values return exactly (the padding is dropped)."""
    from gerules.ir.graph import TensorType

    rng = np.random.default_rng(seed)
    shape = (2, int(rng.integers(1, 40)), 3, int(rng.integers(1, 40)))
    x = rng.standard_normal(shape).astype(np.float32)
    src = "NCHW"
    want = _ort(_pad_c_reshape_transpose(shape, fmt), {"x": x}, {})
    (ours,) = evaluate("TransData", [x], {"src_format": src, "dst_format": fmt}, domain="ge",
                       types=[TensorType("float32", shape)])
    assert ours.shape == want.shape and np.array_equal(ours, want)
    (back,) = evaluate("TransData", [ours], {"src_format": fmt, "dst_format": src},
                       domain="ge", types=[TensorType("float32", shape, fmt)])
    assert np.array_equal(back, x)


def test_every_fused_op_has_an_oracle_test() -> None:
    fused = {op for domain, op in default_registry().ops("ge")}
    assert fused == {"FusedConv", "FusedMatMul", "Attention", "MultiHeadAttention",
                     "AddLayerNorm", "Gelu", "TransData"}, fused  # own kernels; composites:
    # above; TransData: against Pad/Reshape/Transpose above
