"""ge.FusedConv on NC1HWC0 / FRACTAL_Z operands (``ir.ops.conv_blocked``): the result equals
the plain conv through TransData (``formats.to_format`` / ``from_format``) and onnxruntime's
Conv + Add + activation, padding lanes come out zero, operands' padding lanes (NaN here)
reach no value, and the GEMM-ready weight is derived once per weight."""

from __future__ import annotations

import gc
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import helper

from gerules.ir import formats as F
from gerules.ir import layout
from gerules.ir.graph import TensorType
from gerules.ir.ops import conv_blocked
from gerules.ir.ops._common import scratch
from gerules.ir.ops.api import evaluate
from gerules.ir.ops.conv_blocked import fused_conv_blocked
from gerules.ir.registry import default_registry

# (N, C, H, W, M, kernel, stride, pad, dilation, dtype, residual, activation[, group])
CASES = [
    (1, 16, 8, 8, 32, 1, 1, 0, 1, "float32", False, ""),  # pointwise: no im2col
    (2, 20, 9, 7, 19, 3, 2, 1, 1, "float32", True, "Relu"),  # C and M past a block
    (1, 3, 17, 17, 8, 7, 2, 3, 1, "float32", False, "Relu"),  # a stem: C < C0
    (1, 33, 6, 6, 17, 3, 1, 1, 1, "float16", True, "Sigmoid"),  # float16, C0 16
    (2, 16, 8, 8, 16, 1, 2, 0, 1, "float64", True, ""),  # 1x1 stride 2
    (1, 8, 9, 9, 8, 3, 1, 2, 2, "float32", False, "LeakyRelu"),  # dilated, wide pads
    (1, 24, 5, 11, 40, 3, 1, 0, 1, "float32", True, "Relu"),  # no padding, 3x3
    (2, 20, 7, 9, 19, 3, 1, 1, 1, "float64", True, "Relu"),  # 3x3 stride 1, two images
    (1, 16, 8, 8, 24, 1, 1, 0, 1, "float32", True, "Clip"),  # ReLU6 after a residual
    (2, 24, 9, 9, 24, 3, 1, 1, 1, "float32", True, "Clip", 24),  # depthwise, C past a block
    (1, 32, 10, 7, 32, 3, 2, 1, 1, "float16", False, "Relu", 32),  # depthwise stride 2
    (1, 16, 9, 9, 16, 5, 1, 4, 2, "float64", False, "", 16),  # depthwise dilated 5x5
]


def _poison(p: np.ndarray, fmt: str, shape: tuple[int, ...]) -> np.ndarray:
    """``p`` with NaN in every padded element."""
    q = p.copy()
    q[F.to_format(np.ones(shape, p.dtype), fmt) == 0] = np.nan
    return q


def _instance(case: tuple, seed: int) -> tuple[list[np.ndarray], dict, np.ndarray]:
    n, c, h, w, m, k, s, p, d, dtype, residual, act = case[:12]
    group = case[12] if len(case) > 12 else 1
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, c, h, w)).astype(dtype)
    wt = (rng.standard_normal((m, c // group, k, k)) / np.sqrt(c * k * k // group)).astype(dtype)
    b = rng.standard_normal(m).astype(dtype)
    attrs = {"strides": [s, s], "pads": [p] * 4, "dilations": [d, d], "activation": act,
             "group": group}
    if act == "Clip":
        attrs.update(clip_min=0.0, clip_max=6.0)
    ins = [x, wt, b]
    if residual:
        (y,) = evaluate("FusedConv", [x, wt], {**attrs, "activation": ""}, domain="ge")
        ins.append(rng.standard_normal(y.shape).astype(dtype))
    (want,) = evaluate("FusedConv", ins, attrs, domain="ge")  # plain operands
    return ins, attrs, want


def _blocked(ins: list[np.ndarray]) -> tuple[list[np.ndarray], list[TensorType]]:
    """The operands as the compiled graph holds them (padding lanes poisoned)."""
    fmts = ["NC1HWC0", "FRACTAL_Z", "ND", "NC1HWC0"]
    held, types = [], []
    for a, fmt in zip(ins, fmts, strict=False):
        if fmt == "ND":
            held.append(a)
        else:
            held.append(_poison(F.to_format(a, fmt), fmt, a.shape))
        types.append(TensorType(a.dtype.name, a.shape, fmt))
    held[1].setflags(write=False)  # a weight, as the runtime maps it
    return held, types


def _tolerance(dtype: str) -> dict[str, float]:
    return {"float16": {"rtol": 2e-3, "atol": 2e-3}, "float64": {"rtol": 1e-12, "atol": 1e-12}
            }.get(dtype, {"rtol": 1e-5, "atol": 1e-5})


def _name(case: tuple) -> str:
    return "x".join(map(str, case[:9])) + case[9] + ("-depthwise" if len(case) > 12 else "")


@pytest.mark.parametrize("case", CASES, ids=_name)
def test_blocked_conv_equals_the_plain_one_through_transdata(case: tuple) -> None:
    ins, attrs, want = _instance(case, seed=len(CASES) + case[1])
    held, types = _blocked(ins)
    schema = default_registry().get("FusedConv", "ge", 1)
    assert schema is not None and schema.kernel_out is not None
    call = schema.call(attrs, 1, types=types)
    direct = fused_conv_blocked(held, call, ())
    assert direct is not None, "a group-1 NC1HWC0 / FRACTAL_Z conv runs on its blocks"
    assert conv_blocked._plan(held[0], call) is not None
    (got,) = evaluate("FusedConv", held, attrs, domain="ge", types=types)
    assert np.array_equal(got, direct[0])  # the registry's kernel takes this path
    out = TensorType(want.dtype.name, want.shape, "NC1HWC0")
    assert got.shape == out.physical_shape and got.dtype == want.dtype
    np.testing.assert_allclose(F.from_format(got, "NC1HWC0", want.shape), want,
                               **_tolerance(case[9]))
    lanes = F.to_format(np.ones(want.shape, want.dtype), "NC1HWC0") == 0
    assert not got[lanes].any(), "padding lanes come out zero"
    for _ in range(2):  # into a poisoned arena view, over what the last call left in scratch
        arena = np.full(got.shape, np.nan, got.dtype)
        schema.kernel_out(held, call, [arena])
        assert np.array_equal(arena, got)


def _onnx_conv(case: tuple, ins: list[np.ndarray], attrs: dict) -> onnx.ModelProto:
    dtype = helper.np_dtype_to_tensor_dtype(ins[0].dtype)
    names = ["X", "W", "B", "Z"][:len(ins)]
    nodes = [helper.make_node("Conv", ["X", "W", "B"], ["C"], strides=attrs["strides"],
                              pads=attrs["pads"], dilations=attrs["dilations"],
                              group=attrs["group"])]
    last = "C"
    if len(ins) > 3:
        nodes.append(helper.make_node("Add", ["C", "Z"], ["S"]))
        last = "S"
    if attrs["activation"] == "Clip":
        bounds = [helper.make_tensor(n, dtype, [], [v]) for n, v in (("lo", 0.0), ("hi", 6.0))]
        nodes.append(helper.make_node("Clip", [last, "lo", "hi"], ["Y"]))
    elif attrs["activation"]:
        nodes.append(helper.make_node(attrs["activation"], [last], ["Y"]))
    else:
        nodes.append(helper.make_node("Identity", [last], ["Y"]))
    graph = helper.make_graph(
        nodes, "conv", [helper.make_tensor_value_info(n, dtype, a.shape)
                        for n, a in zip(names, ins, strict=True)],
        [helper.make_tensor_value_info("Y", dtype, None)],
        initializer=bounds if attrs["activation"] == "Clip" else [])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("case", [c for c in CASES if c[9] != "float64"][::2], ids=_name)
def test_blocked_conv_agrees_with_onnxruntime(case: tuple) -> None:
    pytest.importorskip("onnxruntime", reason="onnxruntime (the 'dev' extra) is the oracle")
    from gerules.testing.oracle import run_onnxruntime

    ins, attrs, _ = _instance(case, seed=7)
    held, types = _blocked(ins)
    (got,) = evaluate("FusedConv", held, attrs, domain="ge", types=types)
    feeds = dict(zip(["X", "W", "B", "Z"], ins, strict=False))
    (theirs,) = run_onnxruntime(_onnx_conv(case, ins, attrs), feeds)
    tol = {"rtol": 5e-3, "atol": 5e-3} if case[9] == "float16" else {"rtol": 1e-4, "atol": 1e-4}
    np.testing.assert_allclose(F.from_format(got, "NC1HWC0", theirs.shape), theirs, **tol)


def test_declines_what_it_does_not_compute_on_blocks() -> None:
    """Grouped convs other than depthwise go through the conversions."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 16, 6, 6)).astype(np.float32)
    w = rng.standard_normal((16, 8, 3, 3)).astype(np.float32)
    schema = default_registry().get("FusedConv", "ge", 1)
    assert schema is not None
    attrs = {"group": 2, "pads": [1, 1, 1, 1]}
    held, types = _blocked([x, w])
    assert fused_conv_blocked(held, schema.call(attrs, 1, types=types), ()) is None
    (want,) = evaluate("FusedConv", [x, w], attrs, domain="ge")
    (got,) = evaluate("FusedConv", held, attrs, domain="ge", types=types)
    np.testing.assert_allclose(F.from_format(got, "NC1HWC0", want.shape), want, rtol=1e-5,
                               atol=1e-5)


def test_a_weight_form_is_derived_once_and_leaves_with_its_weight() -> None:
    weight = np.arange(12.0).reshape(3, 4)
    weight.setflags(write=False)
    made = []
    values = weight.copy()

    def make() -> np.ndarray:
        made.append(1)
        return values.T * 2

    first = layout.kept(weight, "test form", make)
    assert layout.kept(weight, "test form", make) is first and len(made) == 1
    assert not first.flags.writeable
    assert layout.kept(weight, "another form", make) is not first and len(made) == 2
    key = ((id(weight),), "test form")
    assert key in layout._KEPT
    del weight, first
    gc.collect()
    assert key not in layout._KEPT
    scratchpad = np.ones(3)  # writeable: an activation, never kept
    layout.kept(scratchpad, "test form", lambda: scratchpad + 1)
    assert ((id(scratchpad),), "test form") not in layout._KEPT


def test_scratch_slots_are_separate_buffers() -> None:
    a = scratch((64, 64), np.float32, slot=0)
    b = scratch((64, 64), np.float32, slot=1)
    assert not np.shares_memory(a, b)
    assert a.ctypes.data % 64 == 0 and b.ctypes.data % 64 == 0


def test_the_blocked_conv_runs_on_numpys_blas_alone() -> None:
    """No second BLAS on the conv path: SciPy's OpenBLAS next to NumPy's makes two thread
    pools that fight when both run threaded (a shifted-GEMM conv through SciPy's ``?gemm``
    doubled ResNet-50's run at the default thread count)."""
    code = """
import sys
import numpy as np
from gerules.ir import formats as F
from gerules.ir.graph import TensorType
from gerules.ir.registry import default_registry
x = np.ones((1, 64, 56, 56), np.float32)  # a wide map: the shifted GEMMs took these
w = np.ones((64, 64, 3, 3), np.float32)
types = [TensorType("float32", x.shape, "NC1HWC0"), TensorType("float32", w.shape, "FRACTAL_Z")]
schema = default_registry().get("FusedConv", "ge", 1)
attrs = {"pads": [1, 1, 1, 1]}
(y,) = schema.kernel([F.to_format(x, "NC1HWC0"), F.to_format(w, "FRACTAL_Z")],
                     schema.call(attrs, 1, types=types))
assert y.shape == (1, 4, 56, 56, 16), y.shape
print("scipy" in sys.modules)
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "False"


@pytest.mark.parametrize("case", CASES, ids=_name)
def test_compiled_loops_give_the_numpy_passes_bit_for_bit(
        case: tuple, jit_loops: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The move, residual and ReLU as one compiled pass (``_jit.rows_to_blocks``, the 'jit'
    extra), and a depthwise conv's taps and bias (``_jit.depthwise_rows``), from a step's
    second call: the same values as the NumPy passes of the first."""
    pytest.importorskip("numba", reason="the loop is compiled by Numba (the 'jit' extra)")
    monkeypatch.setattr(conv_blocked, "ROW_LOOP", 0)
    ins, attrs, _ = _instance(case, seed=11 + case[1])
    held, types = _blocked(ins)
    schema = default_registry().get("FusedConv", "ge", 1)
    assert schema is not None
    call = schema.call(attrs, 1, types=types)
    got = []
    for _ in range(2):  # NumPy passes, then the loop where it applies
        out = np.full(conv_blocked._plan(held[0], call).shape, np.nan, held[0].dtype)
        assert fused_conv_blocked(held, call, [out]) is not None
        got.append(out)
    assert np.array_equal(got[0], got[1], equal_nan=True)
    if len(case) > 12:
        assert jit_loops == ([] if case[9] == "float16" else ["depthwise_rows"])
    else:
        loops = case[9] != "float16" and attrs["activation"] in ("", "Relu", "Clip")
        assert jit_loops == (["rows_to_blocks"] if loops else [])
