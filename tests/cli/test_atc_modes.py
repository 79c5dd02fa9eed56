"""atc's --mode (1 .om to JSON, 3 pre-check, 6 info), dynamic batch and --report files."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from gerules.cli.main import main
from gerules.errors import ModelError
from gerules.onnx_io import load_model
from gerules.runtime.executor import run_graph
from gerules.runtime.model import Model
from gerules.testing.models import cnn


@pytest.fixture(scope="module")
def dynamic(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The test CNN compiled for batch 1 and 4, with an HTML report."""
    folder = tmp_path_factory.mktemp("modes")
    onnx.save(cnn().model, folder / "cnn.onnx")
    code = main(["compile", f"--model={folder / 'cnn.onnx'}", f"--output={folder / 'dyn'}",
                 "--input_shape=input:-1,3,16,16", "--dynamic_batch_size=1,4",
                 f"--report={folder / 'report.html'}"])
    assert code == 0
    return folder


def test_dynamic_batch_runs_1_and_4_and_refuses_3(dynamic: Path) -> None:
    x = np.random.default_rng(0).standard_normal((4, 3, 16, 16)).astype(np.float32)
    want = run_graph(load_model(dynamic / "cnn.onnx"), {"input": x})["logits"]
    with Model.load(dynamic / "dyn.om") as m:
        assert [v.name for v in m.variants] == ["N=1", "N=4"]
        for b in (1, 4):
            got = m.run({"input": x[:b]})["logits"]
            np.testing.assert_allclose(got, want[:b], rtol=1e-4, atol=1e-5)
        with pytest.raises(ModelError, match=r"no compiled variant takes these input shapes "
                                             r"\(N=1: input\[1, 3, 16, 16\]; N=4"):
            m.run({"input": x[:3]})


def test_report_files(dynamic: Path) -> None:
    html = (dynamic / "report.html").read_text()
    data = json.loads((dynamic / "report.json").read_text())
    assert html.startswith("<!DOCTYPE html>") and 'id="memory"' in html
    assert set(data["figures"]["memory"]) == {"N=1", "N=4"}
    assert data["command_line"].startswith("ge-rewrite compile --model=")


def test_mode_6_shows_the_variants(dynamic: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compile", "--mode=6", f"--om={dynamic / 'dyn.om'}",
                 f"--json={dynamic / 'info.json'}"]) == 0
    out = capsys.readouterr().out
    assert "input  input: float32[N,3,16,16]" in out
    assert "N=1" in out and "input[1,3,16,16]" in out and "input[4,3,16,16]" in out
    info = json.loads((dynamic / "info.json").read_text())
    assert [v["dims"] for v in info["variants"]] == [{"N": 1}, {"N": 4}]


def test_mode_1_prints_the_om_as_json(dynamic: Path, capsys: pytest.CaptureFixture[str]
                                      ) -> None:
    assert main(["--mode=1", f"--om={dynamic / 'dyn.om'}"]) == 0  # atc-style, no subcommand
    doc = json.loads(capsys.readouterr().out)
    assert doc["model_def"]["command_line"].startswith("ge-rewrite compile")
    assert main(["compile", "--mode=1", f"--om={dynamic / 'dyn.om'}",
                 f"--json={dynamic / 'om.json'}"]) == 0
    assert json.loads((dynamic / "om.json").read_text())["report"]["optimize"]


def test_mode_1_needs_an_om(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compile", "--mode=1"]) == 2
    assert "--mode=1 needs the .om file" in capsys.readouterr().err


def test_mode_3_writes_check_result(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    onnx.save(cnn().model, tmp_path / "cnn.onnx")
    assert main(["--model=cnn.onnx", "--framework=5", "--mode=3"]) == 0
    result = json.loads((tmp_path / "check_result.json").read_text())
    assert result["result"] == "success" and len(result["nodes"]) == 10
    assert not list(tmp_path.glob("*.om"))  # pre-check only
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["a"], name="r"),
                               helper.make_node("ImageDecoder", ["a"], ["y"], name="gru")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
              tmp_path / "gru.onnx")
    capsys.readouterr()
    assert main(["compile", "gru.onnx", "--mode=3", "--check_report=gru.json"]) == 1
    out = capsys.readouterr().out
    assert "pre-check failed (onnx): 1 of 2 nodes supported" in out
    assert "unsupported: node 'gru' (ImageDecoder): unknown op ImageDecoder" in out
    nodes = json.loads((tmp_path / "gru.json").read_text())["nodes"]
    assert [(n["name"], n["result"]) for n in nodes] == [("r", "supported"),
                                                         ("gru", "unsupported")]
