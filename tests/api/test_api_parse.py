"""``parse_model``: ONNX from a path, bytes or a proto; atc's input_shape; PyTorch dispatch."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import numpy as np
import onnx
import pytest

import gerules as ge
from gerules.api import parse
from gerules.testing.models import cnn


@pytest.fixture(scope="module")
def model_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("parse") / "cnn.onnx"
    onnx.save(cnn(batch=2).model, str(path))
    return path


def test_path_bytes_and_proto_give_the_same_graph(model_file: Path) -> None:
    proto = onnx.load(str(model_file))
    graphs = [ge.parse_model(model_file), ge.parse_model(str(model_file)),
              ge.parse_model(model_file.read_bytes()), ge.parse_model(proto)]
    first = graphs[0]
    assert first.input_names == ("input",) and first.inputs[0].shape == ("N", 3, 16, 16)
    for g in graphs[1:]:
        assert g.nodes == first.nodes and g.inputs == first.inputs
    assert "input_format" not in first.metadata


@pytest.mark.parametrize("shape", [{"input": [4, 3, 16, 16]}, {"input": (4, 3, 16, 16)},
                                   "input:4,3,16,16", "input:4,3,16,16;"])
def test_input_shape_fixes_dims(model_file: Path, shape: object) -> None:
    g = ge.parse_model(model_file, input_shape=shape)  # type: ignore[arg-type]
    assert g.inputs[0].shape == (4, 3, 16, 16)
    assert g.outputs[0].shape == (4, 10)


def test_minus_one_keeps_the_batch_dim_dynamic(model_file: Path) -> None:
    g = ge.parse_model(model_file, input_shape={"input": [-1, 3, 16, 16]})
    assert g.inputs[0].shape == ("N", 3, 16, 16)


@pytest.mark.parametrize(("shape", "message"), [
    ({"nope": [1, 3, 16, 16]}, "no model input is called 'nope'"),
    ({"input": [1, 3]}, "2 dims given, the input has rank 4"),
    ({"input": [1, -2, 3, 3]}, "dims must be ints >= 0 or -1"),
    ({"input": "1,3"}, "dims must be a list of ints"),
    ("input=1,3", "expected NAME:D0,D1"),
    ("input:a,b", "dims must be integers"),
    (42, "must be a mapping"),
])
def test_bad_input_shapes_are_usage_errors(model_file: Path, shape: object,
                                           message: str) -> None:
    with pytest.raises(ge.UsageError, match=message):
        ge.parse_model(model_file, input_shape=shape)  # type: ignore[arg-type]


def test_input_format_is_checked_and_recorded(model_file: Path) -> None:
    assert ge.parse_model(model_file, input_format="nd").metadata["input_format"] == "ND"
    assert ge.parse_model(model_file, input_format="NCHW").metadata["input_format"] == "NCHW"
    nhwc = ge.parse_model(model_file, input_format="NHWC")
    assert nhwc.inputs[0].shape == ("N", 3, 16, 16)  # recorded: compile changes the layout
    assert nhwc.metadata["input_format"] == "NHWC"
    with pytest.raises(ge.UsageError, match="input_format 'NCDHW' is not supported"):
        ge.parse_model(model_file, input_format="NCDHW")
    flat = ge.GraphBuilder("flat")
    flat.output(flat.ops.Relu(flat.input("v", [2, 8])))
    with pytest.raises(ge.UsageError, match=r"input_format NCHW needs a 4-D input; the inputs "
                                            r"are v float32\[2,8\]"):
        ge.parse_model(flat.to_onnx(), input_format="NCHW")


def test_bad_files_are_model_errors_naming_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "broken.onnx"
    bad.write_bytes(b"\x08\x07\x12garbage")
    with pytest.raises(ge.ModelError, match=str(bad)):
        ge.parse_model(bad)
    with pytest.raises(ge.ModelError, match="no such file"):
        ge.parse_model(tmp_path / "missing.onnx")
    with pytest.raises(ge.UsageError, match="expected a path, bytes or an onnx.ModelProto"):
        ge.parse_model(3.5)  # type: ignore[arg-type]
    with pytest.raises(ge.UsageError, match="framework 'chainer' is not supported"):
        ge.parse_model(bad, framework="chainer")
    with pytest.raises(ge.UsageError, match="a caffe model is given as a file path"):
        ge.parse_model(b"bytes", framework="0")


def _fail_import(monkeypatch: pytest.MonkeyPatch, missing: str) -> None:
    def fake(name: str) -> types.ModuleType:
        raise ModuleNotFoundError(f"No module named '{missing}'", name=missing)

    monkeypatch.setattr(parse.importlib, "import_module", fake)


def test_pytorch_without_the_frontend_says_what_to_install(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fail_import(monkeypatch, "gerules.frontends")
    with pytest.raises(ge.UsageError, match=r"torch frontend \(gerules.frontends.torch\)"):
        ge.parse_model(tmp_path / "model.pt")
    _fail_import(monkeypatch, "torch")
    with pytest.raises(ge.UsageError, match=r"pip install 'gerules\[torch\]'"):
        ge.parse_model(tmp_path / "model.bin", framework="pytorch")


def test_pytorch_files_go_to_the_frontend(model_file: Path, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[object, object]] = []

    def convert_archive(source: object, input_shapes: object, *, trust: bool) -> ge.Graph:
        calls.append((source, input_shapes))
        return ge.parse_model(model_file)

    fake = types.ModuleType("gerules.frontends.torch")
    fake.convert_archive = convert_archive  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "gerules.frontends.torch", fake)
    g = ge.parse_model(tmp_path / "net.pt2", input_shape="input:3,3,16,16")
    assert calls == [(tmp_path / "net.pt2", {"input": (3, 3, 16, 16)})]
    assert g.inputs[0].shape == (3, 3, 16, 16)
    with pytest.raises(ge.UsageError, match="given as a file path"):
        ge.parse_model(b"bytes", framework="pytorch")
    del fake.convert_archive  # type: ignore[attr-defined]
    with pytest.raises(ge.UsageError, match="has no convert_archive"):
        ge.parse_model(tmp_path / "net.pth")


@pytest.mark.slow
@pytest.mark.torch
@pytest.mark.filterwarnings("ignore::DeprecationWarning:torch")
def test_a_torchscript_archive_parses_and_computes_what_torch_does(tmp_path: Path) -> None:
    """TorchScript runs its own code when loaded: refused unless trusted (docs/SECURITY.md)."""
    torch = pytest.importorskip("torch", reason="the torch extra is not installed")
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU()).eval()
    path = tmp_path / "net.pt"
    torch.jit.save(torch.jit.trace(module, torch.zeros(1, 3, 8, 8)), str(path))
    with pytest.raises(ge.ModelError, match="refused without --trust_archive"):
        ge.parse_model(path, input_shape={"x": [2, 3, 8, 8]})
    g = ge.parse_model(path, input_shape={"x": [2, 3, 8, 8]}, trust_archive=True)
    assert g.input_names == ("x",) and g.inputs[0].shape == (2, 3, 8, 8)
    x = np.random.default_rng(0).standard_normal((2, 3, 8, 8)).astype(np.float32)
    with ge.Session(g, executor="reference") as session:
        got = session.run([x])[g.output_names[0]]
    with torch.no_grad():
        want = module(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
