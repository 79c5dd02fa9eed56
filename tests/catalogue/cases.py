"""The bad-input catalogue: one ``Case`` per bad model, rule file, ``.om`` file or misuse.

IDs follow docs/research's catalogue (M model, R rules, C compiled file, X command line). Each
case prepares its files in an empty folder, runs one command line there (paths relative to
it) and states the exit code and a regex for the message after ``ge-rewrite: error: `` (for
``rules`` commands: the first line, ``file:line:col: message``, which is followed by the
source line and a caret).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

from gerules.build import build_om
from gerules.ir.graph import Graph, Node, Value
from gerules.om.format import HEADER, Kind, pack_header, parse_header, parse_sections
from gerules.testing.bad_models import CASES as BAD_MODELS
from gerules.testing.bad_models import good_model
from gerules.testing.mutate import om_sections, pack_om

Setup = Callable[[Path], None]


@dataclass(frozen=True)
class Case:
    id: str
    argv: tuple[str, ...]
    setup: Setup
    code: int
    message: str  # regex searched in the error line (after "ge-rewrite: error: ")
    rules_format: bool = False  # `rules` reports: "file:line:col: message" + context lines
    permissions: bool = False  # file permissions must hold even for root (see the driver)
    tags: tuple[str, ...] = field(default=())  # "closed-stdout", "full-stdout"
    env: tuple[tuple[str, str], ...] = ()  # "{folder}" in a value is the case's folder
    absent: tuple[str, ...] = ()  # text that must appear in neither stdout nor stderr
    needs: str | None = None  # "torch", "landlock", "mknod": what the case cannot do without
    timeout: float = 60.0  # a case that hangs is killed (and fails) after this long


# ----------------------------------------------------------------------------- setups


def steps(*setups: Setup) -> Setup:
    def run(folder: Path) -> None:
        for s in setups:
            s(folder)

    return run


def write(name: str, data: bytes | str | onnx.ModelProto) -> Setup:
    def run(folder: Path) -> None:
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(data, onnx.ModelProto):
            path.write_bytes(data.SerializeToString())
        elif isinstance(data, str):
            path.write_text(data, encoding="utf-8")
        else:
            path.write_bytes(data)

    return run


GOOD = write("model.onnx", good_model())


def bad_model(name: str) -> Setup:
    """A case of ``gerules.testing.bad_models`` (``model.onnx``, or ``model/model.onnx``)."""
    case = next(c for c in BAD_MODELS if c.name == name)

    def run(folder: Path) -> None:
        case.build(folder)

    return run


def mkdir(name: str, mode: int = 0o755) -> Setup:
    def run(folder: Path) -> None:
        (folder / name).mkdir()
        os.chmod(folder / name, mode)

    return run


def chmod(name: str, mode: int) -> Setup:
    def run(folder: Path) -> None:
        os.chmod(folder / name, mode)

    return run


def two_branches() -> Graph:
    """``y = Relu(x) + Neg(x)``: ``a`` and ``b`` are alive at the same time."""
    nodes = [Node("Relu", ("x",), ("a",), name="relu"), Node("Neg", ("x",), ("b",), name="neg"),
             Node("Add", ("a", "b"), ("y",), name="add")]
    return Graph(tuple(nodes), (Value.of("x", "float32", (4, 16)),),
                 (Value.of("y", "float32", (4, 16)),))


def om(name: str = "model.om", edit: Callable[[bytes], bytes] | None = None) -> Setup:
    """A compiled ``.om`` of ``two_branches``, optionally edited."""

    def run(folder: Path) -> None:
        path = build_om(two_branches(), folder / name).path
        if edit is not None:
            path.write_bytes(edit(path.read_bytes()))

    return run


# ----------------------------------------------------------------------------- .om edits


def flip(where: Callable[[bytes], int], bit: int = 0) -> Callable[[bytes], bytes]:
    def run(data: bytes) -> bytes:
        out = bytearray(data)
        out[where(data)] ^= 1 << bit
        return bytes(out)

    return run


def section_offset(kind: Kind) -> Callable[[bytes], int]:
    def run(data: bytes) -> int:
        header = parse_header(data[:HEADER.size], len(data), "x")
        sections = parse_sections(header, data[:header.header_size], len(data), "x")
        return next(s.offset for s in sections if s.kind == kind) + 3

    return run


def table_edit(edit: Callable[[list], list]) -> Callable[[bytes], bytes]:
    """Tamper with the section table and recompute the header checksum (C5)."""

    def run(data: bytes) -> bytes:
        header = parse_header(data[:HEADER.size], len(data), "x")
        sections = parse_sections(header, data[:header.header_size], len(data), "x")
        head = pack_header(edit(list(sections)), len(data))
        return head + data[len(head):]

    return run


def model_def(edit: Callable[[dict], object]) -> Callable[[bytes], bytes]:
    """Edit MODEL_DEF's JSON and re-pack with valid checksums."""

    def run(data: bytes) -> bytes:
        bodies = om_sections(data)
        k = next(i for i, (kind, _) in enumerate(bodies) if kind == Kind.MODEL_DEF)
        doc = json.loads(bodies[k][1])
        doc = edit(doc) or doc
        body = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
        bodies[k] = (Kind.MODEL_DEF, body)
        return pack_om(bodies)

    return run


def _overlap(doc: dict) -> None:
    tensors = doc["variants"][0]["tensors"]
    for t in tensors:
        t["offset"] = 0


def _node_name(doc: dict) -> None:
    doc["graph"]["nodes"][0]["name"] = "../../etc/passwd"


def _huge_dim(doc: dict) -> None:
    doc["graph"]["inputs"][0]["shape"] = [2**62, 2**62]


def _unknown_op(doc: dict) -> None:
    doc["graph"]["nodes"][0]["op"] = "Rellu"


def _newer_major(data: bytes) -> bytes:
    """Format version 9.0, with the header checksum recomputed."""
    size = parse_header(data[:HEADER.size], len(data), "x").header_size
    head = bytearray(data[:size])
    head[8:10] = (9).to_bytes(2, "little")
    head[32:64] = bytes(32)
    head[32:64] = hashlib.sha256(bytes(head)).digest()
    return bytes(head) + data[size:]


# ----------------------------------------------------------------------------- rule texts

RULE_OK = "ruleset r\n\n@exact\nrule relu_relu: Relu(Relu(x)) => Relu(x)\n"
RULES = {
    "syntax": "ruleset r\nrule a: Relu(x => x\n",
    "eof": "ruleset r\nrule a: Relu(",
    "unknown_op": "ruleset r\nrule a: Cojv(x, w) => x\n",
    "unbound": "ruleset r\nrule a: Relu(x) => Add(x, y)\n",
    "arity": "ruleset r\nrule a: Relu(x, y) => x\n",
    "attribute": "ruleset r\nrule a: Transpose(x) {prem = p} => x\n",
    "duplicate": RULE_OK + "@exact\nrule relu_relu: Relu(x) => x\n",
    "unsound_shape": "ruleset r\nrule a: MatMul(a, b) => a\n",
    "unknown_ruleset": "schedule O1: saturate(nothing_here)\n",
    "bad_decorator": "ruleset r\n@exactly\nrule a: Relu(Relu(x)) => Relu(x)\n",
}


def rules_case(id: str, key: str, message: str) -> Case:
    return Case(id, ("rules", "check", "bad.ger"), write("bad.ger", RULES[key]), 1,
                rf"^bad\.ger:\d+:\d+: {message}", rules_format=True)


def _deep_rule() -> str:
    return "ruleset r\nrule a: " + "Relu(" * 10_000 + "x" + ")" * 10_000 + " => x\n"


def _big_rules() -> str:
    body = "".join(f"@exact\nrule r{i}: Relu(Relu(x)) => Relu(x)\n" for i in range(60_000))
    return "ruleset r\n" + body


# ----------------------------------------------------------------------------- models


def _memory_bomb() -> onnx.ModelProto:
    shape = helper.make_tensor("shape", TensorProto.INT64, [2], [1 << 20, 1 << 20])
    node = helper.make_node("ConstantOfShape", ["shape"], ["y"], name="bomb")
    graph = helper.make_graph([node], "bomb", [], [helper.make_tensor_value_info(
        "y", TensorProto.FLOAT, None)], [shape])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def _add_mismatch() -> onnx.ModelProto:
    w = helper.make_tensor("w", TensorProto.FLOAT, [5], np.zeros(5, np.float32))
    node = helper.make_node("Add", ["x", "w"], ["y"], name="add45")
    graph = helper.make_graph([node], "mismatch", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [4])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, None)], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def _no_outputs() -> onnx.ModelProto:
    model = good_model()
    del model.graph.output[:]
    return model


MODEL_CASES = [
    Case("M1-compile-empty", ("compile", "model.onnx", "--output", "out"),
         bad_model("empty_file"), 1, r"^model\.onnx: empty file$"),
    Case("M1-optimize-empty", ("optimize", "model.onnx", "-o", "out.onnx"),
         bad_model("empty_file"), 1, r"^model\.onnx: empty file$"),
    Case("M2-compile-truncated", ("compile", "model.onnx", "--output", "out"),
         bad_model("truncated"), 1, r"^model\.onnx: corrupt or truncated ONNX protobuf"),
    Case("M3-compile-png", ("compile", "model.onnx", "--output", "out"), bad_model("png"), 1,
         r"^model\.onnx: not an ONNX model: this is a PNG image$"),
    Case("M3-optimize-pickle", ("optimize", "model.onnx", "-o", "out.onnx"),
         bad_model("pickle"), 1, r"^model\.onnx: .*a Python pickle"),
    Case("M4-compile-nesting", ("compile", "model.onnx", "--output", "out"),
         bad_model("nesting_too_deep"), 1, r"^model\.onnx: nesting too deep"),
    Case("M5-compile-cycle", ("compile", "model.onnx", "--output", "out"), bad_model("cycle"),
         1, r"^model\.onnx: .*cycle: '(first|second)' -> '(first|second)'"),
    Case("M6-optimize-dangling", ("optimize", "model.onnx", "-o", "out.onnx"),
         bad_model("dangling_input"), 1,
         r"^model\.onnx: node 'conv1' \(Add\): input 'w9' is not a graph input"),
    Case("M7-compile-duplicate-output", ("compile", "model.onnx", "--output", "out"),
         bad_model("duplicate_output"), 1, r"^model\.onnx: tensor 'y': tensor is defined twice"),
    Case("M8-compile-never-produced", ("compile", "model.onnx", "--output", "out"),
         bad_model("output_never_produced"), 1,
         r"^model\.onnx: tensor 'y': graph output is never produced$"),
    Case("M9-optimize-unknown-op", ("optimize", "model.onnx", "-o", "out.onnx"),
         bad_model("unknown_op"), 1,
         r"^model\.onnx: node 'scale' \(Mull\): unknown op Mull \(did you mean Mul\?\)$"),
    Case("M10-compile-opset-999", ("compile", "model.onnx", "--output", "out"),
         bad_model("opset_too_new"), 1, r"^model\.onnx: .*opset 999"),
    Case("M12-compile-shape-mismatch", ("compile", "model.onnx", "--output", "out"),
         write("model.onnx", _add_mismatch()), 1,
         r"^model\.onnx: node 'add45' \(Add\): .*\[4\].*\[5\]"),
    Case("M13-compile-dims-overflow", ("compile", "model.onnx", "--output", "out"),
         bad_model("dims_overflow"), 1, r"^model\.onnx: tensor 'w': .*overflows"),
    Case("M14-compile-raw-data-long", ("compile", "model.onnx", "--output", "out"),
         bad_model("raw_data_long"), 1,
         r"^model\.onnx: tensor 'w': raw data has 20 bytes but its shape and type need 16$"),
    Case("M15-compile-memory-bomb", ("compile", "model.onnx", "--output", "out"),
         write("model.onnx", _memory_bomb()), 3,
         r"^model\.onnx: node 'bomb' \(ConstantOfShape\): tensor 'y': "
         r"float32\[1048576,1048576\] needs 4398046511104 bytes, over the tensor budget"),
    Case("M15-run-memory-bomb", ("run", "model.onnx"), write("model.onnx", _memory_bomb()), 3,
         r"^model\.onnx: node 'bomb' \(ConstantOfShape\): tensor 'y': .* needs "
         r"4398046511104 bytes, over the tensor budget of 4294967296 bytes \(raise it with "
         r"--max_tensor_bytes\)$"),
    Case("M16-compile-external-parent", ("compile", "model/model.onnx", "--output", "out"),
         bad_model("external_parent"), 1,
         r"^model/model\.onnx: tensor 'w': external data location '\.\./secret\.bin' leaves"),
    Case("M16-optimize-external-symlink", ("optimize", "model/model.onnx", "-o", "out.onnx"),
         bad_model("external_symlink_dir"), 1,
         r"^model/model\.onnx: tensor 'w': .*'sub' is a symlink"),
    Case("M19-compile-no-outputs", ("compile", "model.onnx", "--output", "out"),
         write("model.onnx", _no_outputs()), 1, r"^model\.onnx: .*no outputs"),
]

RULE_CASES = [
    rules_case("R1-syntax", "syntax", r"unexpected '.*'; expected "),
    rules_case("R2-eof", "eof", r"(unexpected end of file|end of file)"),
    Case("R2-non-utf8", ("rules", "check", "bad.ger"),
         write("bad.ger", b"ruleset r\nrule a: Relu(x) => x # \xff\xfe\n"), 1,
         r"^bad\.ger:\d+:\d+: .*UTF-8", rules_format=True),
    rules_case("R3-unknown-op", "unknown_op", r"unknown op Cojv \(did you mean Conv\?\)"),
    rules_case("R4-unbound", "unbound", r".*'y'"),
    rules_case("R5-arity", "arity", r".*Relu.*(takes|input)"),
    rules_case("R5-attribute", "attribute", r".*'prem'.*\(did you mean perm\?\)"),
    rules_case("R6-duplicate", "duplicate", r".*relu_relu"),
    rules_case("R8-unsound-shape", "unsound_shape", r".*(shape|dtype)"),
    rules_case("R-unknown-ruleset", "unknown_ruleset", r"unknown ruleset 'nothing_here'"),
    rules_case("R-unknown-decorator", "bad_decorator", r".*exactly"),
    Case("R11-deep-nesting", ("rules", "check", "bad.ger"), write("bad.ger", _deep_rule()), 1,
         r"^bad\.ger:\d+:\d+: .*(deep|nesting)", rules_format=True),
    Case("R11-too-big", ("rules", "check", "bad.ger"), write("bad.ger", _big_rules()), 1,
         r"^bad\.ger(:\d+:\d+)?: .*(MB|bytes|large)", rules_format=True),
    Case("R-list-bad-file", ("rules", "list", "bad.ger"), write("bad.ger", RULES["unknown_op"]),
         1, r"^bad\.ger:\d+:\d+: unknown op Cojv", rules_format=True),
    Case("R-missing-file", ("rules", "check", "nope.ger"), steps(), 2,
         r"^nope\.ger: no such file or folder$"),
    Case("R-empty-folder", ("rules", "check", "empty"), mkdir("empty"), 2,
         r"^empty: no \.ger files in this folder$"),
]

OM_CASES = [
    Case("C1-inspect-empty", ("inspect", "model.om"), write("model.om", b""), 1,
         r"^model\.om: empty file"),
    Case("C1-run-truncated", ("run", "model.om"), om(edit=lambda d: d[:len(d) // 2]), 1,
         r"^model\.om: truncated"),
    Case("C2-inspect-onnx-file", ("inspect", "model.onnx"), GOOD, 1,
         r"^model\.onnx: not a gerules \.om file"),
    Case("C2-inspect-cann-om", ("inspect", "model.om"),
         write("model.om", b"IMOD" + bytes(200)), 1, r"^model\.om: a CANN atc \.om file"),
    Case("C3-inspect-newer-major", ("inspect", "model.om"), om(edit=_newer_major), 1,
         r"^model\.om: format version 9\.0 is newer than this gerules reads \(1\.0\)"),
    Case("C4-inspect-header-flip", ("inspect", "model.om"), om(edit=flip(lambda d: 40)), 1,
         r"^model\.om: header: checksum mismatch"),
    Case("C4-run-weights-flip", ("run", "model.om"),
         om(edit=flip(section_offset(Kind.MODEL_DEF))), 1, r"^model\.om: .*MODEL_DEF.*checksum"),
    Case("C5-inspect-huge-length", ("inspect", "model.om"),
         om(edit=table_edit(lambda s: [s[0].__class__(x.kind, x.offset, 2**63, x.digest)
                                       if x.kind == Kind.WEIGHTS else x for x in s])), 1,
         r"^model\.om: section WEIGHTS: offset \d+ and length 9223372036854775808 do not fit"),
    Case("C6-inspect-huge-dims", ("inspect", "model.om"), om(edit=model_def(_huge_dim)), 1,
         r"^model\.om: section MODEL_DEF: .*"),
    Case("C6-run-unknown-op", ("run", "model.om"), om(edit=model_def(_unknown_op)), 1,
         r"^model\.om: .*Rellu"),
    Case("C7-inspect-path-name", ("inspect", "model.om"), om(edit=model_def(_node_name)), 1,
         r"^model\.om: .*'\.\./\.\./etc/passwd'"),
    Case("C8-run-overlapping-plan", ("run", "model.om"), om(edit=model_def(_overlap)), 1,
         r"^model\.om: .*(overlap|live)"),
    Case("C-inspect-bad-json", ("inspect", "model.om"),
         om(edit=model_def(lambda d: b"{not json")), 1,
         r"^model\.om: section MODEL_DEF at 1:2: not valid JSON"),
]

MISUSE_CASES = [
    Case("X1-unknown-flag", ("compile", "model.onnx", "--output", "out", "--frobnicate"), GOOD,
         2, r"unrecognized arguments: --frobnicate"),
    Case("X1-missing-argument", ("compile", "model.onnx"), GOOD, 2,
         r"(the following arguments are required: --output|--output NAME is required)"),
    Case("X1-unknown-command", ("frobnicate",), steps(), 2, r"invalid choice: 'frobnicate'"),
    Case("X1-bad-number", ("run", "model.onnx", "--max-tensor-bytes", "-1"), GOOD, 2,
         r"--max-tensor-bytes: .*must be > 0"),
    Case("X1-bad-choice", ("compile", "model.onnx", "--output", "out", "--opt_level", "O9"),
         GOOD, 2, r"invalid choice: 'O9'"),
    Case("X1-bad-input-shape", ("compile", "model.onnx", "--output", "out", "--input_shape",
                                "x:a,b"), GOOD, 2, r"--input.shape"),
    Case("X2-missing-input", ("compile", "nope.onnx", "--output", "out"), steps(), 1,
         r"^nope\.onnx: no such file"),
    Case("X2-input-is-a-folder", ("optimize", "folder.onnx", "-o", "out.onnx"),
         mkdir("folder.onnx"), 1, r"^folder\.onnx: is a folder"),
    Case("X2-unreadable-input", ("compile", "model.onnx", "--output", "out"),
         steps(GOOD, chmod("model.onnx", 0)), 1, r"^model\.onnx: .*(permission|Permission)",
         permissions=True),
    Case("X2-run-unreadable-om", ("run", "model.om"), steps(om(), chmod("model.om", 0)), 1,
         r"^model\.om: .*(permission|Permission)", permissions=True),
    Case("X3-output-in-missing-folder", ("compile", "model.onnx", "--output", "no/such/out"),
         GOOD, 2, r"^no/such/out\.om: output folder 'no/such' does not exist$"),
    Case("X3-output-equals-input", ("optimize", "model.onnx", "-o", "model.onnx"), GOOD, 2,
         r"^model\.onnx: output would overwrite the input$"),
    Case("X3-output-is-a-folder", ("optimize", "model.onnx", "-o", "out.onnx"),
         steps(GOOD, mkdir("out.onnx")), 2, r"^out\.onnx: output is a folder$"),
    Case("X3-compile-output-is-a-folder", ("compile", "model.onnx", "--output", "out"),
         steps(GOOD, mkdir("out.om")), 2, r"^out\.om: output is a folder$"),
    Case("X3-read-only-output-folder", ("compile", "model.onnx", "--output", "ro/out"),
         steps(GOOD, mkdir("ro", 0o555)), 1, r"ro/.*(permission|Permission|read-only)",
         permissions=True),
    Case("X3-run-output-dir-is-a-file", ("run", "model.onnx", "--output-dir", "model.onnx"),
         GOOD, 2, r"model\.onnx: .*(not a folder|exists)"),
    Case("X1-partitions-out-of-range", ("compile", "model.onnx", "--output", "out",
                                         "--partitions", "99"), GOOD, 2,
         r"--partitions must be between 1 and 64, got 99"),
    Case("X1-bad-device-memory", ("compile", "model.onnx", "--output", "out", "--partition_by",
                                  "memory", "--device_memory", "lots"), GOOD, 2,
         r"--device_memory: expected a size like 8G"),
    Case("X1-devices-on-a-plain-om", ("run", "model.om", "--devices", "2"), om(), 2,
         r"^model\.om: --devices 2: this \.om is not pipelined; compile it with --partitions 2"),
    Case("X4-op-over-device-memory", ("compile", "model.onnx", "--output", "out",
                                      "--partition_by", "memory", "--device_memory", "64"),
         GOOD, 3, r"node '[^']+' \([A-Za-z.]+\): this op alone needs .* over the device memory "
         r"of 64 B"),
    Case("X5-stdout-closed", ("inspect", "model.om"), om(), 141, r"", tags=("closed-stdout",)),
]

# ----------------------------------------------------------------------------- frontends


def caffe_pair(edit: Callable[[str], str] = lambda t: t, weights: bytes | None = None) -> Setup:
    """``net.prototxt`` + ``net.caffemodel`` (the LeNet test net), the text edited."""
    def run(folder: Path) -> None:
        from gerules.testing.caffe import lenet

        net = lenet()
        (folder / "net.prototxt").write_text(edit(net.text()), encoding="utf-8")
        data = net.weights.SerializeToString() if weights is None else weights
        (folder / "net.caffemodel").write_bytes(data)

    return run


CAFFE = ("--model=net.prototxt", "--weight=net.caffemodel", "--framework=0", "--output=out")
FRONTEND_CASES = [
    Case("F1-caffe-unsupported-layer", CAFFE,
         caffe_pair(lambda t: t.replace('type: "Softmax"', 'type: "LRN"')), 1,
         r"^net\.prototxt: node 'prob' \(LRN\): layer type 'LRN' is not supported$"),
    Case("F1-caffe-unknown-field", CAFFE,
         caffe_pair(lambda t: t.replace("num_output: 20", "num_outputs: 20")), 1,
         r"^net\.prototxt:\d+:\d+: .*no field named \"num_outputs\"\.?$"),
    Case("F1-caffe-weights-do-not-fit", CAFFE,
         caffe_pair(lambda t: t.replace("num_output: 20", "num_output: 21")), 1,
         r"^net\.prototxt: node 'conv1' \(Convolution\): weight blob 0 \(weights\)"),
    Case("F2-caffe-weights-corrupt", CAFFE, caffe_pair(weights=b"\x0a\xff\xff\xff\x0f"), 1,
         r"^net\.caffemodel: not a Caffe \.caffemodel: corrupt or truncated"),
    Case("F2-caffe-model-swapped", ("--model=net.caffemodel", "--weight=net.prototxt",
                                    "--framework=0", "--output=out"), caffe_pair(), 1,
         r"^net\.caffemodel: not a Caffe prototxt: not UTF-8 text"),
    Case("F2-mindir-garbage", ("--model=m.mindir", "--framework=1", "--output=out"),
         write("m.mindir", b"\x0a\xff\xff\xff\x0f"), 1,
         r"^m\.mindir: not a MindIR file: corrupt or truncated"),
    Case("F3-weight-without-caffe", ("--model=model.onnx", "--weight=w.caffemodel",
                                     "--output=out"), GOOD, 2,
         r"--weight is the Caffe \.caffemodel; it needs --framework=0"),
    Case("F3-unknown-framework", ("--model=model.onnx", "--framework=7", "--output=out"),
         GOOD, 2, r"--framework: unknown value '7' \(0 = Caffe, 1 = MindSpore MindIR"),
]

CASES: list[Case] = MODEL_CASES + RULE_CASES + OM_CASES + MISUSE_CASES + FRONTEND_CASES
