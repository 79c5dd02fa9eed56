"""``ge-rewrite compile`` and ``ge-rewrite inspect`` end to end, through ``main``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from gerules.cli.main import main
from gerules.runtime.executor import run_graph
from gerules.runtime.model import Model
from gerules.testing.models import residual_block


@pytest.fixture
def onnx_file(tmp_path: Path) -> Path:
    path = tmp_path / "block.onnx"
    path.write_bytes(residual_block().model.SerializeToString())
    return path


def test_compile_then_inspect(tmp_path: Path, onnx_file: Path,
                              capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "block"
    assert main(["compile", str(onnx_file), "--output", str(out), "--input_shape",
                 "x:2,16,8,8", "--streams", "2"]) == 0
    summary = capsys.readouterr().out
    assert f"wrote {out}.om" in summary and "default" in summary and "arena" in summary
    assert main(["inspect", f"{out}.om"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [s["kind"] for s in doc["sections"]] == ["MODEL_DEF", "WEIGHTS", "REPORT"]
    md = doc["model_def"]
    assert md["command_line"] == (f"ge-rewrite compile {onnx_file} --output {out} "
                                  "--input_shape x:2,16,8,8 --streams 2")
    assert md["variants"][0]["dims"] == {}
    assert md["variants"][0]["stream_count"] == 2
    memory = doc["report"]["figures"]["memory"]
    assert memory["default"]["arena"] == md["variants"][0]["arena_bytes"]


def test_compiled_model_runs_like_the_source(tmp_path: Path, onnx_file: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    from gerules.onnx_io import load_model

    assert main(["compile", str(onnx_file), "--output", str(tmp_path / "b.om"),
                 "--input-shape", "x:2,16,8,8"]) == 0
    feeds = residual_block().feeds(3)
    with Model.load(tmp_path / "b.om") as model:
        got = model.run(feeds)
    want = run_graph(load_model(onnx_file), feeds)
    for name in want:  # optimized: equal up to float rounding (the fusions are @exact)
        np.testing.assert_allclose(got[name], want[name], rtol=1e-4, atol=1e-5)


def test_inspect_a_bad_file_is_one_line(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.om"
    bad.write_bytes(b"\x89GEROM\r\n" + bytes(100))
    assert main(["inspect", str(bad)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"ge-rewrite: error: {bad}: ")


def test_compile_usage_errors(tmp_path: Path, onnx_file: Path,
                              capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compile", str(onnx_file), "--output", str(tmp_path / "no" / "m")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["compile", str(onnx_file), "--output", str(tmp_path / "m"),
                 "--streams", "0"]) == 2
    assert "--streams must be between 1 and 64" in capsys.readouterr().err
    assert not list(tmp_path.glob("m*"))
