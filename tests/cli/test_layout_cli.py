"""Layout through the CLI: the .om holds formats and physical shapes, the runtime runs them
(poisoned arenas too), atc's --input_format NHWC and --enable_small_channel act, inspect and
--mode=1 show formats, and a plain (format 1.0) model still runs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from gerules.cli.main import main
from gerules.om.reader import OmFile
from gerules.runtime.model import Model
from gerules.testing.models import tiny_resnet

SHAPE = (1, 3, 32, 32)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("layout")
    onnx.save(tiny_resnet().model, path / "net.onnx")
    return path


def _compile(folder: Path, name: str, *flags: str) -> Path:
    argv = [f"--model={folder / 'net.onnx'}", "--framework=5", f"--output={folder / name}",
            "--input_shape=image:1,3,32,32", *flags]
    assert main(argv) == 0
    return folder / f"{name}.om"


def _reference(folder: Path, x: np.ndarray) -> np.ndarray:
    session = ort.InferenceSession(str(folder / "net.onnx"), providers=["CPUExecutionProvider"])
    return session.run(None, {"image": x})[0]


def _image(seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(SHAPE).astype(np.float32)


def test_the_om_holds_formats_and_runs_them_in_its_arena(folder: Path,
                                                         capsys: pytest.CaptureFixture[str]
                                                         ) -> None:
    path = _compile(folder, "blocked")
    out = capsys.readouterr().out
    assert "layout: TransData" in out and "NC1HWC0" in out
    with OmFile(path) as om:
        assert (om.header.major, om.header.minor) == (1, 2)
        table = om.raw_model_def()["variants"][0]["tensors"]
        blocked = [t for t in table if t.get("format") == "NC1HWC0"]
        assert blocked and all(len(t["physical"]) == 5 for t in blocked)
        weights = [i for i in om.raw_model_def()["graph"]["initializers"] if "format" in i]
        assert {i["format"] for i in weights} >= {"FRACTAL_Z", "FRACTAL_NZ"}
        layout = om.report()["figures"]["layout"]
        assert layout["transdata"]["final"] < layout["transdata"]["naive"]
    x = _image()
    with Model.load(path) as model:
        plain = model.run({"image": x})["logits"]
        poisoned = model.run({"image": x}, poison=True)["logits"]
    np.testing.assert_array_equal(plain, poisoned)  # padding garbage never reaches a value
    np.testing.assert_allclose(plain, _reference(folder, x), rtol=1e-4, atol=1e-5)


def test_inspect_and_mode_1_show_every_format(folder: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    path = _compile(folder, "shown")
    capsys.readouterr()
    assert main(["inspect", str(path), "--compact"]) == 0
    doc = json.loads(capsys.readouterr().out)
    table = doc["model_def"]["variants"][0]["tensors"]
    assert {t.get("format", "ND") for t in table} >= {"ND", "NC1HWC0", "FRACTAL_NZ"}
    assert doc["header"]["format_version"] == "1.2"
    assert main(["--mode=1", f"--om={path}"]) == 0
    assert '"format": "NC1HWC0"' in capsys.readouterr().out


def test_input_format_nhwc_changes_the_input_layout(folder: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """The compiled model takes [N, H, W, C]; its first transfer goes straight to NC1HWC0."""
    path = _compile(folder, "nhwc", "--input_format=NHWC")
    capsys.readouterr()
    x = _image(1)
    with Model.load(path) as model:
        (desc,) = model.inputs
        assert desc.shape == (1, 32, 32, 3) and desc.format == "NHWC"
        got = model.run({"image": x.transpose(0, 2, 3, 1).copy()})["logits"]
        transfers = [(n.attrs["src_format"], n.attrs["dst_format"]) for n in model.graph.nodes
                     if n.qualified_op == "ge.TransData"]
        with pytest.raises(Exception, match=r"expects shape float32\[1,32,32,3\] \(NHWC\)"):
            model.run({"image": x})
    assert ("NHWC", "NC1HWC0") in transfers and ("NHWC", "NCHW") not in transfers
    np.testing.assert_allclose(got, _reference(folder, x), rtol=1e-4, atol=1e-5)
    assert main(["--mode=6", f"--om={path}"]) == 0
    assert "input  image: float32[1,32,32,3] (NHWC)" in capsys.readouterr().out


def test_small_channel_is_real_and_priced(folder: Path) -> None:
    plain, small = _compile(folder, "c16"), _compile(folder, "c04", "--enable_small_channel=1")
    x = _image(2)
    with OmFile(small) as om:
        notes = om.report()["notes"]
        est_small = om.report()["figures"]["estimate_us"]["final"]
    with OmFile(plain) as om:
        est_plain = om.report()["figures"]["estimate_us"]["final"]
    assert any("C0 = 4" in n for n in notes) and est_small < est_plain
    with Model.load(small) as model:
        assert any(n.attrs.get("dst_format") == "NC1HWC0_C04" for n in model.graph.nodes)
        np.testing.assert_allclose(model.run({"image": x})["logits"], _reference(folder, x),
                                   rtol=1e-4, atol=1e-5)


def test_a_plain_om_of_format_1_0_still_runs(folder: Path) -> None:
    """What files before formats hold: every tensor plain, version 1.0 (a .om compiled
    without the layout is one): this reader runs them as before."""
    path = _compile(folder, "plain", "--fusion_switch_file=" + str(_switch(folder)))
    x = _image(3)
    with OmFile(path) as om:
        assert (om.header.major, om.header.minor) == (1, 0)
        assert not any("format" in t for t in om.raw_model_def()["variants"][0]["tensors"])
    with Model.load(path) as model:
        np.testing.assert_allclose(model.run({"image": x})["logits"], _reference(folder, x),
                                   rtol=1e-4, atol=1e-5)


def _switch(folder: Path) -> Path:
    path = folder / "no_layout.cfg"
    path.write_text("layout:off\nlayout_motion:off\n")
    return path


def test_save_onnx_states_the_formats_in_plain_types(folder: Path) -> None:
    """ONNX types say no formats: the weights go in plain with a TransData to their format,
    the NHWC input as its physical dims; the file reads back and computes what the .om does."""
    from gerules.onnx_io import load_model
    from gerules.runtime.executor import run_graph

    path = _compile(folder, "saved", "--input_format=NHWC", "--save_onnx")
    graph = load_model(folder / "saved.optimized.onnx")
    assert graph.inputs[0].shape == (1, 32, 32, 3) and graph.inputs[0].type.format == "ND"
    assert all(a.ndim == 1 or graph.type_of(k).format == "ND"
               for k, a in graph.initializers.items())
    x = _image(4).transpose(0, 2, 3, 1).copy()
    with Model.load(path) as model:
        want = model.run({"image": x})["logits"]
    np.testing.assert_allclose(run_graph(graph, {"image": x})["logits"], want, rtol=1e-6)


def test_the_report_shows_the_layout(folder: Path, capsys: pytest.CaptureFixture[str]
                                     ) -> None:
    """The HTML report's layout section: TransData before and after, padding, transfer time,
    every tensor's format; the JSON holds the same record; the summary's saturation line
    names the layout's own e-graph too."""
    capsys.readouterr()
    _compile(folder, "reported", f"--report={folder / 'reported.html'}")
    (line,) = [x for x in capsys.readouterr().out.splitlines() if x.startswith("saturation:")]
    assert re.search(r"; layout: .+ after \d+ iterations, \d+ e-nodes$", line), line
    page = (folder / "reported.html").read_text()
    data = json.loads((folder / "reported.json").read_text())
    layout = data["figures"]["layout"]
    assert 'id="layout"' in page and "a pair around every cube op" in page
    assert "layout e-graph" in page
    assert "every tensor&#x27;s format" in page or "every tensor's format" in page
    assert layout["tensors"] and set(layout["tensors"].values()) >= {"NC1HWC0", "FRACTAL_Z"}
    assert layout["transfer_us"] > 0 and layout["padding_bytes"]["activations"] > 0
