"""Shape and dtype inference edge cases: symbolic dims, bad operands, consts-driven shapes.

Where a kernel exists for the case, ``evaluate(..., check=True)`` also runs it and asserts
that inference and kernel agree.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gerules.errors import ShapeError
from gerules.ir.graph import Graph, Node, TensorType, Value
from gerules.ir.infer import infer_graph
from gerules.ir.ops.api import evaluate, infer_types

F32 = "float32"


def T(*dims: int | str, dtype: str = F32) -> TensorType:  # noqa: N802 - reads like a type
    return TensorType(dtype, tuple(dims))


def i64(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.int64)


def rand(*shape: int) -> np.ndarray:
    return np.random.default_rng(0).standard_normal(shape).astype(np.float32)


# ----------------------------------------------------------------------------- broadcasting


def test_binary_broadcasts_symbolic_batch() -> None:
    (out,) = infer_types("Add", [T("N", 1, 4), T(3, 1)])
    assert out == T("N", 3, 4)


def test_binary_broadcast_mismatch_names_both_shapes() -> None:
    with pytest.raises(ShapeError, match=r"\[4\] and \[5\] do not broadcast"):
        infer_types("Add", [T(4), T(5)])


def test_binary_refuses_mixed_dtypes() -> None:
    with pytest.raises(ShapeError, match="different dtypes"):
        infer_types("Mul", [T(2), T(2, dtype="float16")])


def test_comparison_gives_bool() -> None:
    (out,) = infer_types("Less", [T("B", 3), T(3)])
    assert out == T("B", 3, dtype="bool")


@given(st.lists(st.integers(1, 3), min_size=0, max_size=3),
       st.lists(st.integers(1, 3), min_size=0, max_size=3))
def test_binary_infer_matches_numpy_broadcast(a: list[int], b: list[int]) -> None:
    try:
        want = np.broadcast_shapes(tuple(a), tuple(b))
    except ValueError:
        with pytest.raises(ShapeError):
            infer_types("Add", [T(*a), T(*b)])
        return
    (out,) = evaluate("Add", [np.ones(a, np.float32), np.ones(b, np.float32)], check=True)
    assert out.shape == want


def test_integer_div_truncates_toward_zero() -> None:
    (out,) = evaluate("Div", [np.array([7, -7, 7, -7], np.int32), np.array([2, 2, -2, -2],
                                                                            np.int32)])
    assert out.tolist() == [3, -3, -3, 3] and out.dtype == np.int32


def test_pow_keeps_base_dtype_with_other_exponent_dtype() -> None:
    (out,) = evaluate("Pow", [np.array([2.0, 3.0], np.float32), np.array([2, 3], np.int64)],
                      check=True)
    assert out.dtype == np.float32 and out.tolist() == [4.0, 27.0]


# ----------------------------------------------------------------------------- MatMul, Conv


def test_matmul_inner_dims_error() -> None:
    with pytest.raises(ShapeError, match="MatMul: inner dims 4 and 5 differ"):
        infer_types("MatMul", [T(2, 4), T(5, 3)])


def test_matmul_batch_broadcast_and_vector_promotion() -> None:
    assert infer_types("MatMul", [T("B", 1, 3, 4), T(7, 4, 5)]) == [T("B", 7, 3, 5)]
    assert infer_types("MatMul", [T(4), T("B", 4, 5)]) == [T("B", 5)]
    assert infer_types("MatMul", [T(3, 4), T(4)]) == [T(3)]


def test_conv_symbolic_batch_static_spatial() -> None:
    attrs = {"strides": (2, 2), "pads": (3, 3, 3, 3)}
    assert infer_types("Conv", [T("N", 3, 224, 224), T(64, 3, 7, 7)], attrs=attrs) == [
        T("N", 64, 112, 112)]


def test_conv_symbolic_spatial_is_unknown() -> None:
    (out,) = infer_types("Conv", [T(1, 3, "H", 8), T(4, 3, 3, 3)])
    assert out == T(1, 4, "?", 6)


def test_conv_channel_mismatch() -> None:
    with pytest.raises(ShapeError, match="input has 4 channels but weight expects 3"):
        infer_types("Conv", [T(1, 4, 8, 8), T(2, 3, 3, 3)])


def test_conv_same_upper_auto_pad() -> None:
    x, w = rand(1, 2, 7, 9), rand(3, 2, 3, 3)
    (y,) = evaluate("Conv", [x, w], {"auto_pad": "SAME_UPPER", "strides": (2, 2)}, check=True)
    assert y.shape == (1, 3, 4, 5)


def test_pool_ceil_mode_last_window_starts_inside() -> None:
    x = rand(1, 1, 5, 5)
    attrs = {"kernel_shape": (2, 2), "strides": (2, 2), "ceil_mode": 1}
    (y,) = evaluate("MaxPool", [x], attrs, check=True)
    assert y.shape == (1, 1, 3, 3)
    assert y[0, 0, 2, 2] == x[0, 0, 4, 4]


# ----------------------------------------------------------------------------- Reshape


@pytest.mark.parametrize(("shape", "target", "want"), [
    ((2, 3, 4), (0, -1), (2, 12)),
    (("N", 12, 64), (0, -1), ("N", 768)),
    (("N", 12, 64), (-1, 64), ("?", 64)),
    (("N", "S", 768), (0, 0, 12, 64), ("N", "S", 12, 64)),
    (("N", "S", 768), (0, -1, 12, 64), ("N", "S", 12, 64)),
    ((2, 0, 3), (0, -1), (2, 0)),
])
def test_reshape_zero_and_minus_one(shape: tuple, target: tuple, want: tuple) -> None:
    (out,) = infer_types("Reshape", [T(*shape), T(len(target), dtype="int64")],
                         [None, i64(*target)])
    assert out.shape == want


def test_reshape_allowzero_keeps_zero() -> None:
    (y,) = evaluate("Reshape", [np.zeros((0, 3), np.float32), i64(3, 0)], {"allowzero": 1},
                    check=True)
    assert y.shape == (3, 0)


def test_reshape_bad_count() -> None:
    with pytest.raises(ShapeError, match="cannot reshape"):
        infer_types("Reshape", [T(2, 3), T(2, dtype="int64")], [None, i64(4, 2)])


def test_reshape_without_constant_shape_keeps_rank() -> None:
    (out,) = infer_types("Reshape", [T(2, 3), T(3, dtype="int64")])
    assert out.shape == ("?", "?", "?")


# ----------------------------------------------------------------------------- Slice


@pytest.mark.parametrize(("starts", "ends", "steps"), [
    ((-1,), (-1000,), (-1,)),          # whole axis backwards
    ((10,), (-10,), (-2,)),            # start clamps to dim - 1
    ((-100,), (100,), (3,)),           # both clamp
    ((5,), (2,), (1,)),                # empty
    ((2,), (5,), (-1,)),               # empty backwards
    ((0,), (2**63 - 1,), (1,)),        # INT64_MAX end
])
def test_slice_clamping_matches_python(starts: tuple, ends: tuple, steps: tuple) -> None:
    x = np.arange(7, dtype=np.float32)
    (y,) = evaluate("Slice", [x, i64(*starts), i64(*ends), i64(0), i64(*steps)], check=True)
    end = ends[0] if ends[0] >= -7 else None
    assert y.tolist() == x[slice(starts[0], end, steps[0])].tolist()


@given(st.integers(-9, 9), st.integers(-9, 9), st.sampled_from([-3, -2, -1, 1, 2, 3]))
def test_slice_infer_and_kernel_agree(start: int, end: int, step: int) -> None:
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    evaluate("Slice", [x, i64(start), i64(end), i64(-1), i64(step)], check=True)


def test_slice_whole_symbolic_dim_keeps_symbol() -> None:
    (out,) = infer_types("Slice", [T("N", 8), *[T(1, dtype="int64")] * 3],
                         [None, i64(0), i64(2**63 - 1), i64(0)])
    assert out.shape == ("N", 8)


def test_slice_zero_step_is_an_error() -> None:
    with pytest.raises(ShapeError, match="steps must not be 0"):
        evaluate("Slice", [np.zeros(3, np.float32), i64(0), i64(3), i64(0), i64(0)])


def test_slice_v1_attributes() -> None:
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    (y,) = evaluate("Slice", [x], {"starts": (1,), "ends": (100,), "axes": (1,)}, opset=9,
                    check=True)
    assert y.tolist() == x[:, 1:].tolist()


# ----------------------------------------------------------------------------- Split


def test_split_equal_parts_v2_attribute() -> None:
    outs = evaluate("Split", [np.arange(6.0)], {"split": (2, 4)}, opset=11, num_outputs=2,
                    check=True)
    assert [o.tolist() for o in outs] == [[0, 1], [2, 3, 4, 5]]


def test_split_input_sizes_v13() -> None:
    outs = evaluate("Split", [np.arange(6.0), i64(1, 2, 3)], opset=13, num_outputs=3,
                    check=True)
    assert [len(o) for o in outs] == [1, 2, 3]


def test_split_num_outputs_uneven_v18() -> None:
    outs = evaluate("Split", [np.arange(7.0)], {"num_outputs": 3}, opset=18, num_outputs=3,
                    check=True)
    assert [len(o) for o in outs] == [3, 3, 1]


def test_split_unequal_without_sizes_fails() -> None:
    with pytest.raises(ShapeError, match="does not split into 3 equal parts"):
        infer_types("Split", [T(7)], opset=13, num_outputs=3)


def test_split_sizes_must_add_up() -> None:
    with pytest.raises(ShapeError, match="do not add up"):
        infer_types("Split", [T(7), T(2, dtype="int64")], [None, i64(3, 3)], num_outputs=2)


def test_split_unknown_sizes_give_unknown_dims() -> None:
    outs = infer_types("Split", [T(4, 7), T(2, dtype="int64")], num_outputs=2,
                       attrs={"axis": 1})
    assert [o.shape for o in outs] == [(4, "?"), (4, "?")]


# ----------------------------------------------------------------------------- Squeeze & co


def test_squeeze_axes_by_version() -> None:
    x = np.zeros((1, 3, 1), np.float32)
    assert evaluate("Squeeze", [x], {"axes": (0,)}, opset=11, check=True)[0].shape == (3, 1)
    assert evaluate("Squeeze", [x, i64(-1)], opset=13, check=True)[0].shape == (1, 3)
    assert evaluate("Squeeze", [x], opset=13, check=True)[0].shape == (3,)


def test_squeeze_non_one_dim_fails() -> None:
    with pytest.raises(ShapeError, match="not 1"):
        infer_types("Squeeze", [T(2, 3), T(1, dtype="int64")], [None, i64(0)])


def test_unsqueeze_negative_axes_v13() -> None:
    (y,) = evaluate("Unsqueeze", [np.zeros((3, 4), np.float32), i64(0, -1)], check=True)
    assert y.shape == (1, 3, 4, 1)


def test_shape_folds_static_slice_of_symbolic_input() -> None:
    from gerules.ir.registry import default_registry

    sch = default_registry().get("Shape")
    call = sch.call({"start": 1})
    assert sch.fold_types is not None
    folded = sch.fold_types([T("N", 3, 224)], call)
    assert folded is not None and folded[0].tolist() == [3, 224]
    assert sch.fold_types([T("N", 3)], sch.call({})) is None


def test_shape_and_gather_fold_to_static_reshape() -> None:
    """Shape -> Gather -> Unsqueeze -> Concat -> Reshape gives a static result in a graph."""
    g = Graph(
        nodes=(
            Node("Shape", ("x",), ("s",)),
            Node("Gather", ("s", "one"), ("c",), {"axis": 0}),
            Node("Unsqueeze", ("c", "zero"), ("c1",)),
            Node("Concat", ("neg", "c1"), ("target",), {"axis": 0}),
            Node("Reshape", ("x", "target"), ("y",)),
        ),
        inputs=(Value.of("x", F32, (2, 6, 4)),),
        outputs=(Value.of("y", F32, None),),
        initializers={"one": np.array(1, np.int64), "zero": i64(0), "neg": i64(-1)},
        opset={"": 17},
    )
    out = infer_graph(g)
    assert out.value_info["y"].shape == (8, 6)


def test_expand_and_tile_from_constants() -> None:
    (y,) = evaluate("Expand", [np.ones((3, 1), np.float32), i64(2, 1, 4)], check=True)
    assert y.shape == (2, 3, 4)
    (y,) = evaluate("Tile", [np.ones((2, 3), np.float32), i64(2, 1)], check=True)
    assert y.shape == (4, 3)
    (out,) = infer_types("Expand", [T(3, 1), T(2, dtype="int64")])
    assert out.shape == (3, "?")  # an unknown target dim against 3 can only be 1 or 3
    (out,) = infer_types("Expand", [T("N", 1), T(3, dtype="int64")])
    assert out.shape == ("?", "?", "?")  # N against an unknown dim: unknown


def test_range_and_constant_of_shape_need_constants() -> None:
    (y,) = evaluate("Range", [np.array(1.0, np.float32), np.array(2.0, np.float32),
                              np.array(0.25, np.float32)], check=True)
    assert y.tolist() == [1.0, 1.25, 1.5, 1.75]
    (out,) = infer_types("Range", [T(dtype="int64")] * 3)
    assert out.shape == ("?",)
    (y,) = evaluate("ConstantOfShape", [i64(2, 3)], {"value": np.array([7], np.int32)},
                    check=True)
    assert y.dtype == np.int32 and y.shape == (2, 3) and (y == 7).all()


def test_topk_k_from_constant() -> None:
    x = np.array([[1, 3, 3, 2]], np.float32)
    vals, idx = evaluate("TopK", [x, i64(2)], num_outputs=2, check=True)
    assert vals.tolist() == [[3, 3]] and idx.tolist() == [[1, 2]]
    (vals_t, idx_t) = infer_types("TopK", [T("B", 4), T(1, dtype="int64")], num_outputs=2)
    assert vals_t.shape == ("B", "?") and idx_t.dtype == "int64"


def test_concat_dim_mismatch() -> None:
    with pytest.raises(ShapeError, match="dim 0 differs"):
        infer_types("Concat", [T(2, 3), T(4, 3)], attrs={"axis": 1})


def test_reduce_axes_attribute_versus_input() -> None:
    x = rand(2, 3, 4)
    (a,) = evaluate("ReduceMean", [x], {"axes": (1,), "keepdims": 0}, opset=17, check=True)
    (b,) = evaluate("ReduceMean", [x, i64(1)], {"keepdims": 0}, opset=18, check=True)
    np.testing.assert_allclose(a, b)
    (same,) = evaluate("ReduceSum", [x, i64()], {"noop_with_empty_axes": 1}, opset=13,
                       check=True)
    assert same.shape == x.shape
    (out,) = infer_types("ReduceMax", [T(2, 3), T(1, dtype="int64")], opset=18)
    assert out.shape == ("?", "?")


def test_batchnorm_training_mode() -> None:
    """Opset 14+: batch statistics and running updates; opset 9-13 extra outputs refused."""
    x = rand(4, 2, 3)
    one, zero = np.ones(2, np.float32), np.zeros(2, np.float32)
    y, run_mean, run_var = evaluate("BatchNormalization", [x, one, zero, zero, one],
                                    {"training_mode": 1, "momentum": 0.5}, opset=15,
                                    num_outputs=3, check=True)
    mean, var = x.mean(axis=(0, 2)), x.var(axis=(0, 2))
    np.testing.assert_allclose(y, (x - mean[:, None]) / np.sqrt(var[:, None] + 1e-5),
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(run_mean, 0.5 * mean, rtol=1e-6)
    np.testing.assert_allclose(run_var, 0.5 + 0.5 * var, rtol=1e-6)
    types = [T(1, 2, 3), T(2), T(2), T(2), T(2)]
    with pytest.raises(ShapeError, match="training mode not supported"):
        infer_types("BatchNormalization", types, opset=9, num_outputs=3)


def test_batchnorm_opset7_spatial_form() -> None:
    x, c = rand(2, 3, 4), np.ones(3, np.float32)
    (y,) = evaluate("BatchNormalization", [x, c, c * 0, c * 0, c], {"spatial": 1}, opset=7,
                    check=True)
    np.testing.assert_allclose(y, x / np.sqrt(1 + 1e-5), rtol=1e-6)
    with pytest.raises(ShapeError, match="spatial=0"):
        evaluate("BatchNormalization", [x, c, c, c, c], {"spatial": 0}, opset=7)


def test_softmax_versions_differ() -> None:
    x = rand(2, 3, 4)
    (old,) = evaluate("Softmax", [x], opset=11)  # coerced to [2, 12], axis 1
    (new,) = evaluate("Softmax", [x], opset=13)  # per last axis
    np.testing.assert_allclose(old.reshape(2, 12).sum(axis=1), 1, rtol=1e-6)
    np.testing.assert_allclose(new.sum(axis=-1), 1, rtol=1e-6)
    assert not np.allclose(old, new)


def test_clip_attribute_and_input_forms() -> None:
    x = np.array([-2, 0.5, 9], np.float32)
    (a,) = evaluate("Clip", [x], {"min": -1.0, "max": 1.0}, opset=6)
    (b,) = evaluate("Clip", [x, np.float32(-1), np.float32(1)], opset=13)
    assert a.tolist() == b.tolist() == [-1, 0.5, 1]
    (c,) = evaluate("Clip", [x, None, np.float32(0)], opset=13)
    assert c.tolist() == [-2, 0, 0]


def test_layernorm_statistics_outputs() -> None:
    x = rand(2, 3, 4)
    y, mean, inv = evaluate("LayerNormalization", [x, np.ones(4, np.float32)], {"axis": -1},
                            num_outputs=3, check=True)
    assert mean.shape == inv.shape == (2, 3, 1)
    np.testing.assert_allclose(mean[..., 0], x.mean(axis=-1), rtol=1e-5)


def test_dropout_inference_mask_is_ones() -> None:
    x = rand(3)
    y, mask = evaluate("Dropout", [x, np.array(0.5, np.float32)], num_outputs=2, check=True)
    assert (y == x).all() and mask.dtype == np.bool_ and mask.all()
    with pytest.raises(ShapeError, match="training mode not supported"):
        evaluate("Dropout", [x, np.array(0.5, np.float32), np.array(True)])


# ----------------------------------------------------------------------------- Resize


def test_resize_scales_nearest_asymmetric() -> None:
    x = np.arange(4, dtype=np.float32).reshape(1, 1, 2, 2)
    (y,) = evaluate("Resize", [x, None, np.array([1, 1, 2, 2], np.float32)],
                    {"coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"},
                    check=True)
    assert y[0, 0].tolist() == [[0, 0, 1, 1], [0, 0, 1, 1], [2, 2, 3, 3], [2, 2, 3, 3]]


@pytest.mark.parametrize("mode", ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"])
def test_resize_nearest_modes_pick_documented_neighbour(mode: str) -> None:
    x = np.arange(4, dtype=np.float32).reshape(1, 1, 1, 4)
    (y,) = evaluate("Resize", [x, None, None, i64(1, 1, 1, 8)],
                    {"nearest_mode": mode, "coordinate_transformation_mode": "asymmetric"})
    src = np.arange(8) / 2.0
    pick = {"round_prefer_floor": np.ceil(src - 0.5), "round_prefer_ceil": np.floor(src + 0.5),
            "floor": np.floor(src), "ceil": np.ceil(src)}[mode]
    assert y[0, 0, 0].tolist() == np.clip(pick, 0, 3).tolist()


def test_resize_linear_align_corners_hits_corners() -> None:
    x = np.array([[[[0.0, 3.0]]]], np.float32)
    (y,) = evaluate("Resize", [x, None, None, i64(1, 1, 1, 4)],
                    {"mode": "linear", "coordinate_transformation_mode": "align_corners"},
                    check=True)
    np.testing.assert_allclose(y[0, 0, 0], [0, 1, 2, 3], atol=1e-6)


def test_resize_sizes_keep_aspect_ratio() -> None:
    x = np.zeros((1, 1, 4, 8), np.float32)
    (y,) = evaluate("Resize", [x, None, None, i64(2, 2)],
                    {"axes": (2, 3), "keep_aspect_ratio_policy": "not_larger"}, check=True)
    assert y.shape == (1, 1, 1, 2)


def test_resize_symbolic_and_unknown_scales() -> None:
    (out,) = infer_types("Resize", [T("N", 3, 8, 8), None, T(4), None],
                         [None, None, np.array([1, 1, 2, 2], np.float32), None])
    assert out.shape == ("N", 3, 16, 16)
    (out,) = infer_types("Resize", [T("N", 3, "H", 8), None, None, T(2)],
                         [None, None, None, i64(4, 4)], attrs={"axes": (2, 3)})
    assert out.shape == ("N", 3, 4, 4)
    (out,) = infer_types("Resize", [T(1, 3, 8, 8), None, T(4), None])
    assert out.shape == ("?",) * 4


def test_resize_opset10_scales_only() -> None:
    x = np.arange(2, dtype=np.float32).reshape(1, 1, 1, 2)
    (y,) = evaluate("Resize", [x, np.array([1, 1, 1, 2], np.float32)], opset=10, check=True)
    assert y[0, 0, 0].tolist() == [0, 0, 1, 1]


def test_unknown_attribute_suggests_name() -> None:
    from gerules.errors import ModelError

    with pytest.raises(ModelError, match="did you mean axis"):
        infer_types("Softmax", [T(2)], attrs={"axsi": 0})
