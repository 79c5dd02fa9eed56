"""The catalogue's hostile inputs: archives that run code, special files, budgets, names.

Each case of issue 14's adversarial trial, and its relatives, as a ``cases.Case``: one line,
the documented exit code, no traceback, nothing written or changed in the case's folder (a
hostile archive that ran would leave ``pwned`` there; a replaced symlink or FIFO shows in the
folder's snapshot; secrets named in ``absent`` must not be echoed).

IDs: A archives, B the grammar cache, D special output files, E special input files
(hangs, unbounded reads), F budgets, G partial outputs, H inputs that used to be internal
errors, I meaning and names, J encodings.
"""

from __future__ import annotations

import os
import pickle
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
from archives import (
    MARKER,
    Touch,
    aot_library,
    bare_pickle,
    deflate_bomb,
    duplicate_weight,
    edited_pt2,
    good_pt2,
    legacy_fallback,
    module_pickle,
    opaque_constant,
    outside_folder,
    pickled_weight,
    state_dict,
    sympify_code,
    torchscript_writer,
    unknown_entry,
)
from cases import GOOD, Case, Setup, mkdir, om, steps, write
from onnx import TensorProto, helper, numpy_helper

from gerules.build import build_om
from gerules.ir.graph import Graph, Node, Value

ARCHIVE = ("compile", "model.pt2", "--output", "out", "--input_shape", "x:1,3,8,8")
TS = ("compile", "model.pt", "--output", "out", "--input_shape", "x:1,3,8,8")
SECRET = "TOP-SECRET-LINE"


# ----------------------------------------------------------------------------- setups


def fifo(name: str) -> Setup:
    def run(folder: Path) -> None:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        os.mkfifo(folder / name)

    return run


def link(name: str, target: str) -> Setup:
    def run(folder: Path) -> None:
        os.symlink(target, folder / name)

    return run


def device(name: str) -> Setup:
    """A character device node (a copy of /dev/null; root only)."""

    def run(folder: Path) -> None:
        os.mknod(folder / name, 0o20600, os.makedev(1, 3))

    return run


def model(build: Callable[[], onnx.ModelProto], name: str = "model.onnx") -> Setup:
    def run(folder: Path) -> None:
        (folder / name).write_bytes(build().SerializeToString())

    return run


def _model(nodes: list, inputs: list, outputs: list, inits: list | None = None
           ) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs, inits or [])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def _vi(name: str, dims: list | None, elem: int = TensorProto.FLOAT) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem, dims)


def sparse_external(count: int) -> Setup:
    """``count`` float32 initializers of 1 GiB each, all on one sparse 1 GiB file."""

    def run(folder: Path) -> None:
        with open(folder / "weights.bin", "wb") as f:
            f.truncate(1 << 30)
        inits, nodes, last = [], [], "x"
        for k in range(count):
            t = TensorProto(name=f"w{k}", data_type=TensorProto.FLOAT, dims=[1 << 28])
            t.data_location = TensorProto.EXTERNAL
            for key, value in (("location", "weights.bin"), ("offset", "0"),
                               ("length", str(1 << 30))):
                t.external_data.add(key=key, value=value)
            inits.append(t)
            nodes.append(helper.make_node("Add", [last, f"w{k}"], [f"y{k}"], name=f"add{k}"))
            last = f"y{k}"
        m = _model(nodes, [_vi("x", [1 << 28])], [_vi(last, [1 << 28])], inits)
        (folder / "model.onnx").write_bytes(m.SerializeToString())

    return run


def _chain(n: int) -> onnx.ModelProto:
    nodes = [helper.make_node("Relu", [f"t{k}"], [f"t{k + 1}"], name=f"r{k}") for k in range(n)]
    return _model(nodes, [_vi("t0", [1])], [_vi(f"t{n}", [1])])


def _split(n: int) -> onnx.ModelProto:
    sizes = numpy_helper.from_array(np.ones(n, np.int64), "s")
    node = helper.make_node("Split", ["x", "s"], [f"y{k}" for k in range(n)], name="split")
    return _model([node], [_vi("x", [n])], [_vi(f"y{k}", None) for k in range(n)], [sizes])


def _fed_constant_of_shape() -> onnx.ModelProto:
    node = helper.make_node("ConstantOfShape", ["shape"], ["y"], name="fill")
    return _model([node], [_vi("shape", [2], TensorProto.INT64)], [_vi("y", None)])


def _tile_om(folder: Path) -> None:
    """A .om of ``Tile(x, repeats)`` whose repeats weight is then set to 10^8 (checksums fixed
    up): the kernel would allocate gigabytes before any shape check."""
    from cases import model_def

    graph = Graph((Node("Tile", ("x", "r"), ("y",), name="tile"),),
                  (Value.of("x", "float32", (4, 4)),), (Value.of("y", "float32", (8, 4)),),
                  initializers={"r": np.array([2, 1], np.int64)})
    path = build_om(graph, folder / "model.om").path
    data = path.read_bytes()
    weights = np.array([2, 1], np.int64).tobytes()
    at = data.rfind(weights)
    tampered = data[:at] + np.array([10**8, 10**4], np.int64).tobytes() + data[at + 16:]
    path.write_bytes(model_def(lambda doc: None)(tampered))  # re-packed: checksums valid


def _default_mismatch() -> onnx.ModelProto:
    w = numpy_helper.from_array(np.zeros(7, np.float32), "x")
    node = helper.make_node("Relu", ["x"], ["y"], name="relu")
    return _model([node], [_vi("x", [4])], [_vi("y", [4])], [w])


def _named(name: str) -> onnx.ModelProto:
    """An unknown op in a node whose name holds terminal escapes."""
    node = helper.make_node("Mull", ["x", "x"], ["y"], name=name)
    return _model([node], [_vi("x", [2])], [_vi("y", [2])])


def _two_outputs() -> onnx.ModelProto:
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="r"),
             helper.make_node("Neg", ["x"], ["b"], name="n")]
    return _model(nodes, [_vi("x", [2])], [_vi("a", [2]), _vi("b", [2])])


def npy_header(header: dict, body: bytes = b"") -> bytes:
    text = repr(header).encode()
    text += b" " * ((64 - (10 + len(text) + 1) % 64) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text + body


def lark_cache_plant(folder: Path) -> None:
    """Lark's own pickle cache in the case's temp folder, replaced by a pickle that runs code
    (what anyone sharing /tmp could plant for every user of gerules before this issue)."""
    from importlib.resources import files

    import lark

    grammar = files("gerules.grammar").joinpath("ger.lark").read_text(encoding="utf-8")
    old = tempfile.tempdir
    tempfile.tempdir = str(folder)
    try:
        lark.Lark(grammar, parser="lalr", lexer="contextual", propagate_positions=True,
                  maybe_placeholders=True, cache=True)
    finally:
        tempfile.tempdir = old
    (cache,) = folder.glob(".lark_cache*")
    head = cache.read_bytes().split(b"\n", 1)[0]
    cache.write_bytes(head + b"\n" + pickle.dumps(Touch(folder / MARKER)))


def deep(text_open: str, text_close: str, depth: int = 100_000) -> str:
    return text_open * depth + text_close * depth


RULES_BAD = "ruleset r\nrule a: Relu(x => x\n"
BIG_NUMBER = "9" * 5000
TMP = (("TMPDIR", "{folder}"),)

# ----------------------------------------------------------------------------- cases

def pt2_case(id: str, edit: Callable, message: str) -> Case:
    """The good torch.export archive with ``edit`` applied: refused, exit 1."""
    return Case(id, ARCHIVE, edited_pt2(edit), 1, rf"^model\.pt2: {message}", needs="torch")


ARCHIVE_CASES = [
    pt2_case("A1-pt2-pickled-weight", pickled_weight, r".*weight_0: .*data\.pkl is a pickle "
             r"that could run code when loaded: it imports __builtin__\.getattr"),
    pt2_case("A2-pt2-duplicate-entry", duplicate_weight, r"entry '.*/weight_0' appears twice"),
    pt2_case("A3-pt2-sympify-code", sympify_code,
             r".*model\.json: the symbolic expression .* is not shape arithmetic"),
    pt2_case("A4-pt2-legacy-fallback", legacy_fallback,
             r"entry 'version' has a name no archive of torch's has"),
    pt2_case("A5-pt2-opaque-object", opaque_constant,
             r"entry '.*opaque_obj_0' is not part of a torch\.export archive"),
    pt2_case("A6-pt2-aot-library", aot_library,
             r"entry '.*model\.so' is compiled code \(AOTInductor\)"),
    pt2_case("A7-pt2-unknown-entry", unknown_entry,
             r"entry '.*evil\.py' is not part of a torch\.export archive"),
    pt2_case("A8-pt2-name-outside", outside_folder,
             r"entry '\.\./escape\.txt' has a name no archive"),
    Case("A9-torchscript-refused", TS, torchscript_writer, 1,
         r"^model\.pt: a TorchScript archive runs its own code when it is loaded .* refused "
         r"without --trust_archive", needs="torch"),
    Case("A10-torchscript-trusted-sandboxed", (*TS, "--trust_archive"), torchscript_writer, 1,
         r"^model\.pt: (cannot load the archive|torch\.onnx\.export failed): ",
         needs="landlock", timeout=300),
    Case("A11-module-pickle", TS, module_pickle, 1,
         r"^model\.pt: a torch\.save pickle that would run code when loaded \(it imports ",
         needs="torch"),
    Case("A12-state-dict", TS, state_dict, 1,
         r"^model\.pt: a torch\.save file of weights only \(a state dict\): it holds no model",
         needs="torch"),
    Case("A13-bare-pickle", TS, bare_pickle, 1,
         r"^model\.pt: a legacy torch\.save file \(a bare pickle, not a zip\)", needs="torch"),
    Case("A14-deflate-bomb", ARCHIVE, deflate_bomb, 3,
         r"^model\.pt2: entry '.*weight_0' needs 3999268864 bytes, over the archive budget of "
         r"2147483648 bytes \(raise it with --max_archive_bytes\)$", needs="torch"),
    Case("A15-archive-budget", (*ARCHIVE, "--max_archive_bytes", "1000"), good_pt2, 3,
         r"^model\.pt2: the archive needs \d+ bytes, over the archive budget of 1000 bytes",
         needs="torch"),
    Case("A16-archive-not-a-zip", ARCHIVE, write("model.pt2", "just text"), 1,
         r"^model\.pt2: not a zip archive"),
    Case("A17-archive-fifo", ARCHIVE, fifo("model.pt2"), 1,
         r"^model\.pt2: is a named pipe \(FIFO\), not a PyTorch archive$", timeout=20),
    Case("A18-archive-prepended-bytes", ARCHIVE,
         lambda f: (f / "model.pt2").write_bytes(b"junk" + b"PK\x03\x04" * 4), 1,
         r"^model\.pt2: not a zip archive"),
    Case("A19-archive-folder", ARCHIVE, mkdir("model.pt2"), 1,
         r"^model\.pt2: is a folder, not a PyTorch archive$"),
]

CACHE_CASES = [
    Case("B1-planted-grammar-cache", ("rules", "check", "bad.ger"),
         steps(write("bad.ger", RULES_BAD), lark_cache_plant), 1, r"^bad\.ger:2:", env=TMP,
         rules_format=True),
]

INCLUDE_CASES = [
    Case("C9-include-parent", ("rules", "check", "rules/a.ger"),
         steps(write("secret.txt", SECRET + "\n"),
               write("rules/a.ger", 'include "../secret.txt"\nruleset r\n')), 1,
         r"^rules/a\.ger:1:1: include '\.\./secret\.txt' leaves the rules' folder",
         rules_format=True, absent=(SECRET,)),
    Case("C10-include-absolute", ("rules", "check", "a.ger"),
         write("a.ger", 'include "/etc/passwd"\nruleset r\n'), 1,
         r"^a\.ger:1:1: include '/etc/passwd': absolute paths are not allowed",
         rules_format=True,
         absent=("root:",)),
    Case("C11-include-symlink-out", ("rules", "check", "rules/a.ger"),
         steps(write("secret.txt", SECRET + "\n"), mkdir("rules"),
               link("rules/b.ger", "../secret.txt"),
               write("rules/a.ger", 'include "b.ger"\nruleset r\n')), 1,
         r"^rules/a\.ger:1:1: include 'b\.ger' leaves the rules' folder", rules_format=True,
         absent=(SECRET,)),
    Case("C12-include-fifo", ("rules", "check", "a.ger"),
         steps(fifo("p.ger"), write("a.ger", 'include "p.ger"\nruleset r\n')), 1,
         r"^a\.ger:1:1: cannot open 'p\.ger': is a named pipe", rules_format=True, timeout=20),
    Case("C13-include-folder", ("rules", "check", "a.ger"),
         steps(mkdir("d.ger"), write("a.ger", 'include "d.ger"\nruleset r\n')), 1,
         r"^a\.ger:1:1: cannot open 'd\.ger': is a folder", rules_format=True),
]

OUTPUT_CASES = [
    Case("D1-json-symlink-to-stdout", ("compile", "--mode=1", "--om=model.om",
                                       "--json=out.json"),
         steps(om(), link("out.json", "/dev/stdout")), 2,
         r"^out\.json: output is a symlink; it is not replaced"),
    Case("D2-check-report-fifo", ("compile", "--mode=3", "--model=model.onnx",
                                  "--check_report=check.json"),
         steps(GOOD, fifo("check.json")), 2,
         r"^check\.json: output exists and is a named pipe \(FIFO\)", timeout=20),
    Case("D3-optimize-output-fifo", ("optimize", "model.onnx", "-o", "out.onnx"),
         steps(GOOD, fifo("out.onnx")), 2, r"^out\.onnx: output exists and is a named pipe",
         timeout=20),
    Case("D4-compile-output-symlink", ("compile", "model.onnx", "--output", "out"),
         steps(GOOD, link("out.om", "elsewhere.om")), 2, r"^out\.om: output is a symlink"),
    Case("D5-report-json-symlink", ("compile", "model.onnx", "--output", "out", "--report",
                                    "r.html"),
         steps(GOOD, link("r.json", "/dev/stdout")), 2, r"^r\.json: output is a symlink"),
    Case("D6-run-output-symlink", ("run", "model.onnx", "--output-dir", "outs"),
         steps(model(_two_outputs), mkdir("outs"), link("outs/b.npy", "/etc/hostname")), 2,
         r"^outs/b\.npy: output is a symlink"),
    Case("D7-check-report-device", ("compile", "--mode=3", "--model=model.onnx",
                                    "--check_report=check.json"),
         steps(GOOD, device("check.json")), 2,
         r"^check\.json: output exists and is a character device", needs="mknod"),
    Case("D8-optimize-report-fifo", ("optimize", "model.onnx", "-o", "out.onnx", "--report",
                                     "r.json"),
         steps(GOOD, fifo("r.json")), 2, r"^r\.json: output exists and is a named pipe",
         timeout=20),
]


def _input_cases() -> list[Case]:
    """Every reader against a FIFO (it would hang), /dev/zero (it would read forever), a
    character device node and a folder."""
    readers = [  # id, argv with {f} for the file, setup of the rest, exit code, what
        ("model", ("compile", "{f}", "--output", "out"), steps(), 1, "a model file"),
        ("om-run", ("run", "{f}"), steps(), 1, "a .om file"),
        ("om-inspect", ("inspect", "{f}"), steps(), 1, "a .om file"),
        ("npy", ("run", "model.onnx", "--input", "x={f}"), model(_two_outputs), 1,
         "a .npy file"),
        ("switches", ("compile", "model.onnx", "--output", "out", "--fusion_switch_file",
                      "{f}"), GOOD, 2, "a fusion switch file"),
        ("keep-dtype", ("compile", "model.onnx", "--output", "out", "--keep_dtype", "{f}"),
         GOOD, 2, "a --keep_dtype file"),
        ("mixlist", ("compile", "model.onnx", "--output", "out", "--precision_mode",
                     "allow_mix_precision", "--modify_mixlist", "{f}"), GOOD, 2,
         "a --modify_mixlist file"),
        ("soc-yaml", ("compile", "model.onnx", "--output", "out", "--soc_version", "{f}"),
         GOOD, 2, "a SoC profile"),
    ]
    names = {"model": "m.onnx", "om-run": "m.om", "om-inspect": "m.om", "npy": "x.npy",
             "switches": "sw.json", "keep-dtype": "keep.txt", "mixlist": "mix.json",
             "soc-yaml": "soc.yaml"}
    out = []
    for rid, argv, rest, code, what in readers:
        name = names[rid]
        with_file = tuple(a.replace("{f}", name) for a in argv)
        zero = tuple(a.replace("{f}", "/dev/zero") for a in argv)
        esc = name.replace(".", r"\.")
        zero_what = "a model file" if rid == "om-run" else what  # `run` picks by suffix
        out += [
            Case(f"E-fifo-{rid}", with_file, steps(rest, fifo(name)), code,
                 rf"^{esc}: is a named pipe \(FIFO\), not {what}$", timeout=20),
            Case(f"E-dev-zero-{rid}", zero, rest, code,
                 rf"^/dev/zero: is a character device, not {zero_what}$", timeout=20),
            Case(f"E-folder-{rid}", with_file, steps(rest, mkdir(name)), code,
                 rf"^{esc}: is a folder, not {what}$"),
        ]
    out += [
        Case("E-fifo-rules", ("rules", "check", "p.ger"), fifo("p.ger"), 1,
             r"^p\.ger:1:1: is a named pipe \(FIFO\), not a rule file$", rules_format=True,
             timeout=20),
        Case("E-dev-zero-rules", ("rules", "check", "/dev/zero"), steps(), 1,
             r"^/dev/zero:1:1: is a character device, not a rule file$", rules_format=True,
             timeout=20),
        Case("E-device-model", ("compile", "dev.onnx", "--output", "out"), device("dev.onnx"),
             1, r"^dev\.onnx: is a character device, not a model file$", needs="mknod"),
        Case("E-symlink-to-device-om", ("inspect", "m.om"), link("m.om", "/dev/zero"), 1,
             r"^m\.om: is a character device, not a \.om file$", timeout=20),
    ]
    return out


BUDGET_CASES = [
    Case("F1-external-reused-9-gib", ("compile", "model.onnx", "--output", "out"),
         sparse_external(9), 3,
         r"^model\.onnx: the model \(all its initializers and constants\) needs 9663676416 "
         r"bytes, over the model weights budget of 8589934592 bytes \(raise it with "
         r"--max_model_bytes\)$"),
    Case("F2-external-reused-flag", ("run", "model.onnx", "--max_model_bytes", "4294967296"),
         sparse_external(6), 3,
         r"^model\.onnx: the model .* needs 6442450944 bytes, over the model weights budget of "
         r"4294967296 bytes"),
    Case("F3-yaml-alias-bomb", ("compile", "model.onnx", "--output", "out", "--soc_version",
                                "soc.yaml"),
         steps(GOOD, write("soc.yaml", "a: &a [1,1,1,1,1,1,1,1,1]\n" + "".join(
             f"{c}: &{c} [{','.join([f'*{p}'] * 9)}]\n" for p, c in zip("abcdefgh",
                                                                         "bcdefghi",
                                                                         strict=True)))), 2,
         r"^soc\.yaml:1:4: not valid YAML: anchors \(&name\) are not allowed$"),
    Case("F4-200k-node-chain", ("compile", "model.onnx", "--output", "out"),
         model(lambda: _chain(200_000)), 3,
         r"^model\.onnx: the graph has 200000, over the node count budget of 100000 "
         r"\(raise it with --max_nodes\)$"),
    Case("F5-om-weights-drive-a-tile", ("run", "model.om"), _tile_om, 1,
         r"^model\.om: node 'tile' \(Tile\): tensor 'y': the input values give "
         r"float32\[400000000,40000\], the plan expects float32\[8, 4\]$"),
    Case("F6-fed-constant-of-shape", ("run", "model.onnx", "--input", "shape=s.npy"),
         steps(model(_fed_constant_of_shape),
               lambda f: np.save(f / "s.npy", np.array([100_000, 100_000], np.int64))), 3,
         r"^model\.onnx: node 'fill' \(ConstantOfShape\): tensor 'y': output "
         r"float32\[100000,100000\] needs 40000000000 bytes, over the tensor budget"),
    Case("F7-split-50k-outputs", ("compile", "model.onnx", "--output", "out"),
         model(lambda: _split(50_000)), 3,
         r"^model\.onnx: node 'split': the node has 50000, over the outputs-per-node budget of "
         r"10000 \(raise it with --max_node_outputs\)$"),
    Case("F8-timeout", ("compile", "model.onnx", "--output", "out", "--timeout", "0.001"),
         GOOD, 3, r"^the command ran longer than --timeout 0\.001 s \(raise it with --timeout\)$"),
    Case("F9-om-live-budget", ("run", "model.om", "--max_live_bytes", "10"), om(), 3,
         r"^model\.om: the arena and the largest step's outputs needs \d+ bytes, over the "
         r"run-time memory budget of 10 bytes"),
    Case("F10-om-weights-budget", ("inspect", "model.om", "--max_model_bytes", "1"),
         steps(lambda f: build_om(_weighted(), f / "model.om")), 3,
         r"^model\.om: section WEIGHTS needs \d+ bytes, over the model weights budget of 1 "),
    Case("F11-node-budget-flag", ("compile", "model.onnx", "--output", "out", "--max_nodes",
                                  "1"), model(_two_outputs), 3,
         r"^model\.onnx: the graph has 2, over the node count budget of 1 "),
    Case("F12-onnx-live-budget", ("run", "model.onnx", "--max_live_bytes", "8"),
         model(_two_outputs), 3, r"^model\.onnx: node 'r' \(Relu\): running the node needs 16 "
         r"bytes, over the run-time memory budget of 8 bytes"),
    Case("F13-om-node-budget", ("run", "model.om", "--max_nodes", "2"), om(), 3,
         r"^model\.om: the graph has 3, over the node count budget of 2 "),
    Case("F14-bad-timeout", ("compile", "model.onnx", "--output", "out", "--timeout", "-1"),
         GOOD, 2, r"--timeout: must be > 0"),
    Case("F15-bad-budget", ("run", "model.onnx", "--max_live_bytes", "lots"), GOOD, 2,
         r"--max_live_bytes/--max-live-bytes: expected a whole number"),
]


def _weighted() -> Graph:
    return Graph((Node("Add", ("x", "w"), ("y",), name="add"),),
                 (Value.of("x", "float32", (64,)),), (Value.of("y", "float32", (64,)),),
                 initializers={"w": np.ones(64, np.float32)})


PARTIAL_CASES = [
    Case("G1-run-output-dir-all-or-none", ("run", "model.onnx", "--output-dir", "outs"),
         steps(model(_two_outputs), mkdir("outs"),
               lambda f: np.save(f / "outs" / "a.npy", np.zeros(3)), mkdir("outs/b.npy")), 2,
         r"^outs/b\.npy: output is a folder$"),
    Case("G2-compile-report-all-or-none", ("compile", "model.onnx", "--output", "out",
                                           "--report", "r.html"),
         steps(GOOD, write("out.om", b"old"), mkdir("r.json")), 2,
         r"^r\.json: output is a folder$"),
]

ERROR_CASES = [
    Case("H1-switch-json-deep", ("compile", "model.onnx", "--output", "out",
                                 "--fusion_switch_file", "sw.json"),
         steps(GOOD, write("sw.json", deep('{"Switch":', "}", 50_000))), 2,
         r"^sw\.json: .*nested"),
    Case("H2-mixlist-json-deep", ("compile", "model.onnx", "--output", "out",
                                  "--precision_mode", "allow_mix_precision", "--modify_mixlist",
                                  "mix.json"),
         steps(GOOD, write("mix.json", deep('{"a":', "}") )), 2, r"^mix\.json: .*nested"),
    Case("H3-soc-yaml-deep", ("compile", "model.onnx", "--output", "out", "--soc_version",
                              "soc.yaml"),
         steps(GOOD, write("soc.yaml", deep("[", "]"))), 2, r"^soc\.yaml:\d+:\d+: .*nested"),
    Case("H4-switch-json-huge-number", ("compile", "model.onnx", "--output", "out",
                                        "--fusion_switch_file", "sw.json"),
         steps(GOOD, write("sw.json", '{"Switch": {"GraphFusion": {"x": ' + BIG_NUMBER + "}}}")),
         2, r"^sw\.json: not valid JSON: a number has more than 4300 digits$"),
    Case("H5-soc-yaml-huge-number", ("compile", "model.onnx", "--output", "out",
                                     "--soc_version", "soc.yaml"),
         steps(GOOD, write("soc.yaml", "hbm_gbps: " + BIG_NUMBER + "\n")), 2,
         r"^soc\.yaml: not valid YAML: a number has more than 4300 digits$"),
    Case("H6-mixlist-huge-number", ("compile", "model.onnx", "--output", "out",
                                    "--precision_mode", "allow_mix_precision",
                                    "--modify_mixlist", "mix.json"),
         steps(GOOD, write("mix.json", '{"black-list": ' + BIG_NUMBER + "}")), 2,
         r"^mix\.json: not valid JSON: a number has more than 4300 digits$"),
    Case("H8-npy-negative-dims", ("run", "model.onnx", "--input", "x=x.npy"),
         steps(model(_two_outputs), write("x.npy", npy_header(
             {"descr": "<f4", "fortran_order": False, "shape": (-1, 2)}))), 1,
         r"^x\.npy: bad \.npy header: shape \[-1, 2\] is not a list"),
    Case("H9-npy-void-0", ("run", "model.onnx", "--input", "x=x.npy"),
         steps(model(_two_outputs), write("x.npy", npy_header(
             {"descr": "|V0", "fortran_order": False, "shape": (2,)}))), 1,
         r"^x\.npy: bad \.npy header: element type '\|V0' is not one a model input can have"),
    Case("H10-npy-unicode-0", ("run", "model.onnx", "--input", "x=x.npy"),
         steps(model(_two_outputs), write("x.npy", npy_header(
             {"descr": "<U0", "fortran_order": False, "shape": (2,)}))), 1,
         r"^x\.npy: bad \.npy header: element type '<U0'"),
    Case("H11-npy-complex", ("run", "model.onnx", "--input", "x=x.npy"),
         steps(model(_two_outputs), lambda f: np.save(f / "x.npy", np.zeros(2, np.complex64))),
         1, r"^x\.npy: bad \.npy header: element type '<c8'"),
    Case("H12-seed-negative", ("run", "model.onnx", "--seed", "-1"), GOOD, 2,
         r"argument --seed: must be from 0 to 2\*\*64 - 1, got -1"),
    Case("H13-seed-huge", ("run", "model.onnx", "--seed", BIG_NUMBER[:100]), GOOD, 2,
         r"argument --seed: must be from 0 to 2\*\*64 - 1"),
    Case("H14-stdout-dev-full", ("compile", "model.onnx", "--output", "out"), GOOD, 1,
         r"^cannot write to standard output: no space left on device$", tags=("full-stdout",)),
    Case("H15-output-5000-chars", ("compile", "model.onnx", "--output", "a" * 5000), GOOD, 2,
         r"^a+\.\.\.a+\.om: cannot write there: file name too long$"),
    Case("H16-ge-log-bogus", ("run", "model.onnx"), GOOD, 2,
         r"argument --log: 'bogus' is not a log level; choose one of debug, info",
         env=(("GE_LOG", "bogus"),)),
    Case("H17-ge-log-escape", ("inspect", "model.om"), om(), 2,
         r"argument --log: '\\x1b\[2J' is not a log level",
         env=(("GE_LOG", "\x1b[2J"),), absent=("\x1b",)),
    Case("H19-input-shape-huge", ("compile", "model.onnx", "--output", "out",
                                  "--input_shape", "x:" + BIG_NUMBER), GOOD, 2,
         r"--input_shape: dims must be integers"),
    Case("H20-keep-dtype-empty-optype", ("compile", "model.onnx", "--output", "out",
                                         "--keep_dtype", "k.txt"),
         steps(GOOD, write("k.txt", "OpType::\n")), 2, r"^k\.txt:1: 'OpType::' needs"),
]

ESC = "\x1b]0;owned\x07\x1b[2J"
NAME_CASES = [
    Case("I1-default-shape-mismatch", ("compile", "model.onnx", "--output", "out"),
         model(_default_mismatch), 1,
         r"^model\.onnx: tensor 'x': graph input declares float32\[4\] but its initializer "
         r"\(the default value\) is float32\[7\]$"),
    Case("I2-escape-in-node-name", ("compile", "model.onnx", "--output", "out"),
         model(lambda: _named(ESC)), 1,
         r"^model\.onnx: node '\\x1b\]0;owned\\x07\\x1b\[2J' \(Mull\): unknown op Mull",
         absent=("\x1b", "\x07")),
    Case("I3-bidi-in-node-name", ("optimize", "model.onnx", "-o", "out.onnx"),
         model(lambda: _named("abc\u202edcb")), 1, r"node 'abc\\u202edcb' \(Mull\)",
         absent=("\u202e",)),
    Case("I4-newline-in-node-name", ("run", "model.onnx"),
         model(lambda: _named("a\nge-rewrite: error: fake")), 1,
         r"node 'a\\x0age-rewrite: error: fake' \(Mull\)"),
    Case("I5-output-folder-slash", ("compile", "model.onnx", "--output", "out/"),
         steps(GOOD, mkdir("out")), 2,
         r"--output 'out/': give a file name, e\.g\. 'out/model'"),
    Case("I6-output-dot", ("compile", "model.onnx", "--output", "."), GOOD, 2,
         r"--output '\.': give a file name"),
    Case("I7-output-dotdot", ("compile", "model.onnx", "--output", "sub/.."),
         steps(GOOD, mkdir("sub")), 2, r"--output 'sub/\.\.': give a file name"),
]

ENCODING_CASES = [
    Case("J1-switch-not-utf8", ("compile", "model.onnx", "--output", "out",
                                "--fusion_switch_file", "sw.txt"),
         steps(GOOD, write("sw.txt", b"fuse:off\n\xff\xfe:off\n")), 2,
         r"^sw\.txt: line 2: not UTF-8 \(byte 0xff\)$"),
    Case("J2-keep-dtype-not-utf8", ("compile", "model.onnx", "--output", "out",
                                    "--keep_dtype", "k.txt"),
         steps(GOOD, write("k.txt", b"conv1\n\xc3\x28\n")), 2,
         r"^k\.txt: line 2: not UTF-8 \(byte 0xc3\)$"),
    Case("J3-soc-not-utf8", ("compile", "model.onnx", "--output", "out", "--soc_version",
                             "soc.yaml"),
         steps(GOOD, write("soc.yaml", b"name: \xff\n")), 2,
         r"^soc\.yaml: line 1: not UTF-8 \(byte 0xff\)$"),
    Case("J4-switch-nul", ("compile", "model.onnx", "--output", "out",
                           "--fusion_switch_file", "sw.json"),
         steps(GOOD, write("sw.json", '{"Switch": {"GraphFusion": {"a\x00": "off"}}}')), 2,
         r"^sw\.json:1:\d+: not valid JSON: Invalid control character"),
    Case("J5-mixlist-not-object", ("compile", "model.onnx", "--output", "out",
                                   "--precision_mode", "allow_mix_precision",
                                   "--modify_mixlist", "mix.json"),
         steps(GOOD, write("mix.json", "[1, 2]")), 2, r"mix\.json: expected an object"),
]

CASES: list[Case] = (ARCHIVE_CASES + CACHE_CASES + INCLUDE_CASES + OUTPUT_CASES
                     + _input_cases() + BUDGET_CASES + PARTIAL_CASES + ERROR_CASES + NAME_CASES
                     + ENCODING_CASES)
