"""The cost model prices formats: padded cube work, padded bytes, TransData, the transfers a
plain cube op implies, the small-channel form and the AI core count."""

from __future__ import annotations

import math

import pytest

from gerules.cost import NpuCostModel, load_profile, with_cores
from gerules.cost.layout import cube_padding, implied_transfers, padding_bytes
from gerules.ir.graph import TensorType
from gerules.ir.registry import default_registry

REG = default_registry()


def _t(shape: tuple[int, ...], fmt: str = "ND", dtype: str = "float16") -> TensorType:
    return TensorType(dtype, shape, fmt)


def _conv(model: NpuCostModel, x: TensorType, w: TensorType, y: TensorType,
          constant: tuple[bool, ...] = (False, True)):  # noqa: ANN202
    schema = REG.get("FusedConv", "ge")
    call = schema.call({"strides": [2, 2], "pads": [3, 3, 3, 3]}, types=[x, w])
    return model.estimate(schema, [x, w], [y], call, constant)


def test_a_three_channel_conv_pays_its_padding_and_small_channel_pays_less() -> None:
    """ResNet's first conv: Cin 3 padded to C0 16 does 16/3 of its useful work; the C04 form
    reduces over (h, w, c) = 7*7*4 = 196 padded to 208."""
    x5, y5 = _t((1, 3, 224, 224), "NC1HWC0"), _t((1, 64, 112, 112), "NC1HWC0")
    w = _t((64, 3, 7, 7), "FRACTAL_Z")
    assert cube_padding("ge.FusedConv", [x5, w], [y5]) == pytest.approx(16 / 3)
    x4, w4 = _t((1, 3, 224, 224), "NC1HWC0_C04"), _t((64, 3, 7, 7), "FRACTAL_Z_C04")
    assert cube_padding("ge.FusedConv", [x4, w4], [y5]) == pytest.approx(208 / 147)
    model = NpuCostModel("Ascend310P3", small_channel=True)
    full, small = _conv(model, x5, w, y5), _conv(model, x4, w4, y5)
    assert small.flops < full.flops and small.bytes < full.bytes and small.us < full.us
    # a 64-channel conv pads nothing
    assert cube_padding("ge.FusedConv", [_t((1, 64, 8, 8), "NC1HWC0"), _t((64, 64, 3, 3))],
                        [_t((1, 64, 8, 8))]) == 1.0
    # a depthwise conv pads its one input channel per group to a block
    assert cube_padding("Conv", [_t((1, 32, 8, 8)), _t((32, 1, 3, 3))],
                        [_t((1, 32, 8, 8))]) == 16.0
    # a matmul pads M, N to 16 and K to C0: [1, 2048] x [2048, 1000]
    assert cube_padding("MatMul", [_t((1, 2048)), _t((2048, 1000))],
                        [_t((1, 1000))]) == pytest.approx(16 * 1008 / 1000)


def test_small_channel_formats_are_allowed_only_when_enabled() -> None:
    x4 = _t((1, 3, 224, 224), "NC1HWC0_C04")
    assert not NpuCostModel("Ascend310P3").allowed([x4], [_t((1, 64, 112, 112), "NC1HWC0")])
    assert NpuCostModel("Ascend310P3", small_channel=True).allowed([x4], [])
    assert NpuCostModel("Ascend310P3").allowed([_t((1, 3, 8, 8), "NC1HWC0")], [])


def test_transdata_costs_the_bytes_it_moves_on_the_vector_unit() -> None:
    model = NpuCostModel("Ascend910")
    x, y = _t((1, 3, 224, 224)), _t((1, 3, 224, 224), "NC1HWC0")
    schema = REG.get("TransData", "ge")
    est = model.estimate(schema, [x], [y], schema.call({"src_format": "NCHW",
                                                        "dst_format": "NC1HWC0"}))
    moved = (3 + 16) * 224 * 224 * 2  # plain in, padded 5-D out
    assert est.unit == "vector" and est.bytes == moved and est.flops == 0
    p = model.profile
    assert est.us == pytest.approx(p.launch_us["vector"] + moved / p.hbm_bytes_per_us)
    assert padding_bytes(y) == 13 * 224 * 224 * 2


def test_a_plain_cube_op_pays_the_transfers_its_layout_implies() -> None:
    """What GE would insert around a conv left in NCHW: a TransData on the input and on the
    output; the constant weight is converted at compile time. Its native form pays none."""
    model = NpuCostModel("Ascend910")
    x, w, y = _t((1, 64, 56, 56)), _t((64, 64, 3, 3)), _t((1, 64, 56, 56))
    plain = _conv(model, x, w, y)
    assert plain.transfers == 2
    assert [t.native for t in implied_transfers("ge.FusedConv", [x, w], [y], (False, True))] \
        == ["NC1HWC0", "NC1HWC0"]
    assert len(implied_transfers("ge.FusedConv", [x, w], [y], (False, False))) == 2  # W: no
    native = _conv(model, x.with_format("NC1HWC0"), w.with_format("FRACTAL_Z"),
                   y.with_format("NC1HWC0"))
    assert native.transfers == 0 and native.transfer_us == 0
    assert plain.us == pytest.approx(native.us + plain.transfer_us)
    # a matmul between two activations implies three: A, B and the result, in FRACTAL_NZ
    mm = REG.get("MatMul")
    a, b = _t((8, 128, 64)), _t((8, 64, 128))
    est = model.estimate(mm, [a, b], [_t((8, 128, 128))], mm.call({}), (False, False))
    assert est.transfers == 3


def test_vector_work_in_a_padded_format_moves_the_padding() -> None:
    model = NpuCostModel("Ascend910")
    relu = REG.get("Relu")
    plain = model.estimate(relu, [_t((1, 3, 64, 64))], [_t((1, 3, 64, 64))], relu.call({}))
    blocked = model.estimate(relu, [_t((1, 3, 64, 64), "NC1HWC0")],
                             [_t((1, 3, 64, 64), "NC1HWC0")], relu.call({}))
    assert blocked.bytes == plain.bytes * 16 // 3


def test_fewer_ai_cores_make_cube_work_slower() -> None:
    full = load_profile("Ascend910")
    half = with_cores(full, full.ai_cores // 2)
    x, w, y = (_t((8, 256, 56, 56), "NC1HWC0"), _t((256, 256, 3, 3), "FRACTAL_Z"),
               _t((8, 256, 56, 56), "NC1HWC0"))
    fast, slow = _conv(NpuCostModel(full), x, w, y), _conv(NpuCostModel(half), x, w, y)
    assert fast.bound == slow.bound == "compute"
    launch = full.launch_us["cube"]
    assert math.isclose((slow.us - launch) / (fast.us - launch), 2.0, rel_tol=1e-6)
