"""Window and interpolation kernels against onnxruntime on random configurations.

Conv, ConvTranspose, MaxPool (with Indices), AveragePool and Resize have the most geometry to
get wrong; hypothesis draws shapes, strides, dilations, pads, groups and modes, onnxruntime
computes the same single-node model, and our kernel (with inference checked) must agree.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from gerules.ir.ops.api import evaluate

ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")
from onnx import helper  # noqa: E402


def run_ort(op: str, inputs: list[np.ndarray | None], attrs: dict[str, Any],
            n_out: int = 1, opset: int = 19) -> list[np.ndarray]:
    names = [f"i{k}" if x is not None else "" for k, x in enumerate(inputs)]
    present = [(n, x) for n, x in zip(names, inputs, strict=True) if x is not None]
    outs = [f"o{k}" for k in range(n_out)]
    node = helper.make_node(op, names, outs, **attrs)
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(x.dtype), x.shape)
         for n, x in present],
        [helper.make_tensor_value_info(o, code, None) for o, code in zip(outs, [
            helper.np_dtype_to_tensor_dtype(present[0][1].dtype), onnx.TensorProto.INT64],
            strict=False)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 9
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.log_severity_level = 4
    sess = ort.InferenceSession(model.SerializeToString(), so,
                                providers=["CPUExecutionProvider"])
    return sess.run(None, {n: x for n, x in present})


def ours(op: str, inputs: list[np.ndarray | None], attrs: dict[str, Any],
         n_out: int = 1) -> list[np.ndarray]:
    return evaluate(op, inputs, attrs, opset=19, num_outputs=n_out, check=True)


def same(op: str, inputs: list[np.ndarray | None], attrs: dict[str, Any], n_out: int = 1,
         rtol: float = 1e-4, atol: float = 1e-5) -> None:
    want = run_ort(op, inputs, attrs, n_out)
    got = ours(op, inputs, attrs, n_out)
    for w, g in zip(want, got, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, g.shape, w.dtype, w.shape)
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


def rand(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


@st.composite
def windows(draw: Any, rank: int, max_pad: int = 2, auto: bool = True) -> dict[str, Any]:
    """Kernel geometry for ``rank`` spatial dims (input sizes under key ``"sizes"``)."""
    k = [draw(st.integers(1, 3)) for _ in range(rank)]
    d = [draw(st.integers(1, 2)) for _ in range(rank)]
    s = [draw(st.integers(1, 3)) for _ in range(rank)]
    sizes = [draw(st.integers((ki - 1) * di + 1, 9)) for ki, di in zip(k, d, strict=True)]
    geo: dict[str, Any] = {"kernel_shape": k, "dilations": d, "strides": s, "sizes": sizes}
    mode = draw(st.sampled_from(["NOTSET", "NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"])
                if auto else st.just("NOTSET"))
    if mode == "NOTSET":
        geo["pads"] = [draw(st.integers(0, min(max_pad, ki - 1))) for ki in k * 2]
    else:
        geo["auto_pad"] = mode
        geo["dilations"] = [1] * rank  # onnxruntime refuses dilations with SAME_*
    return geo


# ----------------------------------------------------------------------------- Conv


@given(st.integers(1, 3), windows(2), st.integers(1, 3), st.integers(1, 3), st.integers(1, 2),
       st.booleans(), st.integers(0, 2**16))
def test_conv2d_matches_onnxruntime(group: int, geo: dict[str, Any], cg: int, mg: int, n: int,
                                    bias: bool, seed: int) -> None:
    rng = np.random.default_rng(seed)
    sizes = geo.pop("sizes")
    x = rand(rng, n, cg * group, *sizes)
    w = rand(rng, mg * group, cg, *geo["kernel_shape"])
    b = rand(rng, mg * group) if bias else None
    same("Conv", [x, w, b], {**geo, "group": group})


@given(windows(1), windows(3, auto=False), st.integers(0, 2**16))
def test_conv_1d_and_3d_match_onnxruntime(g1: dict[str, Any], g3: dict[str, Any],
                                          seed: int) -> None:
    rng = np.random.default_rng(seed)
    for geo in (g1, g3):
        sizes = geo.pop("sizes")
        x, w = rand(rng, 1, 2, *sizes), rand(rng, 3, 2, *geo["kernel_shape"])
        same("Conv", [x, w], geo)


@pytest.mark.parametrize("mult", [1, 2])
def test_depthwise_conv_with_multiplier(mult: int) -> None:
    rng = np.random.default_rng(1)
    x, w = rand(rng, 2, 6, 11, 11), rand(rng, 6 * mult, 1, 3, 3)
    same("Conv", [x, w, rand(rng, 6 * mult)],
         {"group": 6, "strides": [2, 2], "pads": [1, 1, 1, 1]})


def test_conv_float16_and_pointwise() -> None:
    rng = np.random.default_rng(2)
    x, w = rand(rng, 1, 8, 5, 5), rand(rng, 4, 8, 1, 1)
    same("Conv", [x, w], {})
    same("Conv", [x.astype(np.float16), w.astype(np.float16)], {}, rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("spatial, attrs", [
    ((7,), {"pads": [2, 1], "strides": [2]}),
    ((5, 6), {"pads": [1, 0, 2, 3], "dilations": [2, 1]}),
    ((4, 5, 3), {"pads": [1, 1, 1, 0, 2, 1]}),
    ((10, 10), {"strides": [2, 2], "ceil_mode": 1}),  # ceil_mode: one extra at the end
])
def test_padding_into_scratch_equals_np_pad(spatial: tuple[int, ...],
                                            attrs: dict[str, Any]) -> None:
    """``pad_for`` into a scratch slot fills only the border, yet equals a fresh ``np.pad``
    even when the slot held other values (NaN) and a larger array before."""
    from gerules.ir.ops._common import scratch
    from gerules.ir.ops._window import pad_for, window

    rng = np.random.default_rng(3)
    x = rand(rng, 2, 3, *spatial)
    win = window(spatial, (3,) * len(spatial), attrs, ceil_mode=bool(attrs.get("ceil_mode")))
    for value in (0, -np.inf):
        scratch((4096,), np.float32, slot=5)[...] = np.nan  # a dirty slot, larger before
        got = pad_for(x, win, value, slot=5)
        want = pad_for(x, win, value)
        assert got.shape == want.shape and got is not x
        np.testing.assert_array_equal(got, want)


def test_geometry_is_worked_out_once_per_owner_and_key() -> None:
    """``PerOwner``: one value per (owner, key), recomputed for a new key or an equal but
    distinct owner, and the store stays within its size."""
    from gerules.ir.ops._common import PerOwner

    made: list[int] = []
    store: PerOwner[int] = PerOwner(size=3)

    def make(v: int) -> int:
        made.append(v)
        return v

    a, b = {"k": 1}, {"k": 1}
    assert store.get(a, (2,), lambda: make(1)) == 1
    assert store.get(a, (2,), lambda: make(9)) == 1 and made == [1]
    assert store.get(a, (3,), lambda: make(2)) == 2  # another input shape
    assert store.get(b, (3,), lambda: make(3)) == 3  # equal, not the same mapping
    owners = [{} for _ in range(5)]
    for k, o in enumerate(owners):
        store.get(o, (), lambda k=k: make(k))
    assert len(store._held) <= 3


@given(windows(2, max_pad=1, auto=False), st.integers(1, 2), st.integers(1, 2),
       st.integers(0, 1), st.booleans(), st.integers(0, 2**16))
def test_conv_transpose_matches_onnxruntime(geo: dict[str, Any], group: int, mg: int,
                                            extra: int, use_shape: bool, seed: int) -> None:
    rng = np.random.default_rng(seed)
    sizes = [min(s, 5) for s in geo.pop("sizes")]
    s = geo["strides"]
    geo["output_padding"] = [min(extra, si - 1, di - 1) if si > 1 else 0
                             for si, di in zip(s, geo["dilations"], strict=True)]
    x = rand(rng, 1, 2 * group, *sizes)
    w = rand(rng, 2 * group, mg, *geo["kernel_shape"])
    if use_shape:
        full = [si * (n - 1) + op + (k - 1) * d + 1 for si, n, op, k, d in zip(
            s, sizes, geo["output_padding"], geo["kernel_shape"], geo["dilations"], strict=True)]
        geo.pop("pads")
        geo["output_shape"] = [f - 1 if f > 2 else f for f in full]
    same("ConvTranspose", [x, w, rand(rng, mg * group)], {**geo, "group": group})


# ----------------------------------------------------------------------------- pooling


@given(windows(2, auto=False), st.booleans(), st.integers(0, 2**16))
def test_maxpool_with_indices_matches_onnxruntime(geo: dict[str, Any], ceil: bool,
                                                  seed: int) -> None:
    rng = np.random.default_rng(seed)
    sizes = geo.pop("sizes")
    x = rand(rng, 2, 3, *sizes)
    attrs = {**geo, "ceil_mode": int(ceil)}
    try:
        want = run_ort("MaxPool", [x], attrs, n_out=2)
    except Exception:  # noqa: BLE001 - configurations onnxruntime itself refuses
        assume(False)
        return
    got = ours("MaxPool", [x], attrs, n_out=2)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])


def test_maxpool_storage_order_and_auto_pad() -> None:
    rng = np.random.default_rng(3)
    x = rand(rng, 1, 2, 5, 7)
    for attrs in ({"kernel_shape": [2, 3], "storage_order": 1},
                  {"kernel_shape": [3, 3], "auto_pad": "SAME_UPPER", "strides": [2, 2]},
                  {"kernel_shape": [3, 3], "auto_pad": "SAME_LOWER", "strides": [2, 2]}):
        same("MaxPool", [x], attrs, n_out=2, rtol=0, atol=0)


@given(windows(2, auto=False), st.booleans(), st.booleans(), st.integers(0, 2**16))
def test_averagepool_matches_onnxruntime(geo: dict[str, Any], ceil: bool, include: bool,
                                         seed: int) -> None:
    rng = np.random.default_rng(seed)
    sizes = geo.pop("sizes")
    geo.pop("dilations")  # onnxruntime's AveragePool ignores dilations before opset 19 paths
    x = rand(rng, 1, 2, *sizes)
    attrs = {**geo, "ceil_mode": int(ceil), "count_include_pad": int(include)}
    try:
        want = run_ort("AveragePool", [x], attrs)
    except Exception:  # noqa: BLE001
        assume(False)
        return
    got = ours("AveragePool", [x], attrs)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-6)


def test_global_pools() -> None:
    rng = np.random.default_rng(4)
    x = rand(rng, 2, 3, 4, 5)
    same("GlobalAveragePool", [x], {})
    same("GlobalMaxPool", [x], {})


# ----------------------------------------------------------------------------- Resize


COORDS = ["half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
          "half_pixel_symmetric"]


@given(st.sampled_from(["nearest", "linear", "cubic"]), st.sampled_from(COORDS),
       st.sampled_from([0.5, 0.75, 1.5, 2.0, 3.0]), st.sampled_from([0.6, 1.0, 2.5]),
       st.booleans(), st.integers(0, 2**16))
def test_resize_scales_match_onnxruntime(mode: str, coord: str, sh: float, sw: float,
                                         exclude: bool, seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = rand(rng, 1, 2, 5, 6)
    scales = np.array([1, 1, sh, sw], np.float32)
    attrs = {"mode": mode, "coordinate_transformation_mode": coord,
             "exclude_outside": int(exclude and mode == "cubic")}
    if coord == "align_corners":
        # onnx (reference and node-test data) divides by the fractional in * scale - 1,
        # onnxruntime by the integer output length - 1; they agree when sizes are given.
        sizes = np.floor(np.array(x.shape) * scales).astype(np.int64)
        same("Resize", [x, None, None, sizes], attrs)
        return
    same("Resize", [x, None, scales], attrs)


def test_resize_align_corners_follows_onnx_not_onnxruntime() -> None:
    """onnx's test_resize_downsample_scales_linear_align_corners: 3.142857, not ORT's 4."""
    x = np.arange(1, 9, dtype=np.float32).reshape(1, 1, 2, 4)
    (y,) = ours("Resize", [x, None, np.array([1, 1, 0.6, 0.6], np.float32)],
                {"mode": "linear", "coordinate_transformation_mode": "align_corners"})
    np.testing.assert_allclose(y, [[[[1.0, 3.142857]]]], rtol=1e-6)


@given(st.sampled_from(["linear", "cubic"]), st.integers(2, 9), st.integers(2, 9),
       st.integers(0, 2**16))
def test_resize_sizes_antialias_matches_onnxruntime(mode: str, h: int, w: int,
                                                    seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = rand(rng, 1, 1, 7, 8)
    sizes = np.array([1, 1, h, w], np.int64)
    same("Resize", [x, None, None, sizes], {"mode": mode, "antialias": 1})


def test_resize_tf_crop_and_resize_extrapolates() -> None:
    rng = np.random.default_rng(5)
    x = rand(rng, 1, 1, 4, 4)
    roi = np.array([0, 0, -0.2, 0.1, 1, 1, 0.9, 1.3], np.float32)
    sizes = np.array([1, 1, 3, 5], np.int64)
    for mode in ("nearest", "linear"):
        same("Resize", [x, roi, None, sizes],
             {"mode": mode, "coordinate_transformation_mode": "tf_crop_and_resize",
              "extrapolation_value": -7.0})


def test_resize_uint8_rounds_and_saturates() -> None:
    x = np.array([[[[0, 255], [255, 0]]]], np.uint8)
    same("Resize", [x, None, np.array([1, 1, 2, 2], np.float32)], {"mode": "linear"},
         rtol=0, atol=1)
