"""The row paths of LayerNormalization (``_layer_norm_rows``) and of Softmax / attention
(``exp_rows``) against float64 references and against the general NumPy formulas they
replace for contiguous float rows (reached here through strided copies of the same data)."""

from __future__ import annotations

import numpy as np
import pytest

from gerules.ir.ops.api import evaluate
from gerules.ir.ops.norm import layer_norm
from gerules.ir.ops.softmax import exp_rows

SEEDS = [0, 1, 2]


def strided(x: np.ndarray) -> np.ndarray:
    """The same values in a view that is not C-contiguous (the general path)."""
    wide = np.zeros((*x.shape[:-1], x.shape[-1] * 2), x.dtype)
    wide[..., ::2] = x
    view = wide[..., ::2]
    assert not view.flags.c_contiguous
    return view


def ln_reference(x: np.ndarray, scale: np.ndarray, bias: np.ndarray, axis: int, eps: float
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    x64 = x.astype(np.float64)
    axes = tuple(range(axis % x.ndim, x.ndim))
    mean = x64.mean(axis=axes, keepdims=True)
    inv = 1 / np.sqrt(((x64 - mean) ** 2).mean(axis=axes, keepdims=True) + eps)
    return (x64 - mean) * inv * scale + bias, mean, inv


# ----------------------------------------------------------------------------- LayerNorm


@pytest.mark.parametrize("shape, axis", [((1, 128, 768), -1), ((3, 5), -1), ((7, 1), -1),
                                         ((1, 33), -1), ((2, 3, 4), 1), ((2, 3, 5), 0),
                                         ((4, 2, 3, 5), 2)])
@pytest.mark.parametrize("seed", SEEDS)
def test_layer_norm_rows_match_the_general_path_and_float64(shape: tuple[int, ...], axis: int,
                                                            seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(np.float32)
    norm_shape = shape[axis % len(shape):]
    scale = rng.standard_normal(norm_shape).astype(np.float32)
    bias = rng.standard_normal(norm_shape).astype(np.float32)
    y, mean, inv = layer_norm(x, scale, bias, axis, 1e-5)
    gy, gmean, ginv = layer_norm(strided(x), scale, bias, axis, 1e-5)
    assert mean.shape == gmean.shape and inv.shape == ginv.shape  # keepdims statistics
    assert mean.dtype == inv.dtype == y.dtype == np.float32
    np.testing.assert_allclose(mean, gmean, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(inv, ginv, rtol=1e-6)
    np.testing.assert_allclose(y, gy, rtol=1e-5, atol=1e-5)
    ry, rmean, rinv = ln_reference(x, scale, bias, axis, 1e-5)
    np.testing.assert_allclose(y, ry, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(inv, rinv, rtol=1e-6)


@pytest.mark.parametrize("seed", SEEDS)
def test_layer_norm_rows_keep_their_accuracy_on_a_large_row_mean(seed: int) -> None:
    """Rows 1000 + N(0, 1): a one-pass E[x^2] - E[x]^2 would lose the variance here; the row
    path's mean is the pairwise sum's (as np.mean), its errors no larger than the general
    path's."""
    rng = np.random.default_rng(seed)
    x = (1000 + rng.standard_normal((64, 768))).astype(np.float32)
    scale, bias = np.ones(768, np.float32), np.zeros(768, np.float32)
    y, mean, inv = layer_norm(x, scale, bias, -1, 1e-5)
    gy, gmean, ginv = layer_norm(strided(x), scale, bias, -1, 1e-5)
    ry, rmean, rinv = ln_reference(x, scale, bias, -1, 1e-5)
    np.testing.assert_array_equal(mean, np.mean(x, axis=-1, keepdims=True))
    assert np.abs(mean - rmean).max() <= np.abs(gmean - rmean).max()
    assert np.abs(inv / rinv - 1).max() < 4e-7
    assert np.abs(y - ry).max() <= 1.5 * np.abs(gy - ry).max() + 1e-6
    assert np.abs(y - ry).max() < 1e-3  # the mean's float32 rounding (ulp(1000) = 6e-5)


def test_layer_norm_rows_in_place_into_an_output_and_float16() -> None:
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 9, 16)).astype(np.float32)
    scale, bias = rng.standard_normal(16).astype(np.float32), None
    want, wmean, winv = layer_norm(x.copy(), scale, bias, -1, 1e-3)
    out = np.empty_like(x)
    got = layer_norm(x, scale, bias, -1, 1e-3, out=out)
    assert got[0] is out
    np.testing.assert_array_equal(out, want)
    same = x.copy()
    y, mean, inv = layer_norm(same, scale, bias, -1, 1e-3, out=same)
    assert y is same
    np.testing.assert_array_equal(same, want)
    np.testing.assert_array_equal(mean, wmean)
    np.testing.assert_array_equal(inv, winv)
    half = x.astype(np.float16)
    y16, mean16, inv16 = layer_norm(half, scale.astype(np.float16), None, -1, 1e-3)
    assert y16.dtype == np.float16 and mean16.dtype == inv16.dtype == np.float32
    ry, _, _ = ln_reference(half, scale.astype(np.float16), np.zeros(16), -1, 1e-3)
    np.testing.assert_allclose(y16, ry, rtol=2e-3, atol=2e-3)
    # float16 statistics (stash_type=0) keep the general path
    y0, mean0, _ = layer_norm(half, scale.astype(np.float16), None, -1, 1e-3, stash=0)
    assert y0.dtype == mean0.dtype == np.float16


def test_layer_normalization_outputs_mean_and_inv_std_dev_through_the_row_path() -> None:
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 5, 12)).astype(np.float32)
    scale, bias = rng.standard_normal(12).astype(np.float32), rng.standard_normal(12)
    y, mean, inv = evaluate("LayerNormalization", [x, scale, bias.astype(np.float32)],
                            {"epsilon": 1e-5}, opset=17, num_outputs=3, check=True)
    ry, rmean, rinv = ln_reference(x, scale, bias, -1, 1e-5)
    assert mean.shape == inv.shape == (2, 5, 1)
    np.testing.assert_allclose(y, ry, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(mean, rmean, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(inv, rinv, rtol=1e-6)


# ----------------------------------------------------------------------------- Softmax rows


def softmax64(x: np.ndarray) -> np.ndarray:
    z = np.exp(x.astype(np.float64) - x.max(axis=-1, keepdims=True))
    return z / z.sum(axis=-1, keepdims=True)


@pytest.mark.parametrize("shape", [(1536, 128), (97, 16), (64, 3), (5, 1), (1, 4096)])
@pytest.mark.parametrize("seed", SEEDS)
def test_exp_rows_give_the_softmax_of_every_row(shape: tuple[int, int], seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * 4).astype(np.float32)
    x[::5] -= 40  # rows far below their group's maximum are redone with their own
    e = np.empty_like(x)
    sums = exp_rows(x, e)
    got = e / sums[:, None]
    want = softmax64(x)
    np.testing.assert_allclose(got, want, rtol=3e-6, atol=1e-30)
    assert np.all(e <= 1)  # no shift below a row's maximum
    assert np.all(sums[::5] >= 1 - 1e-6)  # the sunk rows were redone with their own maximum


def test_exp_rows_keep_the_per_row_formula_for_infinities_and_nans() -> None:
    x = np.zeros((32, 8), np.float32)
    x[3] = -np.inf
    x[5, 2] = np.nan
    x[7, 1] = np.inf
    x[9, :4] = -np.inf
    e = np.empty_like(x)
    with np.errstate(all="ignore"):
        got = e / exp_rows(x, e)[:, None]
        m = np.max(x, axis=-1, keepdims=True)
        z = np.exp(x - m)
        want = z / z.sum(axis=-1, keepdims=True)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("opset, axis, shape", [(13, -1, (2, 12, 32, 32)), (13, 1, (2, 3, 7)),
                                                (11, 1, (2, 3, 7)), (13, -1, (3, 1))])
def test_softmax_rows_match_float64_in_place_and_not(opset: int, axis: int,
                                                     shape: tuple[int, ...]) -> None:
    from gerules.ir.registry import default_registry

    rng = np.random.default_rng(5)
    x = (rng.standard_normal(shape) * 5).astype(np.float32)
    schema = default_registry().get("Softmax", "", opset)
    call = schema.call({"axis": axis}, 1)
    a = axis % len(shape)
    rows = x.reshape(int(np.prod(shape[:a])), -1) if opset < 13 else np.moveaxis(x, a, -1)
    want = softmax64(rows)
    want = want.reshape(shape) if opset < 13 else np.moveaxis(want, -1, a)
    out = np.empty_like(x)
    assert schema.kernel_out is not None
    schema.kernel_out([x], call, [out])
    np.testing.assert_allclose(out, want, rtol=3e-6, atol=1e-7)
    same = x.copy()
    schema.kernel_out([same], call, [same])
    np.testing.assert_array_equal(same, out)


def test_multi_head_attention_with_rows_far_below_the_others() -> None:
    """A mask that sinks whole query rows by 60 leaves those rows' softmax unchanged."""
    rng = np.random.default_rng(6)
    q, k, v = (rng.standard_normal((2, 16, 24)).astype(np.float32) for _ in range(3))
    mask = np.zeros((2, 1, 16, 16), np.float32)
    mask[:, :, ::3] = -60
    (got,) = evaluate("MultiHeadAttention", [q, k, v, mask], {"num_heads": 3}, domain="ge",
                      check=True)
    (unmasked,) = evaluate("MultiHeadAttention", [q, k, v, None], {"num_heads": 3},
                           domain="ge", check=True)
    np.testing.assert_allclose(got, unmasked, rtol=1e-5, atol=1e-6)
    heads = [x.reshape(2, 16, 3, 8).transpose(0, 2, 1, 3).astype(np.float64) for x in (q, k, v)]
    p = softmax64(heads[0] @ heads[1].transpose(0, 1, 3, 2) / np.sqrt(8))
    want = (p @ heads[2]).transpose(0, 2, 1, 3).reshape(2, 16, 24)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
