"""MaxPool and GlobalAveragePool on NC1HWC0 inputs (``ir.ops.pool_blocked``): the result
equals the plain pool through TransData (``formats.to_format`` / ``from_format``) and
onnxruntime's, padding lanes come out zero and the input's padding lanes (NaN here) reach no
value, also into a NaN-filled arena view."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper

from gerules.ir import formats as F
from gerules.ir.graph import TensorType
from gerules.ir.ops.api import evaluate
from gerules.ir.ops.pool_blocked import global_average_pool_blocked, max_pool_blocked
from gerules.ir.registry import default_registry

# (N, C, H, W, dtype, attrs)
MAX_CASES = [
    (1, 16, 12, 12, "float32", {"kernel_shape": [3, 3], "strides": [2, 2],
                                "pads": [1, 1, 1, 1]}),  # ResNet's
    (2, 20, 9, 7, "float32", {"kernel_shape": [3, 2], "strides": [2, 1],
                              "pads": [1, 0, 1, 1]}),  # C past a block, uneven pads
    (1, 8, 10, 11, "float32", {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}),
    (1, 33, 7, 9, "float16", {"kernel_shape": [2, 2], "strides": [2, 2],
                              "pads": [0, 0, 1, 1], "ceil_mode": 1}),  # float16, C0 16
    (1, 5, 9, 9, "float64", {"kernel_shape": [3, 3], "dilations": [2, 2],
                             "pads": [2, 2, 2, 2]}),  # dilated
    (1, 16, 6, 6, "float32", {"kernel_shape": [2, 2], "auto_pad": "SAME_UPPER",
                              "strides": [1, 1]}),
    (1, 3, 5, 5, "float32", {"kernel_shape": [5, 5], "pads": [2, 2, 2, 2],
                             "strides": [3, 3]}),  # taps that meet no output
]


def _held(x: np.ndarray) -> tuple[np.ndarray, TensorType]:
    """``x`` in NC1HWC0 with NaN (integers: their maximum) in its padding lanes, and its
    type."""
    p = F.to_format(x, "NC1HWC0")
    poison = np.nan if x.dtype.kind == "f" else np.iinfo(x.dtype).max
    p[F.to_format(np.ones(x.shape, x.dtype), "NC1HWC0") == 0] = poison
    return p, TensorType(x.dtype.name, x.shape, "NC1HWC0")


def _check(op: str, x: np.ndarray, attrs: dict, direct) -> None:  # type: ignore[no-untyped-def]
    (want,) = evaluate(op, [x], attrs)  # plain
    held, t = _held(x)
    schema = default_registry().get(op, "", 22)
    assert schema is not None and schema.kernel_out is not None
    call = schema.call(attrs, 1, types=[t])
    done = direct([held], call, ())
    assert done is not None, "an NC1HWC0 pool runs on its blocks"
    (got,) = evaluate(op, [held], attrs, types=[t])
    assert np.array_equal(got, done[0])  # the registry's kernel takes this path
    assert got.shape == TensorType(want.dtype.name, want.shape, "NC1HWC0").physical_shape
    tol = {"rtol": 1e-3, "atol": 1e-3} if x.dtype == np.float16 else {"rtol": 1e-6,
                                                                      "atol": 1e-6}
    np.testing.assert_allclose(F.from_format(got, "NC1HWC0", want.shape), want, **tol)
    if op == "MaxPool":
        assert np.array_equal(F.from_format(got, "NC1HWC0", want.shape), want)  # exact
    lanes = F.to_format(np.ones(want.shape, want.dtype), "NC1HWC0") == 0
    assert not got[lanes].any(), "padding lanes come out zero"
    for _ in range(2):  # into a poisoned arena view, over what the last call left in scratch
        arena = np.full(got.shape, np.nan if got.dtype.kind == "f" else 7, got.dtype)
        schema.kernel_out([held], call, [arena])
        assert np.array_equal(arena, got)


def _name(case: tuple) -> str:
    return f"{'x'.join(map(str, case[:4]))}{case[4]}-" + "-".join(
        f"{k}{v}" for k, v in sorted(case[5].items()) if k != "kernel_shape")


@pytest.mark.parametrize("case", MAX_CASES, ids=_name)
def test_blocked_max_pool_equals_the_plain_one(case: tuple) -> None:
    n, c, h, w, dtype, attrs = case
    x = np.random.default_rng(c + h).standard_normal((n, c, h, w)).astype(dtype)
    _check("MaxPool", x, attrs, max_pool_blocked)


def test_blocked_max_pool_of_integers_pads_with_the_minimum() -> None:
    x = -np.arange(2 * 20 * 5 * 5, dtype=np.int32).reshape(2, 20, 5, 5)
    _check("MaxPool", x, {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]},
           max_pool_blocked)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_blocked_global_average_pool_equals_the_plain_one(dtype: str) -> None:
    x = np.random.default_rng(3).standard_normal((2, 37, 7, 5)).astype(dtype)
    _check("GlobalAveragePool", x, {}, global_average_pool_blocked)


def test_max_pool_with_indices_declines() -> None:
    x = np.random.default_rng(4).standard_normal((1, 16, 6, 6)).astype(np.float32)
    held, t = _held(x)
    schema = default_registry().get("MaxPool", "", 22)
    assert schema is not None
    assert max_pool_blocked([held], schema.call({"kernel_shape": [2, 2]}, 2, types=[t]),
                            ()) is None


@pytest.mark.parametrize("case", MAX_CASES[::2], ids=_name)
def test_blocked_max_pool_agrees_with_onnxruntime(case: tuple) -> None:
    pytest.importorskip("onnxruntime", reason="onnxruntime (the 'dev' extra) is the oracle")
    from gerules.testing.oracle import run_onnxruntime

    n, c, h, w, dtype, attrs = case
    x = np.random.default_rng(5).standard_normal((n, c, h, w)).astype(dtype)
    held, t = _held(x)
    (got,) = evaluate("MaxPool", [held], attrs, types=[t])
    elem = helper.np_dtype_to_tensor_dtype(x.dtype)
    graph = helper.make_graph(
        [helper.make_node("MaxPool", ["X"], ["Y"], **attrs)], "pool",
        [helper.make_tensor_value_info("X", elem, x.shape)],
        [helper.make_tensor_value_info("Y", elem, None)])
    model: onnx.ModelProto = helper.make_model(graph, opset_imports=[helper.make_opsetid("",
                                                                                           17)])
    (theirs,) = run_onnxruntime(model, {"X": x})
    assert np.array_equal(F.from_format(got, "NC1HWC0", theirs.shape), theirs)
