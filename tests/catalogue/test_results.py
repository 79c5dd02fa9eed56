"""Catalogue cases whose right answer is not an error line: what a hostile input may not
change even when the command succeeds, and errors raised deep inside the optimizer."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper

from gerules.cli.main import main

DRIVER = Path(__file__).resolve().parent / "catalogue_driver.py"


def _outputs_named(names: list[str]) -> bytes:
    nodes = [helper.make_node("Relu", ["x"], [n], name=f"r{k}") for k, n in enumerate(names)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                         [2])],
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2])
                               for n in names])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


def test_output_names_become_visible_unique_files_inside_the_folder(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Outputs named '.', '..' and '../../x' once became hidden files or paths: now each is
    a visible file directly inside --output-dir, and the table escapes the raw names."""
    names = [".", "..", "../../x", "a/b", "\x1b[2Jwipe"]
    (tmp_path / "m.onnx").write_bytes(_outputs_named(names))
    monkeypatch.chdir(tmp_path)
    assert main(["--log", "error", "run", "m.onnx", "--output-dir", "outs"]) == 0
    files = sorted(p.name for p in (tmp_path / "outs").iterdir())
    assert files == sorted(["_...npy", "_..npy", "_.._.._x.npy", "__2Jwipe.npy", "a_b.npy"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx", "outs"]  # nothing outside
    for f in files:
        np.testing.assert_array_equal(np.load(tmp_path / "outs" / f).shape, (2,))
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\\u001b[2Jwipe" in out


def test_an_unsound_rule_found_while_optimizing_is_placed_at_the_rule(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """engine/errors.py promises the optimizer places engine errors: a rule the e-graph finds
    unsound (classes of different shapes joined) is one line at the rule, exit 1, not an
    'internal error' (exit 70)."""
    from gerules.dsl import load_compiled
    from gerules.opt import optimize as opt

    rules = tmp_path / "unsound.ger"
    rules.write_text("ruleset fold\n@exact\nrule flatten_relu: Relu(x) => Reshape(x, [-1])\n"
                     + "".join(f"schedule {lv}: saturate(fold)\n" for lv in ("O1", "O2", "O3")))
    library = load_compiled([str(rules)], soundness=False)  # what the checker cannot prove
    monkeypatch.setattr(opt, "rule_library", lambda paths=(), registry=None: library)
    relu = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="relu")], "g",
                             [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                             [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    model = helper.make_model(relu, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    (tmp_path / "m.onnx").write_bytes(model.SerializeToString())
    code = main(["optimize", str(tmp_path / "m.onnx"), "-o", str(tmp_path / "o.onnx")])
    err = capsys.readouterr().err
    assert code == 1, err
    assert err.startswith(f"ge-rewrite: error: {rules}:2:1: rule 'flatten_relu' is unsound: ")
    assert len(err.splitlines()) == 1 and not (tmp_path / "o.onnx").exists()


AUDIT = """
import json, sys
seen = []
def watch(event, args):
    if event == "pickle.find_class" or (event == "open" and ".lark_" in str(args[0])):
        seen.append(f"{event} {args[0]}")
sys.addaudithook(watch)
from gerules.cli.main import main
code = main(sys.argv[1:])
print(json.dumps({"code": code, "seen": seen}), file=sys.stderr)
"""


@pytest.mark.parametrize("argv", [["rules", "check", "r.ger"],
                                  ["compile", "m.onnx", "--output", "out"]])
def test_no_pickle_is_loaded_anywhere(tmp_path: Path, argv: list[str]) -> None:
    """No command unpickles anything or opens Lark's pickle cache (an audit hook watches)."""
    from gerules.testing.bad_models import good_model

    (tmp_path / "r.ger").write_text("ruleset r\n@exact\nrule a: Relu(Relu(x)) => Relu(x)\n")
    (tmp_path / "m.onnx").write_bytes(good_model().SerializeToString())
    done = subprocess.run([sys.executable, "-c", AUDIT, "--log", "error", *argv], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
                               "TMPDIR": str(tmp_path)})
    report = json.loads(done.stderr.splitlines()[-1])
    assert report == {"code": 0, "seen": []}
