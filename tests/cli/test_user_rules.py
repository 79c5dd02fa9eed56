"""A rule author's own `.ger` files through ``--rules``: added to the shipped library,
extending its schedules and rulesets, replacing a rule explicitly, conflicts at their place,
and reported like shipped rules (summary, JSON report, explain, rules list/verify, API)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from gerules.cli.main import main
from gerules.compiler import CompileOptions
from gerules.onnx_io import load_model
from gerules.runtime.executor import run_graph

SIGMOID_RELU = '''include "gerules:ops.ger"

op my.SigmoidRelu(x) = Sigmoid(Relu(x))

ruleset my_fusions

@exact
rule fuse_sigmoid_relu:         # sigmoid(relu(x)) as one elementwise kernel
    Sigmoid(Relu(x))  =>  my.SigmoidRelu(x)

schedule O2 += my_fusions
'''


def _model(path: Path) -> Path:
    """y = sigmoid(relu(x)) + x * sigmoid(x)."""
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Sigmoid", ["r"], ["s"], name="sig1"),
             helper.make_node("Sigmoid", ["x"], ["t"], name="sig2"),
             helper.make_node("Mul", ["x", "t"], ["u"], name="mul"),
             helper.make_node("Add", ["s", "u"], ["y"], name="add")]
    graph = helper.make_graph(nodes, "m", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [2, 8])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, [2, 8])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


@pytest.fixture
def model(tmp_path: Path) -> Path:
    return _model(tmp_path / "m.onnx")


@pytest.fixture
def mine(tmp_path: Path) -> Path:
    folder = tmp_path / "my_rules"
    folder.mkdir()
    (folder / "fusions.ger").write_text(SIGMOID_RELU)
    return folder


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_user_rule_fires_and_is_reported_like_a_shipped_one(
        model: Path, mine: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "o.onnx"
    code, text, err = _run(capsys, "optimize", str(model), "-o", str(out), "--target", "npu",
                           "--rules", str(mine), "--report", str(tmp_path / "r.json"))
    assert code == 0, err
    assert "fuse_sigmoid_relu" in text and "fuse_silu" in text  # user and shipped, one table
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["rules"]["fuse_sigmoid_relu"]["applied"] >= 1
    assert {f["rule"] for f in report["fusions"]} >= {"fuse_sigmoid_relu", "fuse_silu"}
    feeds = {"x": np.random.default_rng(0).standard_normal((2, 8)).astype(np.float32)}
    np.testing.assert_allclose(run_graph(load_model(out), feeds)["y"],
                               run_graph(load_model(model), feeds)["y"], rtol=1e-5, atol=1e-6)
    code, text, _ = _run(capsys, "explain", str(model), "--rules", str(mine), "--rule",
                         "fuse_sigmoid_relu")
    assert code == 0 and "<- fuse_sigmoid_relu; replaces sig1 (Sigmoid), relu (Relu)" in text


def test_environment_path_and_atc_form_and_api(model: Path, mine: Path, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    code, text, err = _run(capsys, f"--model={model}", "--framework=5",
                           f"--output={tmp_path / 'm'}", f"--rules={mine}")
    assert code == 0 and "fuse_sigmoid_relu" in text, err
    monkeypatch.setenv("GERULES_RULES_PATH", f"{tmp_path / 'nowhere'}")
    code, _, err = _run(capsys, "rules", "list")
    assert code == 2 and f"GERULES_RULES_PATH {tmp_path / 'nowhere'}: no such file" in err
    monkeypatch.setenv("GERULES_RULES_PATH", str(mine))
    code, text, _ = _run(capsys, "rules", "list")
    row = next(line for line in text.splitlines() if "fuse_sigmoid_relu" in line)
    assert code == 0 and row.split() == ["my_fusions", "fuse_sigmoid_relu", "=>", "@exact",
                                         f"{mine / 'fusions.ger'}:7"]
    import gerules as ge

    monkeypatch.delenv("GERULES_RULES_PATH")
    _, report = ge.optimize(load_model(model), CompileOptions(rules=(str(mine),)))
    assert report.rules["fuse_sigmoid_relu"]["applied"] >= 1


def test_extend_ruleset_and_replace_are_explicit(model: Path, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    rules = tmp_path / "r.ger"
    rules.write_text('op my.Swish(x) = Mul(Sigmoid(x), x)\nextend ruleset fuse_elementwise\n\n'
                     '@replace\nrule fuse_silu:\n    Mul(x, Sigmoid(x))  =>  my.Swish(x)\n')
    code, text, err = _run(capsys, "rules", "list", "--rules", str(rules))
    assert code == 0 and "fuse_elementwise  fuse_silu (replaces)" in text
    assert err.startswith(f"note: rule fuse_silu at {rules}:5:6 replaces the one at "
                          "rules/elementwise.ger:")
    code, text, _ = _run(capsys, "optimize", str(model), "-o", str(tmp_path / "o.onnx"),
                         "--target", "npu", "--rules", str(rules))
    assert code == 0 and "warning: rule fuse_silu at" in text
    written = onnx.load(tmp_path / "o.onnx")
    assert "Swish" in {f.name for f in written.functions}
    assert "SiLU" not in {f.name for f in written.functions}


@pytest.mark.parametrize(("text", "message"), [
    ("ruleset mine\nrule fuse_silu: Relu(x) => x\nschedule O2 += mine\n",
     "r.ger:2:6: duplicate rule 'fuse_silu' (first defined at rules/elementwise.ger:"),
    ("ruleset mine\n@replace\nrule not_there: Relu(x) => x\n",
     "r.ger:3:6: @replace: there is no rule 'not_there' to replace"),
    ("ruleset simplify\n", "r.ger:1:1: duplicate ruleset 'simplify' (first defined at "
                           "rules/simplify.ger:"),
    ("extend ruleset simplfy\n", "r.ger:1:1: extend ruleset: there is no ruleset 'simplfy' "
                                 "(did you mean simplify?)"),
    ("ruleset mine\nschedule O2: mine\n", "r.ger:2:1: duplicate schedule 'O2' (first defined "
                                          "at rules/pipeline.ger:"),
    ("ruleset mine\nschedule O7 += mine\n", "r.ger:2:1: schedule O7 +=: there is no schedule "
                                            "'O7'"),
    ('include "/etc/x.ger"\n', "r.ger:1:1: include '/etc/x.ger': absolute paths are not "
                               "allowed"),
    ('include "gerules:../x.ger"\n', "r.ger:1:1: 'gerules:../x.ger': a library include "
                                     "names a file of the shipped library"),
])
def test_conflicts_are_placed_errors(text: str, message: str, tmp_path: Path,
                                     monkeypatch: pytest.MonkeyPatch,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    Path("r.ger").write_text(text)
    code, _, err = _run(capsys, "rules", "check", "--rules", "r.ger")
    assert code == 1 and message in err.splitlines()[0], err
    code, _, err = _run(capsys, "optimize", str(_model(tmp_path / "m.onnx")), "-o", "o.onnx",
                        "--rules", "r.ger")
    assert code == 1 and err.startswith(f"ge-rewrite: error: {message}"), err
    assert not Path("o.onnx").exists()


def test_unscheduled_ruleset_is_a_warning(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    rules = tmp_path / "r.ger"
    rules.write_text("ruleset idle\nrule drop_relu_relu: Relu(Relu(x)) => Relu(x)\n")
    code, _, err = _run(capsys, "rules", "check", "--rules", str(rules))
    assert code == 0 and "warning: " in err and "ruleset 'idle' is not run by any schedule" \
        in err and "schedule O1 += idle" in err


def test_rules_verify_verifies_the_users_rules(mine: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    code, text, _ = _run(capsys, "rules", "verify", "--rules", str(mine), "--examples", "3")
    assert code == 0
    assert text.splitlines()[-1] == "rules verified: 1 / 1"
    assert "fuse_sigmoid_relu (@exact): verified on 3 instance(s)" in text
