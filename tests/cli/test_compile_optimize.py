"""``ge-rewrite compile`` and ``optimize`` end to end on the test CNN."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest

from gerules.cli.main import main
from gerules.onnx_io import load_model
from gerules.runtime.executor import run_graph
from gerules.runtime.model import Model
from gerules.testing.models import cnn


@pytest.fixture
def model(tmp_path: Path) -> Path:
    path = tmp_path / "cnn.onnx"
    onnx.save(cnn().model, path)
    return path


def test_optimize_writes_onnx_with_the_same_outputs(model: Path, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "opt.onnx"
    assert main(["optimize", str(model), "-o", str(out), "--report", str(tmp_path / "r.json"),
                 "--input_shape", "input:2,3,16,16"]) == 0
    text = capsys.readouterr().out
    assert "BatchNormalization" in text and "fold_conv_bn" in text and "estimated" in text
    feeds = cnn().feeds(0)
    want = run_graph(load_model(model), feeds)
    got = run_graph(load_model(out), feeds)
    np.testing.assert_allclose(got["logits"], want["logits"], rtol=1e-4, atol=1e-5)
    assert "BatchNormalization" not in load_model(out).op_counts()
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["nodes"]["after"] < report["nodes"]["before"]


def test_compile_atc_spelling_writes_om_and_report(model: Path, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    name = tmp_path / "cnn"
    assert main(["compile", f"--model={model}", f"--output={name}", "--soc_version=Ascend310",
                 "--input_shape=input:2,3,16,16", "--report", str(tmp_path / "r.json")]) == 0
    assert "ge.FusedConv" in capsys.readouterr().out
    with Model.load(f"{name}.om") as m:
        feeds = cnn().feeds(0)
        got = m.run(feeds)
    want = run_graph(load_model(model), feeds)
    np.testing.assert_allclose(got["logits"], want["logits"], rtol=1e-4, atol=1e-5)
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["options"]["soc_version"] == "Ascend310"
    assert report["optimize"]["fusions"]


def test_dynamic_batch_gives_one_variant_per_size(model: Path, tmp_path: Path) -> None:
    name = tmp_path / "dyn"
    assert main(["compile", str(model), "--output", str(name), "--input_shape",
                 "input:-1,3,16,16", "--dynamic_batch_size", "1,4"]) == 0
    feeds = {"input": np.random.default_rng(0).standard_normal((4, 3, 16, 16))
             .astype(np.float32)}
    want = run_graph(load_model(model), feeds)
    with Model.load(f"{name}.om") as m:
        for b in (1, 4):
            got = m.run({"input": feeds["input"][:b]})
            np.testing.assert_allclose(got["logits"], want["logits"][:b], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("argv, message", [
    (["--opt_level", "O7"], "invalid choice"),
    (["--dynamic_batch_size", "1,x"], "dynamic_batch_size"),
    (["--input_shape", "input:1,3"], "rank"),
    (["--input_shape", "nope:1"], "no model input is called 'nope'"),
    (["--soc_version", "Ascend911"], "did you mean"),
    (["--streams", "0"], "--streams must be between 1 and 64"),
])
def test_bad_flags_are_one_line(model: Path, tmp_path: Path, argv: list[str], message: str,
                                capsys: pytest.CaptureFixture[str]) -> None:
    try:
        code = main(["compile", str(model), "--output", str(tmp_path / "x"), *argv])
    except SystemExit as e:
        code = int(e.code or 0)
    err = capsys.readouterr().err
    assert code == 2 and message in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    assert not list(tmp_path.glob("x*"))


def test_fusion_switch_file_keeps_batchnorm(model: Path, tmp_path: Path) -> None:
    switch = tmp_path / "switch.json"
    switch.write_text(json.dumps({"Switch": {"GraphFusion": {"ConvBatchnormFusionPass": "off",
                                                             "fuse_conv": "off"}}}))
    out = tmp_path / "o.onnx"
    assert main(["optimize", str(model), "-o", str(out), "--fusion_switch_file",
                 str(switch)]) == 0
    assert load_model(out).op_counts()["BatchNormalization"] == 2
