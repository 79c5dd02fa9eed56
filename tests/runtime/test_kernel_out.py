"""``kernel_out`` (compute into the arena's views) gives exactly what ``kernel`` returns."""

from __future__ import annotations

import numpy as np
import pytest

from gerules.errors import KernelError
from gerules.ir.registry import default_registry

RNG = np.random.default_rng(7)


def _r(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


CASES = [
    ("Conv", "", [_r(1, 4, 9, 9), _r(6, 4, 3, 3), _r(6)], {"pads": (1, 1, 1, 1)}),
    ("Conv", "", [_r(2, 4, 8, 8), _r(4, 2, 3, 3), None], {"group": 2, "strides": (2, 2)}),
    ("FusedConv", "ge", [_r(1, 8, 20, 20), _r(8, 1, 3, 3), _r(8), _r(1, 8, 20, 20)],
     {"group": 8, "pads": (1, 1, 1, 1), "activation": "Relu"}),  # depthwise + residual
    ("FusedConv", "ge", [_r(1, 16, 7, 7), _r(32, 16, 1, 1), _r(32)],
     {"activation": "Sigmoid"}),  # pointwise: a plain matmul
    ("FusedConv", "ge", [_r(1, 3, 15, 15), _r(5, 3, 7, 7), None],
     {"strides": (2, 2), "pads": (3, 3, 3, 3), "activation": "Relu"}),
    ("FusedMatMul", "ge", [_r(1, 12, 16), _r(16, 24), _r(24)], {"activation": "Gelu"}),
    ("FusedMatMul", "ge", [_r(2, 3, 5, 8), _r(2, 3, 6, 8), None], {"transB": 1}),
    ("FusedMatMul", "ge", [_r(4, 8).astype(np.float16), _r(8, 3).astype(np.float16),
                           _r(3).astype(np.float16)], {"activation": "Relu"}),
    ("MultiHeadAttention", "ge", [_r(2, 5, 12), _r(2, 5, 12), _r(2, 5, 12), _r(2, 1, 1, 5)],
     {"num_heads": 3}),
    ("MultiHeadAttention", "ge", [_r(1, 4, 24), None, None], {"num_heads": 2, "scale": 0.3}),
    ("AddLayerNorm", "ge", [_r(2, 3, 8), _r(2, 3, 8), _r(8), _r(8)], {"epsilon": 1e-3}),
]


@pytest.mark.parametrize(("op", "domain", "inputs", "attrs"), CASES,
                         ids=[f"{c[0]}-{k}" for k, c in enumerate(CASES)])
def test_kernel_out_writes_what_kernel_returns(op: str, domain: str, inputs: list,
                                               attrs: dict) -> None:
    schema = default_registry().get(op, domain, 17 if not domain else 1)
    assert schema.kernel_out is not None
    call = schema.call(attrs)
    want = schema.kernel(inputs, call)[0]
    out = np.full_like(want, np.nan)  # nothing may depend on what the buffer held
    schema.kernel_out(inputs, call, [out])
    assert out.dtype == want.dtype
    np.testing.assert_array_equal(out, want)


def test_add_layer_norm_in_place_over_its_input_and_with_the_sum_output() -> None:
    """The plan may give Y the buffer of X (INPLACE); the optional S output is X + R."""
    schema = default_registry().get("AddLayerNorm", "ge", 1)
    x, r, scale, bias = _r(2, 5, 16), _r(2, 5, 16), _r(16), _r(16)
    for outputs in (1, 2):
        call = schema.call({}, outputs)
        want = schema.kernel([x, r, scale, bias], call)
        outs = [x.copy(), *(np.full_like(x, np.nan) for _ in range(outputs - 1))]
        schema.kernel_out([outs[0], r, scale, bias], call, outs)
        for got, expected in zip(outs, want, strict=True):
            np.testing.assert_array_equal(got, expected)


def _misaligned(x: np.ndarray) -> np.ndarray:
    """``x`` at an odd byte offset, as a weight read in place from a model file can be."""
    raw = np.empty(x.nbytes + 1, np.uint8)
    y = raw[1:].view(x.dtype).reshape(x.shape)
    y[...] = x
    assert not y.flags.aligned
    return y


ONNX_CASES = [
    ("BatchNormalization", 9, [_r(2, 6, 5, 5), _r(6), _r(6), _r(6), np.abs(_r(6)) + 0.5],
     {"epsilon": 1e-3}),
    ("BatchNormalization", 15, [_r(3, 4), _r(4), _r(4), _r(4), np.abs(_r(4)) + 0.5], {}),
    ("BatchNormalization", 15, [_r(1, 3, 4, 4).astype(np.float16)] +
     [v.astype(np.float16) for v in (_r(3), _r(3), _r(3), np.abs(_r(3)) + 1)], {}),
    ("MatMul", 13, [_r(2, 3, 5, 8), _r(2, 1, 8, 6)], {}),
    ("MatMul", 13, [_r(4, 8), _r(8)], {}),
    ("MatMul", 13, [_r(7, 3), _r(5, 3).T], {}),  # a transposed view (attention's K^T)
    ("MatMul", 13, [_r(3, 4).astype(np.float16), _r(4, 2).astype(np.float16)], {}),
    ("Gemm", 13, [_r(3, 5), _r(7, 5), _r(7)], {"transB": 1}),
    ("Gemm", 13, [_r(5, 3), _r(5, 4), _r(3, 4)], {"transA": 1, "alpha": 0.5, "beta": 2.0}),
    ("Gemm", 13, [_r(2, 8), _misaligned(_r(6, 8)), None], {"transB": 1}),
    ("Gather", 13, [_r(10, 4), np.array([[0, 9], [-1, 3]], np.int64)], {}),
    ("Gather", 13, [_r(3, 10, 2), np.array(-2, np.int64)], {"axis": 1}),
    ("Gather", 13, [_misaligned(_r(50, 8)), np.array([[4, 7, 49]], np.int64)], {}),
    ("LayerNormalization", 17, [_r(2, 3, 8), _r(8), _r(8)], {"epsilon": 1e-3}),
    ("LayerNormalization", 17, [_r(4, 6), _r(6)], {"axis": 0}),
    ("Softmax", 13, [_r(2, 3, 7)], {"axis": 1}),
    ("Softmax", 11, [_r(2, 3, 7)], {"axis": 1}),  # coerced to 2-D
    ("Softmax", 13, [_r(4, 5).astype(np.float16)], {}),
    ("Relu", 14, [_r(3, 9)], {}),
    ("Relu", 14, [np.concatenate([_r(2, 65541), [[np.nan, -np.inf], [np.inf, -0.0]]],
                                 axis=1).astype(np.float32)], {}),  # blocks, and a tail
    ("Sigmoid", 13, [_r(3, 9)], {}),
    ("Tanh", 13, [_r(3, 9)], {}),
    ("Erf", 13, [_r(3, 9)], {}),
    ("Erf", 13, [_r(3, 9).astype(np.float64)], {}),
    ("Exp", 13, [_r(3, 9).astype(np.float16)], {}),
    ("Abs", 13, [np.arange(-5, 5, dtype=np.int32)], {}),
    ("IsNaN", 13, [np.array([0.0, np.nan, 1.0], np.float32)], {}),
    ("Add", 14, [_r(2, 3, 4), _r(4)], {}),
    ("Sub", 14, [_r(3, 1), _r(1, 5)], {}),
    ("Mul", 14, [_r(2, 3), np.float32(2.5) * np.ones((), np.float32)], {}),
    ("Div", 14, [_r(4, 4), _r(4, 1)], {}),
    ("Div", 14, [np.array([7, -7, 9], np.int64), np.array([2, 2, -4], np.int64)], {}),
    ("Equal", 13, [np.array([1, 2, 3], np.int64), np.array([1, 0, 3], np.int64)], {}),
    ("Clip", 6, [_r(3, 9)], {"min": -0.5, "max": 0.5}),
    ("Clip", 13, [_r(3, 9), np.float32(-0.5) * np.ones((), np.float32), None], {}),
    ("Clip", 13, [_r(3, 9), None, np.ones((1,), np.float32)], {}),
    ("Clip", 13, [np.arange(-6, 6, dtype=np.int32), np.array(-2, np.int32),
                  np.array(3, np.int32)], {}),
    ("Clip", 13, [_r(2, 5).astype(np.float16), np.array(0, np.float16), None], {}),
]


@pytest.mark.parametrize(("op", "opset", "inputs", "attrs"), ONNX_CASES,
                         ids=[f"{c[0]}-{k}" for k, c in enumerate(ONNX_CASES)])
def test_onnx_kernel_out_writes_what_kernel_returns(op: str, opset: int, inputs: list,
                                                    attrs: dict) -> None:
    schema = default_registry().get(op, "", opset)
    assert schema.kernel_out is not None
    call = schema.call(attrs, len(schema.outputs) if op == "LayerNormalization" else 1)
    want = schema.kernel(inputs, call)
    outs = [np.full(w.shape, 7, w.dtype) for w in want]  # the buffer's old bytes never show
    schema.kernel_out(inputs, call, outs)
    for got, expected in zip(outs, want, strict=True):
        assert got.dtype == expected.dtype
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div"])
@pytest.mark.parametrize("into", [0, 1])
def test_elementwise_kernel_out_over_either_operand(op: str, into: int) -> None:
    """The arena may give C the buffer of A or of B (INPLACE); ufuncs read before writing."""
    schema = default_registry().get(op, "", 14)
    a, b = _r(3, 5), _r(3, 5) + 3
    want = schema.kernel([a, b], schema.call({}))[0]
    args = [a.copy(), b.copy()]
    schema.kernel_out(args, schema.call({}), [args[into]])
    np.testing.assert_array_equal(args[into], want)


@pytest.mark.parametrize(("op", "opset", "inputs"), [
    ("Relu", 14, [_r(4, 6)]),
    ("Relu", 14, [_r(3, 50000)]),
    ("BatchNormalization", 15, [_r(1, 6, 3, 3), _r(6), _r(6), _r(6), np.abs(_r(6)) + 0.5]),
    ("LayerNormalization", 17, [_r(4, 6), _r(6), _r(6)]),
    ("Softmax", 13, [_r(4, 6)]),
])
def test_in_place_kernel_out_over_its_input(op: str, opset: int, inputs: list) -> None:
    schema = default_registry().get(op, "", opset)
    call = schema.call({})
    want = schema.kernel(inputs, call)[0]
    x = inputs[0].copy()
    schema.kernel_out([x, *inputs[1:]], call, [x])
    np.testing.assert_array_equal(x, want)


@pytest.mark.parametrize(("lo", "hi"), [(-1.0, 2.0), (None, 2.0), (-1.0, None), (None, None),
                                         (3.0, -1.0)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int64, np.uint8])
def test_clip_is_max_then_min_in_place_and_out_of_place(lo: float | None, hi: float | None,
                                                        dtype: type) -> None:
    """Clip against its definition ``min(max(x, lo), hi)`` (a missing bound clamps nothing,
    NaN stays NaN), into a fresh output and over its own input."""
    x = np.array([-300, -2, -1, 0, 1, 2, 5, 250], np.float64)
    if np.dtype(dtype).kind == "f":
        x = np.concatenate([x, [np.nan, -np.inf, np.inf]])
    if np.dtype(dtype).kind == "u":
        x = np.abs(x)
    x = x.astype(dtype)
    bounds = [None if v is None else np.array(abs(v) if np.dtype(dtype).kind == "u" else v,
                                              dtype) for v in (lo, hi)]
    want = x if bounds[0] is None else np.maximum(x, bounds[0])
    want = want if bounds[1] is None else np.minimum(want, bounds[1])
    schema = default_registry().get("Clip", "", 13)
    np.testing.assert_array_equal(schema.kernel([x, *bounds], schema.call({}))[0], want)
    y = x.copy()
    schema.kernel_out([y, *bounds], schema.call({}), [y])
    np.testing.assert_array_equal(y, want)


@pytest.mark.parametrize(("op", "inputs"), [("Add", [_r(1, 4), _r(4)]), ("Relu", [_r(1, 4)]),
                                            ("Gemm", [_r(1, 3), _r(3, 4), None])])
def test_kernel_out_refuses_an_output_larger_than_its_result(op: str, inputs: list) -> None:
    """A ufunc would broadcast into a larger output; the kernels name the mismatch instead."""
    schema = default_registry().get(op, "", 14)
    with pytest.raises((KernelError, ValueError)):
        schema.kernel_out(inputs, schema.call({}), [np.zeros((3, 4), np.float32)])


def test_relu_in_blocks_is_max_with_zero() -> None:
    """The blocked Relu (an array of zeros per block) keeps NaN and clamps -inf, as
    ``max(x, 0)`` does, over several blocks and a tail."""
    x = _r(3, 100003)
    x[0, :4] = [np.nan, -np.inf, np.inf, -1.0]
    schema = default_registry().get("Relu", "", 14)
    y = schema.kernel([x], schema.call({}))[0]
    np.testing.assert_array_equal(y, np.maximum(x, np.float32(0)))
