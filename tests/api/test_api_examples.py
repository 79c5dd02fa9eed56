"""The examples in ``examples/`` run, each in its own process, and say what they should."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Every example started at once (they are independent), then collected."""
    out = tmp_path_factory.mktemp("examples")
    commands = {
        "build_cnn": [str(EXAMPLES / "build_cnn.py"), "--output", str(out)],
        "optimize_onnx": [str(EXAMPLES / "optimize_onnx.py")],
        "run_async": [str(EXAMPLES / "run_async.py"), "--rounds", "2"],
    }
    procs = {name: subprocess.Popen([sys.executable, *args], cwd=out, text=True,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for name, args in commands.items()}
    results = {}
    for name, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=300)
        assert proc.returncode == 0, f"{name} failed:\n{stderr}"
        results[name] = stdout
    assert (out / "hand_cnn.om").is_file()
    return results


def test_every_example_is_run() -> None:
    assert {p.stem for p in EXAMPLES.glob("*.py")} == {"build_cnn", "optimize_onnx",
                                                       "run_async"}


def test_build_cnn_compiles_and_agrees_with_the_reference(runs: dict[str, str]) -> None:
    text = runs["build_cnn"]
    assert "output probs: float32[4,10]" in text
    assert "ge.FusedConv x2" in text and "BatchNormalization" not in text.split("compiled graph")[1]
    error = float(re.search(r"max \|om - reference\| = (\S+)", text).group(1))  # type: ignore[union-attr]
    assert error < 1e-4


def test_optimize_onnx_prints_the_report(runs: dict[str, str]) -> None:
    text = runs["optimize_onnx"]
    assert "parsed residual.onnx: inputs x float32[N,16,8,8]" in text
    fusions = int(re.search(r"fusions \((\d+)\)", text).group(1))  # type: ignore[union-attr]
    assert fusions >= 1 and text.count(" by fuse_") == fusions


def test_run_async_runs_every_compiled_batch(runs: dict[str, str]) -> None:
    text = runs["run_async"]
    shapes = re.findall(r"batch \d+: logits\[(\d+), 10\]", text)
    assert sorted(map(int, shapes)) == [1, 1, 2, 2, 4, 4]
    assert "6 runs in" in text
