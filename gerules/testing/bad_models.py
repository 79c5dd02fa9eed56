"""A catalogue of broken model files, each with the error it must produce.

Each ``BadCase`` writes its files into an empty folder and returns the model's path; ``expect``
is a regular expression the one-line error (after ``<file>: ``) must match, so every case
names the node or tensor at fault. The CLI tests run each through ``ge-rewrite run``; fuzzers
and the ``.om`` side can reuse the same files.

Invariants:
- Builders are deterministic and write only inside the folder they are given (the external
  data cases put the model in ``<folder>/model/`` and a "secret" file at
  ``<folder>/secret.bin``, outside the model's own folder, for the model to reach for).
- Every model here is wrong in exactly one way; the same model without that flaw loads.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

Builder = Callable[[Path], Path]


@dataclass(frozen=True, slots=True)
class BadCase:
    name: str
    build: Builder
    expect: str  # regex for the message after "<file>: "
    exit_code: int = 1


def _model(nodes: Sequence[onnx.NodeProto], inits: Sequence[onnx.TensorProto] = (),
           opset: int = 17, outputs: Sequence[str] = ("y",)) -> onnx.ModelProto:
    graph = helper.make_graph(
        list(nodes), "bad", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs],
        list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def good_model() -> onnx.ModelProto:
    """``y = (x + w) * x`` with ``w`` float32[4]: the base every case breaks."""
    w = numpy_helper.from_array(np.arange(4, dtype=np.float32), "w")
    return _model([helper.make_node("Add", ["x", "w"], ["s"], name="add"),
                   helper.make_node("Mul", ["s", "x"], ["y"], name="mul")], [w])


def _write(model: onnx.ModelProto | bytes) -> Builder:
    def build(folder: Path) -> Path:
        path = folder / "model.onnx"
        data = model if isinstance(model, bytes) else model.SerializeToString()
        path.write_bytes(data)
        return path

    return build


def _with_nodes(*nodes: onnx.NodeProto, opset: int = 17) -> onnx.ModelProto:
    w = numpy_helper.from_array(np.arange(4, dtype=np.float32), "w")
    return _model(nodes, [w], opset=opset)


def _raw_tensor(dims: Sequence[int], raw: bytes, name: str = "w") -> onnx.TensorProto:
    t = TensorProto(name=name, data_type=TensorProto.FLOAT, dims=list(dims))
    t.raw_data = raw
    return t


def _with_init(t: onnx.TensorProto) -> onnx.ModelProto:
    return _model([helper.make_node("Add", ["x", t.name], ["y"], name="add")], [t])


def _field(number: int, payload: bytes) -> bytes:
    """One length-delimited protobuf field, encoded by hand (to nest past protobuf's limit)."""
    out = bytearray()
    for value in ((number << 3) | 2, len(payload)):
        while True:
            out.append((value & 0x7F) | (0x80 if value > 0x7F else 0))
            value >>= 7
            if not value:
                break
    return bytes(out) + payload


def nested_ifs(depth: int) -> bytes:
    """A model of ``depth`` If nodes, each inside the previous one's then_branch."""
    z = helper.make_tensor_value_info("z", TensorProto.BOOL, None)
    leaf = [helper.make_node("Identity", ["c"], ["z"])]
    graph = onnx.GraphProto(name="leaf", node=leaf, output=[z]).SerializeToString()
    for i in range(depth):
        attr = onnx.AttributeProto(name="then_branch", type=onnx.AttributeProto.GRAPH)
        node = helper.make_node("If", ["c"], ["z"], name=f"if{i}").SerializeToString()
        node += _field(5, attr.SerializeToString() + _field(6, graph))
        graph = onnx.GraphProto(name=f"g{i}", output=[z]).SerializeToString() + _field(1, node)
    graph += _field(11, helper.make_tensor_value_info("c", TensorProto.BOOL, [])
                    .SerializeToString())
    model = onnx.ModelProto(ir_version=8, opset_import=[helper.make_opsetid("", 17)])
    head: bytes = model.SerializeToString()  # protobuf ships no type hints
    return head + _field(7, graph)


def _truncated() -> bytes:
    data: bytes = good_model().SerializeToString()
    return data[: len(data) // 2]


def _random_bytes() -> bytes:
    return bytes(np.random.default_rng(7).integers(0, 256, 300, dtype=np.uint8).tobytes())


def _domain_model() -> onnx.ModelProto:
    model = _with_nodes(helper.make_node("FusedGemm", ["x", "w"], ["y"], name="fused",
                                         domain="com.microsoft"))
    model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return model


def _graphs_attr_model() -> onnx.ModelProto:
    """An If whose branch attribute is a list of graphs (GRAPHS), which no op takes."""
    branch = helper.make_graph([helper.make_node("Identity", ["x"], ["z"])], "b", [],
                               [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)])
    cond = numpy_helper.from_array(np.array(True), "cond")
    node = helper.make_node("If", ["cond"], ["y"], name="branch", else_branch=branch)
    node.attribute.append(helper.make_attribute("then_branch", [branch, branch]))
    return _model([node], [cond])


def _external_model(location: str, offset: int | None = 0, length: int | None = 16,
                    extra: dict[str, str] | None = None) -> onnx.ModelProto:
    t = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[4])
    t.data_location = TensorProto.EXTERNAL
    entries = {"location": location, "offset": offset, "length": length, **(extra or {})}
    for key, value in entries.items():
        if value is not None:
            t.external_data.add(key=key, value=str(value))
    return _with_init(t)


SECRET = np.arange(4, dtype=np.float32).tobytes()


def _external(location: Callable[[Path], str], setup: Callable[[Path], None] | None = None,
              **kw: object) -> Builder:
    """``folder/model/model.onnx`` with ``w`` in external data; ``folder/secret.bin`` outside."""

    def build(folder: Path) -> Path:
        model_dir = folder / "model"
        model_dir.mkdir()
        (folder / "secret.bin").write_bytes(SECRET)
        if setup is not None:
            setup(model_dir)
        path = model_dir / "model.onnx"
        path.write_bytes(_external_model(location(folder), **kw).SerializeToString())  # type: ignore[arg-type]
        return path

    return build


def _symlink_file(model_dir: Path) -> None:
    (model_dir / "w.bin").symlink_to(model_dir.parent / "secret.bin")


def _symlink_dir(model_dir: Path) -> None:
    (model_dir / "sub").symlink_to(model_dir.parent)


def _hardlink(model_dir: Path) -> None:
    os.link(model_dir.parent / "secret.bin", model_dir / "w.bin")


def _short_file(model_dir: Path) -> None:
    (model_dir / "w.bin").write_bytes(SECRET[:8])


def _full_file(model_dir: Path) -> None:
    (model_dir / "w.bin").write_bytes(SECRET)


def external_ok() -> Builder:
    """The external-data base case that loads: ``w`` in ``model/w.bin``."""
    return _external(lambda f: "w.bin", _full_file)


PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x02"

FORMAT_CASES = [
    BadCase("empty_file", _write(b""), r"^empty file$"),
    BadCase("truncated", _write(_truncated()), r"^corrupt or truncated ONNX protobuf"),
    BadCase("random_bytes", _write(_random_bytes()),
            r"^(corrupt or truncated ONNX protobuf|not an ONNX model)"),
    BadCase("png", _write(PNG + bytes(64)), r"^not an ONNX model: this is a PNG image$"),
    BadCase("torch_zip", _write(b"PK\x03\x04" + bytes(26) + b"archive/data.pkl" + bytes(32)),
            r"zip archive \(a PyTorch checkpoint"),
    BadCase("pickle", _write(b"\x80\x04\x95\x10\x00" + bytes(20)), r"a Python pickle"),
    BadCase("json", _write(b'{"graph": {"node": []}}\n'), r"JSON text"),
    BadCase("nesting_too_deep", _write(nested_ifs(200)), r"^nesting too deep"),
]

GRAPH_CASES = [
    BadCase("cycle", _write(_with_nodes(
        helper.make_node("Add", ["x", "b"], ["a"], name="first"),
        helper.make_node("Mul", ["a", "w"], ["b"], name="second"),
        helper.make_node("Mul", ["a", "x"], ["y"], name="out"))),
        r"cycle: '(first|second)' -> '(first|second)'"),
    BadCase("dangling_input", _write(_with_nodes(
        helper.make_node("Add", ["x", "w9"], ["y"], name="conv1"))),
        r"^node 'conv1' \(Add\): input 'w9' is not a graph input, an initializer or a node "
        r"output$"),
    BadCase("duplicate_output", _write(_with_nodes(
        helper.make_node("Add", ["x", "w"], ["y"], name="one"),
        helper.make_node("Mul", ["x", "w"], ["y"], name="two"))),
        r"tensor 'y': tensor is defined twice: by node 'one' and by node 'two'"),
    BadCase("duplicate_node_name", _write(_with_nodes(
        helper.make_node("Add", ["x", "w"], ["s"], name="same"),
        helper.make_node("Mul", ["s", "x"], ["y"], name="same"))),
        r"node 'same': two nodes have this name"),
    BadCase("unknown_op", _write(_with_nodes(
        helper.make_node("Mull", ["x", "w"], ["y"], name="scale"))),
        r"node 'scale' \(Mull\): unknown op Mull \(did you mean Mul\?\)"),
    BadCase("opset_too_new", _write(_with_nodes(
        helper.make_node("Add", ["x", "w"], ["y"], name="add"), opset=999)),
        r"opset 999 of domain 'ai.onnx'; gerules supports 1 to \d+"),
    BadCase("unknown_domain", _write(_domain_model()),
            r"node 'fused' \(com.microsoft.FusedGemm\): unsupported domain 'com.microsoft'"),
    BadCase("control_flow_nested", _write(nested_ifs(30)),
            r"node 'if\d+' \(If\): subgraphs nest more than 16 deep"),
    BadCase("graph_list_attribute", _write(_graphs_attr_model()),
            r"node 'branch' \(If\): attribute 'then_branch' holds a list of subgraphs"),
    BadCase("output_never_produced", _write(_model(
        [helper.make_node("Add", ["x", "w"], ["s"], name="add")],
        [numpy_helper.from_array(np.zeros(4, np.float32), "w")])),
        r"tensor 'y': graph output is never produced"),
]

TENSOR_CASES = [
    BadCase("dims_overflow", _write(_with_init(_raw_tensor([2**31, 2**31, 4], b""))),
            r"tensor 'w': shape \[2147483648, 2147483648, 4\] of float32 overflows int64"),
    BadCase("dims_over_budget", _write(_with_init(_raw_tensor([2**20, 2**20], b""))),
            r"tensor 'w': shape \[1048576, 1048576\] of float32 needs 4398046511104 bytes, "
            r"over the tensor budget", exit_code=3),
    BadCase("rank_over_64", _write(_with_init(_raw_tensor([1] * 65, bytes(4)))),
            r"tensor 'w': rank 65 is over the supported 64"),
    BadCase("negative_dim", _write(_with_init(_raw_tensor([-4], b""))),
            r"tensor 'w': negative dim -4"),
    BadCase("raw_data_short", _write(_with_init(_raw_tensor([4], bytes(12)))),
            r"tensor 'w': raw data has 12 bytes but its shape and type need 16$"),
    BadCase("raw_data_long", _write(_with_init(_raw_tensor([4], bytes(20)))),
            r"tensor 'w': raw data has 20 bytes but its shape and type need 16$"),
    BadCase("unsupported_dtype", _write(_with_init(TensorProto(
        name="w", data_type=TensorProto.COMPLEX64, dims=[4], raw_data=bytes(32)))),
        r"tensor 'w': element type complex64 is not supported"),
]

EXTERNAL_CASES = [
    BadCase("external_parent", _external(lambda f: "../secret.bin"),
            r"tensor 'w': external data location '\.\./secret\.bin' leaves the model's folder"),
    BadCase("external_nested_parent", _external(lambda f: "sub/../../secret.bin"),
            r"tensor 'w': .*leaves the model's folder"),
    BadCase("external_absolute", _external(lambda f: str(f / "secret.bin")),
            r"tensor 'w': external data location '.*' is an absolute path"),
    BadCase("external_symlink_file", _external(lambda f: "w.bin", _symlink_file),
            r"tensor 'w': external data location 'w.bin': 'w.bin' is a symlink"),
    BadCase("external_symlink_dir", _external(lambda f: "sub/secret.bin", _symlink_dir),
            r"tensor 'w': external data location 'sub/secret.bin': 'sub' is a symlink"),
    BadCase("external_hardlink", _external(lambda f: "w.bin", _hardlink),
            r"tensor 'w': external data 'w.bin' has 2 hard links"),
    BadCase("external_past_end", _external(lambda f: "w.bin", _short_file),
            r"tensor 'w': external data offset 0 \+ length 16 is past the end of 'w.bin' "
            r"\(8 bytes\)"),
    BadCase("external_offset_past_end", _external(lambda f: "w.bin", _full_file, offset=8),
            r"tensor 'w': external data offset 8 \+ length 16 is past the end"),
    BadCase("external_negative_offset", _external(lambda f: "w.bin", _full_file, offset=-8),
            r"tensor 'w': external data offset '-8' is not an integer >= 0"),
    BadCase("external_wrong_length", _external(lambda f: "w.bin", _full_file, length=12),
            r"tensor 'w': external data length is 12 bytes but its shape and type need 16"),
    BadCase("external_unknown_key", _external(lambda f: "w.bin", _full_file,
                                              extra={"basepath": "/etc"}),
            r"tensor 'w': unknown external data key 'basepath'"),
    BadCase("external_missing", _external(lambda f: "nope.bin"),
            r"tensor 'w': external data file 'nope.bin' does not exist"),
]

CASES: list[BadCase] = FORMAT_CASES + GRAPH_CASES + TENSOR_CASES + EXTERNAL_CASES
