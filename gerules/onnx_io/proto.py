"""ONNX's messages (``onnx.proto``, IR version 10) as ``wire`` field tables.

Field names and numbers are ONNX's, so the reader addresses a decoded model exactly as it
would the ``onnx`` package's ``ModelProto``. Decoding needs neither ``onnx`` nor ``protobuf``
(importing ``onnx`` costs about half a second, most of it ``ml_dtypes``), and ``raw_data``
stays a view of the file's bytes: weights are not copied while the model is read.

Subgraphs (``AttributeProto.g`` / ``graphs``) are decoded like any message, so their nesting
counts toward the depth limit as protobuf counts it; the reader then refuses them.
"""

from __future__ import annotations

from typing import ClassVar

from .wire import Buffer, Field, Message, decode

# TensorProto.DataLocation and AttributeProto.AttributeType (onnx.proto)
EXTERNAL = 1
ATTRIBUTE_TYPES = {0: "UNDEFINED", 1: "FLOAT", 2: "INT", 3: "STRING", 4: "TENSOR", 5: "GRAPH",
                   6: "FLOATS", 7: "INTS", 8: "STRINGS", 9: "TENSORS", 10: "GRAPHS",
                   11: "SPARSE_TENSOR", 12: "SPARSE_TENSORS", 13: "TYPE_PROTO",
                   14: "TYPE_PROTOS"}
FLOAT, INT, STRING, TENSOR, GRAPH, FLOATS, INTS, STRINGS, TENSORS, GRAPHS = range(1, 11)


def f(name: str, kind: str, *, repeated: bool = False, of: str = "", oneof: str = "") -> Field:
    """A field; ``of`` names the message type of a message field (looked up when decoding,
    so types may refer to types defined below them)."""
    return Field(name, kind, repeated, (lambda: globals()[of]) if of else None, oneof)


class StringStringEntryProto(Message):
    FIELDS: ClassVar[dict[int, Field]] = {1: f("key", "string"), 2: f("value", "string")}


class OperatorSetIdProto(Message):
    FIELDS: ClassVar[dict[int, Field]] = {1: f("domain", "string"), 2: f("version", "int")}


class Segment(Message):
    FIELDS: ClassVar[dict[int, Field]] = {1: f("begin", "int"), 2: f("end", "int")}


class TensorProto(Message):
    FIELDS: ClassVar[dict[int, Field]] = {
        1: f("dims", "int", repeated=True), 2: f("data_type", "int"),
        3: f("segment", "message", of="Segment"),
        4: f("float_data", "float", repeated=True), 5: f("int32_data", "int", repeated=True),
        6: f("string_data", "bytes", repeated=True), 7: f("int64_data", "int", repeated=True),
        8: f("name", "string"), 9: f("raw_data", "view"),
        10: f("double_data", "double", repeated=True),
        11: f("uint64_data", "uint", repeated=True), 12: f("doc_string", "string"),
        13: f("external_data", "message", repeated=True, of="StringStringEntryProto"),
        14: f("data_location", "int"),
    }


class SparseTensorProto(Message):
    FIELDS: ClassVar[dict[int, Field]] = {
        1: f("values", "message", of="TensorProto"), 2: f("indices", "message", of="TensorProto"),
        3: f("dims", "int", repeated=True),
    }


class Dimension(Message):
    FIELDS: ClassVar[dict[int, Field]] = {
        1: f("dim_value", "int", oneof="value"), 2: f("dim_param", "string", oneof="value"),
        3: f("denotation", "string"),
    }


class TensorShapeProto(Message):
    FIELDS: ClassVar[dict[int, Field]] = {1: f("dim", "message", repeated=True, of="Dimension")}


class TensorTypeProto(Message):
    """``TypeProto.Tensor`` (and ``SparseTensor``, which has the same fields)."""

    FIELDS: ClassVar[dict[int, Field]] = {
        1: f("elem_type", "int"), 2: f("shape", "message", of="TensorShapeProto"),
    }


class TypeProto(Message):
    """Only tensor types are read; the other kinds are recorded as present (by ``oneof``)."""

    FIELDS: ClassVar[dict[int, Field]] = {
        1: f("tensor_type", "message", of="TensorTypeProto", oneof="value"),
        4: f("sequence_type", "message", of="Opaque", oneof="value"),
        5: f("map_type", "message", of="Opaque", oneof="value"),
        6: f("denotation", "string"),
        7: f("opaque_type", "message", of="Opaque", oneof="value"),
        8: f("sparse_tensor_type", "message", of="TensorTypeProto", oneof="value"),
        9: f("optional_type", "message", of="Opaque", oneof="value"),
    }


class Opaque(Message):
    """A message whose content is not read (only that it is there)."""


class ValueInfoProto(Message):
    FIELDS: ClassVar[dict[int, Field]] = {
        1: f("name", "string"), 2: f("type", "message", of="TypeProto"),
        3: f("doc_string", "string"),
    }


class AttributeProto(Message):
    FIELDS: ClassVar[dict[int, Field]] = {
        1: f("name", "string"), 21: f("ref_attr_name", "string"), 13: f("doc_string", "string"),
        20: f("type", "int"), 2: f("f", "float"), 3: f("i", "int"), 4: f("s", "bytes"),
        5: f("t", "message", of="TensorProto"), 6: f("g", "message", of="GraphProto"),
        22: f("sparse_tensor", "message", of="SparseTensorProto"),
        7: f("floats", "float", repeated=True), 8: f("ints", "int", repeated=True),
        9: f("strings", "bytes", repeated=True),
        10: f("tensors", "message", repeated=True, of="TensorProto"),
        11: f("graphs", "message", repeated=True, of="GraphProto"),
    }


class NodeProto(Message):
    FIELDS: ClassVar[dict[int, Field]] = {
        1: f("input", "string", repeated=True), 2: f("output", "string", repeated=True),
        3: f("name", "string"), 4: f("op_type", "string"), 7: f("domain", "string"),
        5: f("attribute", "message", repeated=True, of="AttributeProto"),
        6: f("doc_string", "string"),
    }


class GraphProto(Message):
    FIELDS: ClassVar[dict[int, Field]] = {
        1: f("node", "message", repeated=True, of="NodeProto"), 2: f("name", "string"),
        5: f("initializer", "message", repeated=True, of="TensorProto"),
        15: f("sparse_initializer", "message", repeated=True, of="SparseTensorProto"),
        10: f("doc_string", "string"),
        11: f("input", "message", repeated=True, of="ValueInfoProto"),
        12: f("output", "message", repeated=True, of="ValueInfoProto"),
        13: f("value_info", "message", repeated=True, of="ValueInfoProto"),
    }


class FunctionProto(Message):
    FIELDS: ClassVar[dict[int, Field]] = {
        1: f("name", "string"), 4: f("input", "string", repeated=True),
        5: f("output", "string", repeated=True), 6: f("attribute", "string", repeated=True),
        11: f("attribute_proto", "message", repeated=True, of="AttributeProto"),
        7: f("node", "message", repeated=True, of="NodeProto"), 8: f("doc_string", "string"),
        9: f("opset_import", "message", repeated=True, of="OperatorSetIdProto"),
        10: f("domain", "string"), 13: f("overload", "string"),
        12: f("value_info", "message", repeated=True, of="ValueInfoProto"),
        14: f("metadata_props", "message", repeated=True, of="StringStringEntryProto"),
    }


class ModelProto(Message):
    FIELDS: ClassVar[dict[int, Field]] = {
        1: f("ir_version", "int"), 2: f("producer_name", "string"),
        3: f("producer_version", "string"), 4: f("domain", "string"),
        5: f("model_version", "int"), 6: f("doc_string", "string"),
        7: f("graph", "message", of="GraphProto"),
        8: f("opset_import", "message", repeated=True, of="OperatorSetIdProto"),
        14: f("metadata_props", "message", repeated=True, of="StringStringEntryProto"),
        20: f("training_info", "message", repeated=True, of="Opaque"),
        25: f("functions", "message", repeated=True, of="FunctionProto"),
    }


def parse_model(data: Buffer) -> ModelProto:
    """The ``ModelProto`` in ``data`` (raises ``wire.WireError`` on corrupt bytes)."""
    model = decode(ModelProto, data)
    assert isinstance(model, ModelProto)
    return model
