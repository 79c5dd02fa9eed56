"""Formats (``ir.formats``), TransData and the format rules of the op registry (``ir.layout``).

Where an element lands is checked against GE's own index formulas (graphengine's
``format_transfers``: the FRACTAL_Z -> NCHW loop, the ND -> FRACTAL_NZ copy, FZ_C04's
pad-transpose steps), written out here element by element, independently of the
reshape/transpose implementation under test.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gerules.errors import ShapeError
from gerules.ir import formats as F
from gerules.ir.graph import Graph, Node, TensorType, Value
from gerules.ir.ops.api import evaluate, infer_types
from gerules.ir.registry import default_registry
from gerules.ir.verify import verify
from gerules.runtime.executor import run_graph


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


@pytest.mark.parametrize(("shape", "dtype", "fmt", "physical"), [
    ((1, 3, 224, 224), "float16", "NC1HWC0", (1, 1, 224, 224, 16)),
    ((1, 3, 224, 224), "float32", "NC1HWC0", (1, 1, 224, 224, 16)),  # C0 16 for 4 bytes too
    ((2, 40, 7, 7), "int8", "NC1HWC0", (2, 2, 7, 7, 32)),  # one-byte types: C0 32
    ((1, 3, 224, 224), "float16", "NC1HWC0_C04", (1, 1, 224, 224, 4)),
    ((64, 3, 7, 7), "float16", "FRACTAL_Z", (49, 4, 16, 16)),
    ((100, 20, 3, 3), "float32", "FRACTAL_Z", (2 * 9, 7, 16, 16)),
    ((64, 3, 7, 7), "float16", "FRACTAL_Z_C04", (13, 4, 16, 16)),  # ceil(4*49/16) = 13
    ((2, 128, 768), "float16", "FRACTAL_NZ", (2, 48, 8, 16, 16)),
    ((1, 2048), "float32", "FRACTAL_NZ", (128, 1, 16, 16)),
    ((2, 3, 5, 7), "float32", "NHWC", (2, 5, 7, 3)),
    (("N", 3, 5, 7), "float32", "NC1HWC0", ("N", 1, 5, 7, 16)),  # N is not blocked
])
def test_physical_shapes_follow_ge(shape: tuple, dtype: str, fmt: str, physical: tuple) -> None:
    assert F.physical_shape(shape, dtype, fmt) == physical
    t = TensorType(dtype, shape, fmt)
    assert t.physical_shape == physical
    if all(isinstance(d, int) for d in shape):
        assert t.nbytes() == int(np.prod(physical)) * np.dtype(dtype).itemsize
        assert t.numel() == int(np.prod(shape))  # elements stay logical


def test_formats_that_do_not_fit_are_refused() -> None:
    for fmt, shape in [("NC1HWC0", (2, 3, 4)), ("FRACTAL_Z", (4, "c", 3, 3)),
                       ("NC1HWC0_C04", (1, 5, 8, 8)), ("FRACTAL_NZ", (7,)),
                       ("FRACTAL_NZ", ("m", 16))]:
        assert F.can_hold(fmt, shape) is not None
        with pytest.raises(ShapeError):
            F.physical_shape(shape, "float32", fmt)
    assert F.stored("NCHW", 4) == "ND" and F.name("ND", 4) == "NCHW" and F.name("ND", 2) == "ND"
    with pytest.raises(ShapeError, match="4-D"):
        F.stored("NCHW", 3)
    with pytest.raises(ShapeError, match="unknown format"):
        F.stored("NC1HWC", 4)


def _ge_nc1hwc0(x: np.ndarray) -> np.ndarray:
    n, c, h, w = x.shape
    k = F.c0(x.dtype.name)
    out = np.zeros(n * _ceil(c, k) * h * w * k, x.dtype)
    for ni, ci, hi, wi in itertools.product(range(n), range(c), range(h), range(w)):
        out[(((ni * _ceil(c, k) + ci // k) * h + hi) * w + wi) * k + ci % k] = x[ni, ci, hi, wi]
    return out


def _ge_fractal_z(x: np.ndarray) -> np.ndarray:
    """graphengine's FracZ index: c1 * hwncc0 + h * wncc0 + w * ncc0 + n * c0 + c0_idx."""
    n, c, h, w = x.shape
    k = F.c0(x.dtype.name)
    ncc0 = _ceil(n, 16) * 16 * k
    out = np.zeros(_ceil(c, k) * h * w * ncc0, x.dtype)
    for ni, ci, hi, wi in itertools.product(range(n), range(c), range(h), range(w)):
        out[(ci // k) * h * w * ncc0 + hi * w * ncc0 + wi * ncc0 + ni * k + ci % k] = (
            x[ni, ci, hi, wi])
    return out


def _ge_fractal_nz(x: np.ndarray) -> np.ndarray:
    """graphengine's ND -> NZ copy: times * w1h1h0w0 + w1 * h1h0w0 + h * w0 + w0_idx."""
    *lead, m, kk = x.shape
    k = F.c0(x.dtype.name)
    h1h0w0 = _ceil(m, 16) * 16 * k
    w1h1h0w0 = _ceil(kk, k) * h1h0w0
    flat = x.reshape(-1, m, kk)
    out = np.zeros(flat.shape[0] * w1h1h0w0, x.dtype)
    for t, mi, ki in itertools.product(range(flat.shape[0]), range(m), range(kk)):
        out[t * w1h1h0w0 + (ki // k) * h1h0w0 + mi * k + ki % k] = flat[t, mi, ki]
    return out


def _ge_fractal_z_c04(x: np.ndarray) -> np.ndarray:
    """FZ_C04: N padded to C0s, C to 4; (h, w, c) with c fastest is the K axis, padded to
    C0s; [N, K] viewed as [N1, C0, K1, C0] and moved to [K1, N1, C0, C0]."""
    n, c, h, w = x.shape
    k = F.c0(x.dtype.name)
    n1, z1 = _ceil(n, k), _ceil(4 * h * w, k)
    out = np.zeros(z1 * n1 * k * k, x.dtype)
    for ni, ci, hi, wi in itertools.product(range(n), range(c), range(h), range(w)):
        z = (hi * w + wi) * 4 + ci
        out[((z // k * n1 + ni // k) * k + ni % k) * k + z % k] = x[ni, ci, hi, wi]
    return out


GE_INDEX = {"NC1HWC0": _ge_nc1hwc0, "FRACTAL_Z": _ge_fractal_z,
            "FRACTAL_NZ": _ge_fractal_nz, "FRACTAL_Z_C04": _ge_fractal_z_c04}


@pytest.mark.parametrize("fmt", sorted(GE_INDEX))
@pytest.mark.parametrize("dtype", ["float16", "float32", "int8"])
def test_elements_land_where_ge_puts_them(fmt: str, dtype: str) -> None:
    rng = np.random.default_rng(7)
    shape = (3, 21, 5) if fmt == "FRACTAL_NZ" else (18, 3 if "C04" in fmt else 37, 2, 3)
    x = (rng.standard_normal(shape) * 50).astype(dtype)
    p = F.to_format(x, fmt)
    assert p.shape == F.physical_shape(shape, dtype, fmt)
    assert np.array_equal(p.reshape(-1), GE_INDEX[fmt](x))  # padding included: zeros


@settings(max_examples=25)
@given(fmt=st.sampled_from(F.FORMATS[1:]), dtype=st.sampled_from(["float16", "float32",
                                                                   "int8", "int64"]),
       seed=st.integers(0, 2**16))
def test_every_transfer_gives_the_values_back(fmt: str, dtype: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    if fmt == "FRACTAL_NZ":
        shape = tuple(int(d) for d in rng.integers(1, 35, size=int(rng.integers(2, 5))))
    else:
        c = int(rng.integers(1, 5 if "C04" in fmt else 40))
        shape = (int(rng.integers(1, 20)), c, int(rng.integers(1, 6)), int(rng.integers(1, 6)))
    x = (rng.standard_normal(shape) * 100).astype(dtype)
    p = F.to_format(x, fmt)
    assert p.shape == F.physical_shape(shape, dtype, fmt)
    assert p.sum(dtype=np.float64) == x.sum(dtype=np.float64)  # the padding is zeros
    assert np.array_equal(F.from_format(p, fmt, shape), x)
    into = np.full(p.shape, 7, dtype)  # written into an arena view holding old values
    assert F.to_format(x, fmt, out=into) is into and np.array_equal(into, p)
    # and through every other format, as the TransData op does it
    for other in F.FORMATS:
        if F.can_hold(other, shape) is None:
            q = F.transfer(p, fmt, other, shape)
            assert np.array_equal(F.transfer(q, other, "ND", shape), x)


@pytest.mark.parametrize("shape", [(2, 37, 3, 5), (1, 32, 2, 2), (3, 40, 33), (128, 48)])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_transdata_into_the_arena_equals_its_kernel(shape: tuple, dtype: str) -> None:
    """``kernel_out`` writes over an arena view holding NaN exactly what ``kernel`` returns,
    for every transfer the shape allows (both directions), padding lanes as zeros."""
    schema = default_registry().get("TransData", "ge", 1)
    assert schema is not None and schema.kernel_out is not None
    x = np.random.default_rng(len(shape)).standard_normal(shape).astype(dtype)
    plain = F.name(F.ND, len(shape))
    for fmt in F.FORMATS[1:]:
        if F.can_hold(fmt, shape) is not None:
            continue
        held = F.to_format(x, fmt)
        for src, dst, arg in ((plain, F.name(fmt, len(shape)), x),
                              (F.name(fmt, len(shape)), plain, held)):
            types = (TensorType(dtype, shape, F.stored(src, len(shape))),)
            call = schema.call({"src_format": src, "dst_format": dst}, 1, types=types)
            (want,) = schema.kernel([arg], call)
            arena = np.full(want.shape, np.nan, dtype)
            schema.kernel_out([arg], call, [arena])
            assert np.array_equal(arena, want), (fmt, src, dst)
    buf = np.full(shape, np.nan, dtype) if len(shape) >= 2 else None
    if buf is not None:
        assert F.nz_plain_into(F.to_format(x, F.FRACTAL_NZ), shape, buf) is buf
        assert np.array_equal(buf, x)


def test_padding_never_reaches_a_value() -> None:
    """NaN in every padded element: converting back drops it."""
    x = np.arange(2 * 19 * 3 * 3, dtype=np.float32).reshape(2, 19, 3, 3)
    for fmt in ("NC1HWC0", "FRACTAL_Z"):
        p = F.to_format(x, fmt)
        mask = F.to_format(np.ones_like(x), fmt) == 0
        assert mask.sum() == p.size - x.size
        p[mask] = np.nan
        assert np.array_equal(F.from_format(p, fmt, x.shape), x)


def test_transdata_inference_and_refusals() -> None:
    t = TensorType("float16", (1, 20, 8, 8))
    (y,) = infer_types("TransData", [t], attrs={"src_format": "NCHW",
                                                "dst_format": "NC1HWC0"}, domain="ge")
    assert y == TensorType("float16", (1, 20, 8, 8), "NC1HWC0")
    assert str(y) == "float16[1,20,8,8]@NC1HWC0"
    (back,) = infer_types("TransData", [y], attrs={"src_format": "NC1HWC0",
                                                   "dst_format": "NCHW"}, domain="ge")
    assert back == t and back.format_name == "NCHW"
    bad = [({"src_format": "ND", "dst_format": "NC1HWC0"}, "src_format ND but the input is"),
           ({"src_format": "NCHW", "dst_format": "ND"}, "spelled NCHW"),
           ({"src_format": "NCHW", "dst_format": "NCHW"}, "one layout"),
           ({"src_format": "NCHW", "dst_format": "NC1HWC0_C04"}, "at most 4 channels"),
           ({"src_format": "NCHW", "dst_format": "FRACTAL_NZ5"}, "unknown format")]
    for attrs, message in bad:
        with pytest.raises(ShapeError, match=message):
            infer_types("TransData", [t], attrs=attrs, domain="ge")
    p = np.zeros((1, 2, 8, 8, 16), np.float16)
    with pytest.raises(Exception, match="logical shape is unknown"):
        evaluate("TransData", [p], {"src_format": "NC1HWC0", "dst_format": "NCHW"},
                 domain="ge")


def _5hd(shape: tuple[int, ...], dtype: str = "float32") -> TensorType:
    return TensorType(dtype, shape, "NC1HWC0")


def test_elementwise_ops_keep_one_format_and_never_broadcast_into_padding() -> None:
    x = _5hd((2, 20, 4, 4))
    (y,) = infer_types("Relu", [x])
    assert y == x
    # per-channel [N, C, 1, 1] (squeeze-excitation) and a single number broadcast fine
    assert infer_types("Mul", [x, _5hd((2, 20, 1, 1))])[0] == x
    assert infer_types("Add", [x, TensorType("float32", (1,))])[0] == x
    # broadcasting along C or a plain non-scalar operand would read padding: refused
    for other in (_5hd((2, 1, 4, 4)), TensorType("float32", (20, 1, 1)),
                  TensorType("float32", (2, 20, 4, 4), "FRACTAL_Z")):
        with pytest.raises(ShapeError):
            infer_types("Add", [x, other])
    with pytest.raises(ShapeError, match="takes plain"):
        infer_types("Reshape", [x, TensorType("int64", (2,))], [None, np.array([2, -1])])
    nz = TensorType("float32", (3, 8, 32), "FRACTAL_NZ")
    assert infer_types("Add", [nz, TensorType("float32", (1, 8, 32), "FRACTAL_NZ")])[0] == nz
    with pytest.raises(ShapeError, match="blocks"):
        infer_types("Add", [nz, TensorType("float32", (3, 1, 32), "FRACTAL_NZ")])


def _held(x: np.ndarray, fmt: str) -> tuple[np.ndarray, TensorType]:
    return F.to_format(x, fmt), TensorType(x.dtype.name, x.shape, fmt)


def _poison(p: np.ndarray, fmt: str, shape: tuple[int, ...]) -> np.ndarray:
    """``p`` with NaN in every padded element."""
    mask = F.to_format(np.ones(shape, p.dtype), fmt) == 0
    q = p.copy()
    q[mask] = np.nan
    return q


@pytest.mark.parametrize("group", [1, 3])
def test_native_conv_on_its_formats_equals_the_plain_one(group: int) -> None:
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 6, 9, 9)).astype(np.float32)
    w = rng.standard_normal((18, 6 // group, 3, 3)).astype(np.float32)
    b = rng.standard_normal(18).astype(np.float32)
    z = rng.standard_normal((2, 18, 9, 9)).astype(np.float32)
    attrs = {"group": group, "pads": [1, 1, 1, 1], "activation": "Relu"}
    (want,) = evaluate("FusedConv", [x, w, b, z], attrs, domain="ge")
    (px, tx), (pw, tw), (pz, tz) = _held(x, "NC1HWC0"), _held(w, "FRACTAL_Z"), _held(
        z, "NC1HWC0")
    types = [tx, tw, TensorType("float32", (18,)), tz]
    (out,) = infer_types("FusedConv", types, attrs=attrs, domain="ge")
    assert out == TensorType("float32", (2, 18, 9, 9), "NC1HWC0")
    args = [_poison(px, "NC1HWC0", x.shape), _poison(pw, "FRACTAL_Z", w.shape), b,
            _poison(pz, "NC1HWC0", z.shape)]
    (got,) = evaluate("FusedConv", args, attrs, domain="ge", types=types)
    assert got.shape == out.physical_shape
    np.testing.assert_allclose(F.from_format(got, "NC1HWC0", want.shape), want, rtol=1e-5,
                               atol=1e-5)
    # as the runtime calls it: into a poisoned arena view, through reused buffers (twice,
    # the second time over what the first left in them)
    schema = default_registry().get("FusedConv", "ge", 1)
    assert schema is not None and schema.kernel_out is not None
    for _ in range(2):
        arena = np.full(out.physical_shape, np.nan, np.float32)
        schema.kernel_out(args, schema.call(attrs, 1, types=types), [arena])
        assert np.array_equal(arena, got)  # padding written as zeros, values as evaluate's


def test_small_channel_conv_gives_the_usual_5hd() -> None:
    rng = np.random.default_rng(4)
    x = rng.standard_normal((1, 3, 12, 12)).astype(np.float32)
    w = rng.standard_normal((8, 3, 7, 7)).astype(np.float32)
    attrs = {"strides": [2, 2], "pads": [3, 3, 3, 3]}
    (want,) = evaluate("FusedConv", [x, w], attrs, domain="ge")
    (px, tx), (pw, tw) = _held(x, "NC1HWC0_C04"), _held(w, "FRACTAL_Z_C04")
    (out,) = infer_types("FusedConv", [tx, tw], attrs=attrs, domain="ge")
    assert out.format == "NC1HWC0"
    (got,) = evaluate("FusedConv", [px, pw], attrs, domain="ge", types=[tx, tw])
    np.testing.assert_allclose(F.from_format(got, "NC1HWC0", want.shape), want, rtol=1e-5,
                               atol=1e-5)


def test_matmul_pooling_reduction_and_layer_norm_in_their_formats() -> None:
    rng = np.random.default_rng(5)
    a = rng.standard_normal((2, 20, 40)).astype(np.float32)
    w = rng.standard_normal((40, 24)).astype(np.float32)
    bias = rng.standard_normal(24).astype(np.float32)
    (want,) = evaluate("FusedMatMul", [a, w, bias], {"activation": "Relu"}, domain="ge")
    (pa, ta), (pw, tw) = _held(a, "FRACTAL_NZ"), _held(w, "FRACTAL_NZ")
    types = [ta, tw, TensorType("float32", (24,))]
    (got,) = evaluate("FusedMatMul", [_poison(pa, "FRACTAL_NZ", a.shape), pw, bias],
                      {"activation": "Relu"}, domain="ge", types=types)
    np.testing.assert_allclose(F.from_format(got, "FRACTAL_NZ", want.shape), want, rtol=1e-5)

    x = rng.standard_normal((2, 20, 9, 9)).astype(np.float32)
    px, tx = _held(x, "NC1HWC0")
    for op, attrs in [("MaxPool", {"kernel_shape": [3, 3], "strides": [2, 2]}),
                      ("GlobalAveragePool", {}), ("ReduceMean", {"axes": [1]}),
                      ("ReduceMax", {"axes": [2, 3]})]:
        (want,) = evaluate(op, [x], attrs, opset=13)
        (t,) = infer_types(op, [tx], attrs=attrs, opset=13)
        assert t.format == "NC1HWC0" and t.shape == want.shape
        (got,) = evaluate(op, [_poison(px, "NC1HWC0", x.shape)], attrs, opset=13, types=[tx])
        np.testing.assert_allclose(F.from_format(got, "NC1HWC0", want.shape), want, rtol=1e-5)
    with pytest.raises(ShapeError, match="keepdims"):
        infer_types("ReduceMean", [tx], attrs={"axes": [1], "keepdims": 0}, opset=13)

    g, b = rng.standard_normal(40).astype(np.float32), rng.standard_normal(40).astype(np.float32)
    (want,) = evaluate("LayerNormalization", [a, g, b], opset=17)
    (got,) = evaluate("LayerNormalization", [_poison(pa, "FRACTAL_NZ", a.shape), g, b],
                      opset=17, types=[ta, TensorType("float32", (40,)), TensorType(
                          "float32", (40,))])
    np.testing.assert_allclose(F.from_format(got, "FRACTAL_NZ", a.shape), want, rtol=1e-5,
                               atol=1e-6)


def test_a_graph_with_transfers_and_a_fractal_weight_verifies_and_runs() -> None:
    """Formats flow through graph inference (a FRACTAL_Z initializer typed by value_info)
    and the reference executor, which passes each kernel its operands' types."""
    rng = np.random.default_rng(6)
    x = rng.standard_normal((1, 5, 8, 8)).astype(np.float32)
    w = rng.standard_normal((7, 5, 3, 3)).astype(np.float32)
    wz = F.to_format(w, "FRACTAL_Z")
    nodes = (Node("TransData", ("x",), ("x5",), {"src_format": "NCHW", "dst_format": "NC1HWC0"},
                  domain="ge"),
             Node("FusedConv", ("x5", "wz"), ("y5",), {"pads": [1, 1, 1, 1]}, domain="ge"),
             Node("Sigmoid", ("y5",), ("s5",)),
             Node("TransData", ("s5",), ("y",), {"src_format": "NC1HWC0", "dst_format": "NCHW"},
                  domain="ge"))
    graph = Graph(nodes, (Value.of("x", "float32", x.shape),),
                  (Value.of("y", "float32", None),), {"wz": wz},
                  {"wz": Value("wz", TensorType("float32", w.shape, "FRACTAL_Z"))},
                  opset={"": 17, "ge": 1})
    checked = verify(graph)
    assert checked.type_of("s5") == TensorType("float32", (1, 7, 8, 8), "NC1HWC0")
    assert checked.type_of("wz") == TensorType("float32", (7, 5, 3, 3), "FRACTAL_Z")
    (want,) = evaluate("FusedConv", [x, w], {"pads": [1, 1, 1, 1]}, domain="ge")
    got = run_graph(checked, {"x": x})["y"]
    np.testing.assert_allclose(got, 1 / (1 + np.exp(-want)), rtol=1e-5)
