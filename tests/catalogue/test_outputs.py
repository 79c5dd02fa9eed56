"""What the good path leaves behind: outputs with the usual file mode, nothing else."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from gerules.cli.main import main
from gerules.testing.bad_models import good_model


@pytest.mark.parametrize("argv", [["compile", "m.onnx", "--output", "out"],
                                  ["optimize", "m.onnx", "-o", "out.onnx"]])
def test_outputs_follow_the_umask(tmp_path: Path, argv: list[str],
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Files are written through a 0600 temporary file and renamed: the result must still get
    ``0666 & ~umask`` like any other tool's output, or other users cannot read the model."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "m.onnx").write_bytes(good_model().SerializeToString())
    old = os.umask(0o022)
    try:
        assert main(argv) == 0
    finally:
        os.umask(old)
    written = sorted(p for p in tmp_path.iterdir() if p.name != "m.onnx")
    assert [p.name for p in written] in (["fusion_result.json", "out.om"], ["out.onnx"])
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o644 for p in written)
