"""MindSpore MindIR input: nets built and exported by MindSpore in a separate process
(``gerules.testing.ms_models``), read natively, compared with MindSpore's own output; and a
hand-written MindIR (``gerules.testing.mindir_models``) that needs no MindSpore."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gerules.cli.main import main
from gerules.errors import ModelError
from gerules.frontends import mindir
from gerules.frontends.isolate import IsolationLimits, run_isolated
from gerules.runtime.executor import run_graph
from gerules.runtime.model import Model
from gerules.testing.mindir_models import tiny_mindir

SKIP = ("MindSpore is not installed (the optional 'mindspore' extra, needed only to export "
        "the test models: pip install -e '.[mindspore]'; the README's test command installs it)")
needs_mindspore = pytest.mark.skipif(importlib.util.find_spec("mindspore") is None,
                                     reason=SKIP)


# The builder is our own code writing into the test's folder: no sandbox (it would confine
# writes to the worker's private folder).
BUILD = IsolationLimits(seconds=900, memory_bytes=16 << 30, sandbox=False)


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("mindir")
    data = run_isolated("gerules.testing.ms_models:build",
                        {"kinds": ["cnn", "resnet"], "folder": str(folder), "seed": 0},
                        limits=BUILD)
    return json.loads(data)


def _io(m: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    return np.array(m["input"], np.float32), np.array(m["output"], np.float32)


@needs_mindspore
@pytest.mark.mindspore
def test_cnn_matches_mindspore(models: dict[str, Any]) -> None:
    m = models["cnn"]
    graph = mindir.convert(m["mindir"])
    assert graph.op_counts()["BatchNormalization"] == 1
    x, want = _io(m)
    got = run_graph(graph, {graph.inputs[0].name: x})["output"]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@needs_mindspore
@pytest.mark.mindspore
def test_resnet_through_the_atc_command_line(models: dict[str, Any], tmp_path: Path) -> None:
    m = models["resnet"]
    out = tmp_path / "resnet"
    assert main([f"--model={m['mindir']}", "--framework=1", f"--output={out}",
                 "--input_shape=x:-1,3,18,18", "--dynamic_batch_size=1,2",
                 f"--report={tmp_path / 'r.json'}"]) == 0
    assert json.loads((tmp_path / "r.json").read_text())["framework"] == "mindspore"
    x, want = _io(m)
    got = Model.load(f"{out}.om").run({"x": x})["output"]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@needs_mindspore
@pytest.mark.mindspore
def test_precheck_and_unsupported_primitives(models: dict[str, Any], tmp_path: Path) -> None:
    m = models["resnet"]
    report = tmp_path / "check.json"
    assert main([f"--model={m['mindir']}", "--mode=3", f"--check_report={report}"]) == 0
    result = json.loads(report.read_text())
    assert result["framework"] == "mindspore" and result["result"] == "success"
    assert result["op_types"]["Conv2D"] == 6
    model = mindir.read_model(m["mindir"])
    for p in model.primitives:  # rename one primitive: what an op we lack looks like
        if p.op_type == "Tanh":
            p.op_type = "Erfinv"
    bad = tmp_path / "bad.mindir"
    bad.write_bytes(model.SerializeToString())
    with pytest.raises(ModelError, match=r"bad\.mindir: node '.*' \(Erfinv\): MindSpore "
                       r"primitive 'Erfinv' is not supported"):
        mindir.convert(bad)
    assert main([f"--model={bad}", "--mode=3", f"--check_report={report}"]) == 1
    result = json.loads(report.read_text())
    assert result["summary"]["unsupported_op_types"] == ["Erfinv"]


def test_bad_files(tmp_path: Path) -> None:
    bad = tmp_path / "bad.mindir"
    bad.write_bytes(b"\x0a\xff\xff\xff")
    with pytest.raises(ModelError, match="not a MindIR file: corrupt or truncated"):
        mindir.convert(bad)
    bad.write_bytes(b"")
    with pytest.raises(ModelError, match="holds no graph"):
        mindir.convert(bad)


def test_a_hand_written_mindir_without_mindspore(tmp_path: Path) -> None:
    """Runs everywhere: a MindIR laid out as MindSpore exports it, against NumPy."""
    data, w = tiny_mindir()
    path = tmp_path / "tiny.mindir"
    path.write_bytes(data)
    graph = mindir.convert(path)
    x = np.random.default_rng(1).standard_normal((1, 3, 6, 6)).astype(np.float32)
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1))).astype(np.float64)
    conv = np.zeros((1, 4, 6, 6))
    for i in range(3):
        for j in range(3):
            conv += np.einsum("oc,nchw->nohw", w["conv.weight"][:, :, i, j],
                              xp[:, :, i:i + 6, j:j + 6])
    c = (1, -1, 1, 1)
    bn = ((conv - w["bn.mean"].reshape(c)) / np.sqrt(w["bn.var"].reshape(c) + 1e-5)
          * w["bn.gamma"].reshape(c) + w["bn.beta"].reshape(c))
    want = np.maximum(bn, 0).reshape(1, -1) @ w["fc.weight"].T + w["fc.bias"]
    got = run_graph(graph, {"x": x})["output"]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
