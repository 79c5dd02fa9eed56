"""Low-precision element types (bfloat16, float8, float4, int4/uint4, int2/uint2) via ml_dtypes:
ONNX files (packed and typed fields), .om files, kernels and the lazy import."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from gerules.build import build_om
from gerules.ir import dtypes
from gerules.ir.ops._cast import cast
from gerules.ir.ops.api import evaluate
from gerules.onnx_io import load_model
from gerules.onnx_io.tensors import array_to_tensor, tensor_to_array
from gerules.runtime.model import Model

LOW = sorted(dtypes.LOW_PRECISION)


def _sample(dtype: str, n: int = 7) -> np.ndarray:
    values = np.array([0, 1, -1, 0.5, 2, -2, 3][:n], dtype=np.float32)
    if dtype.startswith("u") or dtype == "float8_e8m0fnu":
        values = np.abs(values) + (dtype == "float8_e8m0fnu")
    return cast(values, dtype)


@pytest.mark.parametrize("dtype", LOW)
def test_onnx_tensor_round_trip_is_bit_exact(dtype: str) -> None:
    x = _sample(dtype)  # odd length: the packed types end in half a byte
    proto = array_to_tensor(x, "x")
    assert proto.data_type == dtypes.ONNX_CODES[dtype]
    back = tensor_to_array(proto, name="x", max_bytes=1 << 20)
    assert back.dtype == x.dtype and back.tobytes() == x.tobytes()
    assert numpy_helper.to_array(proto).tobytes() == x.tobytes()  # onnx reads what we wrote


def test_typed_fields_hold_bit_patterns() -> None:
    bf = TensorProto(name="b", data_type=TensorProto.BFLOAT16, dims=[2], int32_data=[0x3F80,
                                                                                    0xC000])
    np.testing.assert_array_equal(tensor_to_array(bf, name="b", max_bytes=64).astype(np.float32),
                                  [1.0, -2.0])
    i4 = TensorProto(name="i", data_type=TensorProto.INT4, dims=[3], int32_data=[0xF1, 0x07])
    np.testing.assert_array_equal(tensor_to_array(i4, name="i", max_bytes=64).astype(np.int32),
                                  [1, -1, 7])
    short = TensorProto(name="s", data_type=TensorProto.UINT4, dims=[5], raw_data=b"\x01\x02")
    with pytest.raises(Exception, match="raw data has 2 bytes but its shape and type need 3"):
        tensor_to_array(short, name="s", max_bytes=64)


def test_float8_cast_saturates_unless_told_not_to() -> None:
    x = np.array([1e6, -1e6, np.inf, np.nan, 0.3], dtype=np.float32)
    sat = cast(x, "float8_e4m3fn").astype(np.float32)
    np.testing.assert_array_equal(sat[:3], [448, -448, 448])
    assert np.isnan(sat[3]) and abs(sat[4] - 0.3) < 0.02
    raw = cast(x, "float8_e4m3fn", saturate=0).astype(np.float32)
    assert np.isnan(raw[:3]).all()  # e4m3fn has no infinity
    assert np.isinf(cast(x, "float8_e5m2", saturate=0).astype(np.float32)[0])


@pytest.mark.parametrize(("mode", "want"), [("up", [4.0, 4.0, 0.5]), ("down", [2.0, 4.0, 0.25]),
                                            ("nearest", [4.0, 4.0, 0.25])])
def test_e8m0_rounds_by_mode(mode: str, want: list[float]) -> None:
    x = np.array([3.0, 4.0, 0.3], dtype=np.float32)
    np.testing.assert_array_equal(cast(x, "float8_e8m0fnu", round_mode=mode).astype(np.float32),
                                  want)


def test_arithmetic_kernels_compute_bfloat16_in_float32() -> None:
    x = np.array([1.0, 2.0, 3.0], dtype=np.float32).astype(ml_dtypes.bfloat16)
    (y,) = evaluate("Softmax", [x], check=True)
    assert y.dtype == x.dtype
    want = np.exp([1.0, 2.0, 3.0]) / np.exp([1.0, 2.0, 3.0]).sum()
    np.testing.assert_allclose(y.astype(np.float32), want, rtol=1e-2)


def _bf16_model() -> bytes:
    w = numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3)
                                .astype(ml_dtypes.bfloat16), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"]), helper.make_node("Relu", ["y"], ["z"])],
        "bf16", [helper.make_tensor_value_info("x", TensorProto.BFLOAT16, [4, 2])],
        [helper.make_tensor_value_info("z", TensorProto.BFLOAT16, [4, 3])], [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]
                             ).SerializeToString()


def test_bfloat16_model_compiles_to_om_and_runs(tmp_path: Path) -> None:
    graph = load_model(_bf16_model())
    out = build_om(graph, tmp_path / "m.om").path
    x = np.linspace(-1, 1, 8, dtype=np.float32).reshape(4, 2).astype(ml_dtypes.bfloat16)
    with Model.load(out) as model:
        (z,) = model.run({"x": x}).values()
    want = np.maximum(x.astype(np.float32) @ np.arange(6, dtype=np.float32).reshape(2, 3), 0)
    assert z.dtype == ml_dtypes.bfloat16
    np.testing.assert_allclose(z.astype(np.float32), want, rtol=1e-2, atol=1e-2)
    onnx.checker.check_model(onnx.load_from_string(_bf16_model()))


def test_run_path_does_not_import_ml_dtypes() -> None:
    """The .om runtime imports ml_dtypes only when a model holds a low-precision type."""
    code = ("import sys; import gerules.runtime.model, gerules.ir.ops; "
            "from gerules.ir.registry import default_registry; default_registry(); "
            "print('ml_dtypes' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"


def test_is_low_float_tells_exactly_the_low_floats() -> None:
    """The kernels' fast test (user-defined dtype, then the name) agrees with ``LOW_FLOATS``
    on every element type NumPy or ml_dtypes has."""
    from gerules.ir.ops._common import is_low_float

    names = [*dtypes.LOW_PRECISION, "float16", "float32", "float64", "int8", "uint8",
             "int64", "bool", "complex64"]
    for name in names:
        dt = dtypes.to_numpy(name) if name in dtypes.LOW_PRECISION else np.dtype(name)
        assert is_low_float(dt) == (name in dtypes.LOW_FLOATS), name
