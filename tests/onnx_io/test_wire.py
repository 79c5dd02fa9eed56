"""The ONNX wire decoder against protobuf's own parser (the ``onnx`` package)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from gerules.onnx_io.proto import parse_model
from gerules.onnx_io.wire import WireError
from gerules.testing.models import cnn


def _key(number: int, wire: int) -> bytes:
    return _varint(number << 3 | wire)


def _varint(v: int) -> bytes:
    v &= (1 << 64) - 1
    out = bytearray()
    while True:
        b, v = v & 0x7F, v >> 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def _len(number: int, payload: bytes) -> bytes:
    return _key(number, 2) + _varint(len(payload)) + payload


def _both(data: bytes) -> tuple[onnx.ModelProto, object]:
    theirs = onnx.ModelProto()
    theirs.ParseFromString(data)
    return theirs, parse_model(data)


def test_a_real_model_decodes_field_for_field() -> None:
    model = cnn().model
    theirs, ours = _both(model.SerializeToString())
    assert ours.ir_version == theirs.ir_version and ours.producer_name == theirs.producer_name
    assert [(o.domain, o.version) for o in ours.opset_import] == \
        [(o.domain, o.version) for o in theirs.opset_import]
    for a, b in zip(ours.graph.node, theirs.graph.node, strict=True):
        assert (a.op_type, list(a.input), list(a.output), a.name) == \
            (b.op_type, list(b.input), list(b.output), b.name)
        for x, y in zip(a.attribute, b.attribute, strict=True):
            assert (x.name, x.type, x.i, list(x.ints), x.f, list(x.floats)) == \
                (y.name, y.type, y.i, list(y.ints), y.f, list(y.floats))
    for a, b in zip(ours.graph.initializer, theirs.graph.initializer, strict=True):
        assert a.name == b.name and list(a.dims) == list(b.dims) and a.data_type == b.data_type
        assert bytes(a.raw_data) == b.raw_data
    for a, b in zip(ours.graph.input, theirs.graph.input, strict=True):
        dims = [(d.HasField("dim_value"), d.dim_value, d.dim_param)
                for d in a.type.tensor_type.shape.dim]
        assert dims == [(d.HasField("dim_value"), d.dim_value, d.dim_param)
                        for d in b.type.tensor_type.shape.dim]


def test_raw_data_is_a_view_of_the_input_not_a_copy() -> None:
    w = np.arange(1000, dtype=np.float32)
    model = helper.make_model(helper.make_graph(
        [helper.make_node("Identity", ["w"], ["y"])], "g", [],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1000])],
        [numpy_helper.from_array(w, "w")]))
    data = model.SerializeToString()
    raw = parse_model(data).graph.initializer[0].raw_data
    assert isinstance(raw, memoryview) and raw.obj is data
    assert np.array_equal(np.frombuffer(raw, np.float32), w)


def test_packed_and_unpacked_repeats_negative_ints_and_typed_data() -> None:
    t = TensorProto()
    t.name, t.data_type = "t", TensorProto.INT64
    t.dims.extend([2, 3])
    t.int64_data.extend([-1, 2, -(2**63), 2**63 - 1, 0, 5])
    f = TensorProto(name="f", data_type=TensorProto.FLOAT, dims=[3], float_data=[1.5, -2, 3e38])
    graph = onnx.GraphProto(name="g", initializer=[t, f])
    data = onnx.ModelProto(ir_version=8, graph=graph).SerializeToString()
    unpacked = _len(7, b"".join(_len(5, _key(7, 0) + _varint(v)) for v in (-7, 9)))
    data += _key(1, 0) + _varint(9)  # a later ir_version wins
    theirs, ours = _both(data + _len(7, _len(5, _key(8, 2) + _varint(1) + b"u")) + unpacked)
    assert ours.ir_version == theirs.ir_version == 9
    for a, b in zip(ours.graph.initializer, theirs.graph.initializer, strict=True):
        assert list(a.int64_data) == list(b.int64_data) and list(a.dims) == list(b.dims)
        assert list(a.float_data) == list(b.float_data)
    assert len(ours.graph.initializer) == len(theirs.graph.initializer) == 5  # merged graphs


def test_oneof_members_clear_each_other_and_absent_messages_read_empty() -> None:
    dim = _len(1, _key(1, 0) + _varint(4)) + _len(1, _key(2, 2) + _varint(1) + b"N")
    second = _len(1, _key(2, 2) + _varint(1) + b"M" + _key(1, 0) + _varint(3))
    vi = _len(11, _len(1, b"x") + _len(2, _len(1, _len(2, dim + second))))
    theirs, ours = _both(_key(1, 0) + _varint(8) + _len(7, vi))
    for a, b in zip(ours.graph.input[0].type.tensor_type.shape.dim,
                    theirs.graph.input[0].type.tensor_type.shape.dim, strict=True):
        assert [a.HasField("dim_value"), a.dim_value, a.HasField("dim_param"), a.dim_param] == \
            [b.HasField("dim_value"), b.dim_value, b.HasField("dim_param"), b.dim_param]
    assert not ours.graph.input[0].type.tensor_type.HasField("elem_type")
    empty = parse_model(b"")
    assert not empty.HasField("graph") and list(empty.graph.node) == []


@pytest.mark.parametrize("data", [
    _key(1, 0) + b"\x80",  # a varint cut short
    _key(7, 2) + b"\x05ab",  # a length past the end
    _key(1, 3),  # a group
    _key(0, 0) + b"\x01",  # field number 0
    _key(1, 0) + b"\xff" * 11,  # an 11-byte varint
])
def test_corrupt_bytes_raise_wire_error(data: bytes) -> None:
    with pytest.raises(WireError):
        parse_model(data)


def test_nesting_past_protobufs_limit_is_too_deep() -> None:
    inner = b""
    for _ in range(40):  # graph > node > attribute > graph ...: three levels per round
        inner = _len(1, _len(5, _len(6, inner)))
    with pytest.raises(WireError) as err:
        parse_model(_len(7, inner))
    assert err.value.too_deep
