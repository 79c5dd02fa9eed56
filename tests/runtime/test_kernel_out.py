"""``kernel_out`` (compute into the arena's views) gives exactly what ``kernel`` returns."""

from __future__ import annotations

import numpy as np
import pytest

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
