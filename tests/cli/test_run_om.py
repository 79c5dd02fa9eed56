"""``ge-rewrite run NAME.om`` runs a compiled model and agrees with running its source."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest

from gerules.cli.main import main
from gerules.testing.models import cnn


def _table(text: str) -> dict[str, list[str]]:
    rows = [line.split() for line in text.strip().splitlines()[1:]]
    return {r[0]: r[1:] for r in rows}


def test_om_and_onnx_print_the_same_outputs(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    model = tmp_path / "cnn.onnx"
    onnx.save(cnn().model, model)
    assert main(["compile", str(model), "--output", str(tmp_path / "cnn"),
                 "--input_shape", "input:2,3,16,16"]) == 0
    capsys.readouterr()
    assert main(["run", str(tmp_path / "cnn.om"), "--seed", "3"]) == 0
    om = _table(capsys.readouterr().out)
    assert main(["run", str(model), "--seed", "3", "--input-shape", "input:2,3,16,16"]) == 0
    onnx_rows = _table(capsys.readouterr().out)
    assert om["logits"][:3] == onnx_rows["logits"][:3] == ["[2,", "10]", "float32"]
    # the .om holds the optimized graph: equal sums up to float rounding
    assert abs(float(om["logits"][3]) - float(onnx_rows["logits"][3])) < 1e-4


def test_om_outputs_can_be_saved(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = tmp_path / "cnn.onnx"
    onnx.save(cnn().model, model)
    assert main(["compile", str(model), "--output", str(tmp_path / "m")]) == 0
    assert main(["run", str(tmp_path / "m.om"), "--output-dir", str(tmp_path / "out")]) == 0
    saved = np.load(tmp_path / "out" / "logits.npy")
    assert saved.shape == (1, 10) and np.isfinite(saved).all()
