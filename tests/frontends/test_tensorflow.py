"""TensorFlow input through tf2onnx in an isolated process: small Keras models built in a
separate process (``gerules.testing.tf_models``), frozen or saved, converted, and compared
with TensorFlow's own output. This process never imports TensorFlow."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gerules.cli.main import main
from gerules.errors import ModelError, UsageError
from gerules.frontends import tensorflow
from gerules.frontends.isolate import IsolationLimits, run_isolated
from gerules.runtime.executor import run_graph
from gerules.runtime.model import Model

SKIP = ("TensorFlow and tf2onnx are not installed (the optional 'tensorflow' extra: "
        "pip install -e '.[tensorflow]'; the README's test command installs it)")
pytestmark = [pytest.mark.skipif(not tensorflow.available(), reason=SKIP), pytest.mark.tensorflow]


def test_without_the_extra_the_message_names_it(monkeypatch: pytest.MonkeyPatch,
                                                tmp_path: Path) -> None:
    monkeypatch.setattr(tensorflow, "available", lambda: False)
    with pytest.raises(UsageError, match=r"pip install 'gerules\[tensorflow\]'"):
        tensorflow.convert(tmp_path / "m.pb")


# The builder is our own code writing into the test's folder: no sandbox (it would confine
# writes to the worker's private folder).
BUILD = IsolationLimits(seconds=900, memory_bytes=16 << 30, sandbox=False)


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("tf")
    data = run_isolated("gerules.testing.tf_models:build",
                        {"kinds": ["cnn", "resnet", "transformer", "igamma"],
                         "folder": str(folder), "seed": 0},
                        limits=BUILD)
    return json.loads(data)


def _io(model: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    return np.array(model["input"], np.float32), np.array(model["output"], np.float32)


def test_resnet_pb_through_the_atc_command_line(models: dict[str, Any], tmp_path: Path) -> None:
    m = models["resnet"]
    out = tmp_path / "resnet"
    assert main([f"--model={m['pb']}", "--framework=3", f"--output={out}",
                 "--input_shape=input:0:-1,16,16,3", "--dynamic_batch_size=1,2",
                 f"--report={tmp_path / 'r.json'}"]) == 0
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["framework"] == "tensorflow"
    assert report["options"]["input_format"] == "NHWC"  # TF's default
    x, want = _io(m)  # ge-rewrite run on TensorFlow's input, against TensorFlow's output
    np.save(tmp_path / "x.npy", x)
    assert main(["run", f"{out}.om", f"--input=input={tmp_path / 'x.npy'}",
                 f"--output-dir={tmp_path / 'got'}"]) == 0
    got = np.load(tmp_path / "got" / f"{m['output_node']}.npy")
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_transformer_block(models: dict[str, Any]) -> None:
    m = models["transformer"]
    graph = tensorflow.convert(m["pb"], {"input": [2, 8, 16]})
    x, want = _io(m)
    got = run_graph(graph, {"input": x})
    np.testing.assert_allclose(got[m["output_node"]], want, rtol=1e-4, atol=1e-4)


def test_saved_model_folder(models: dict[str, Any], tmp_path: Path) -> None:
    m = models["cnn"]
    out = tmp_path / "cnn"
    assert main(["compile", m["saved_model"], f"--output={out}",  # framework from the folder
                 "--input_shape=input:2,16,16,3"]) == 0
    x, want = _io(m)
    got = Model.load(f"{out}.om").run({"input": x})
    np.testing.assert_allclose(got["output"], want, rtol=1e-4, atol=1e-5)


def test_out_nodes_by_tf_name(models: dict[str, Any]) -> None:
    m = models["cnn"]
    relu = m["first_relu"]
    graph = tensorflow.convert(m["pb"], {"input": [2, 16, 16, 3]}, [(relu, 0)])
    assert graph.output_names == (relu,)  # named by the TF node
    assert graph.outputs[0].shape == (2, 16, 16, 8)


def test_unsupported_op_is_named_by_its_tf_node(models: dict[str, Any], tmp_path: Path) -> None:
    m = models["igamma"]
    with pytest.raises(ModelError, match=r"igamma\.pb: node 'special' \(Igamma\): TensorFlow "
                       r"op 'Igamma' is not supported by tf2onnx"):
        tensorflow.convert(m["pb"])
    report = tmp_path / "check.json"
    assert main([f"--model={m['pb']}", "--framework=3", "--mode=3",
                 f"--check_report={report}"]) == 1
    result = json.loads(report.read_text())
    assert result["framework"] == "tensorflow"
    assert [(n["name"], n["op"]) for n in result["nodes"] if n["result"] != "supported"] == [
        ("special", "Igamma")]


def test_bad_inputs(models: dict[str, Any], tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="not a frozen TensorFlow GraphDef"):
        bad = tmp_path / "bad.pb"
        bad.write_bytes(b"\xff" * 64)
        tensorflow.convert(bad)
    with pytest.raises(ModelError, match="not a SavedModel"):
        tensorflow.convert(tmp_path)
    with pytest.raises(ModelError, match="'nope', which is not a model input"):
        tensorflow.convert(models["cnn"]["pb"], {"nope:0": [1, 2]})
