"""An op defined in `.ger` (``examples/rules/rms_norm.ger``) end to end through the CLI, on a
small torch-exported model at opsets 17 and 18: fused, written as an ONNX function that
onnxruntime runs, stored with its body in a `.om` that runs without the rule file, read back
from an ONNX file, and listed by ``ge-rewrite ops``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest

from gerules.cli.main import main
from gerules.runtime.model import Model

ROOT = Path(__file__).resolve().parents[2]
RMS = ROOT / "examples" / "rules" / "rms_norm.ger"
SKIP = "torch is not installed (the optional 'torch' extra; the README's test command has it)"


def export(torch, module, shape: tuple[int, ...], path: Path, opset: int) -> Path:  # noqa: ANN001
    torch.onnx.export(module.eval(), (torch.randn(*shape),), str(path), dynamo=False,
                      opset_version=opset, input_names=["x"], output_names=["y"],
                      training=torch.onnx.TrainingMode.PRESERVE)
    return path


def rms_model(torch):  # noqa: ANN001, ANN201
    torch.manual_seed(0)

    class RMSNorm(torch.nn.Module):
        def __init__(self, dim: int) -> None:
            super().__init__()
            self.weight = torch.nn.Parameter(torch.rand(dim) + 0.5)

        def forward(self, x):  # noqa: ANN001, ANN202
            return self.weight * (x / torch.sqrt(torch.mean(x * x, -1, keepdim=True) + 1e-6))

    return torch.nn.Sequential(torch.nn.Linear(16, 16), RMSNorm(16))


def onnxruntime_run(path: Path, x: np.ndarray) -> np.ndarray:
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return np.asarray(session.run(None, {"x": x})[0])


@pytest.mark.torch
@pytest.mark.parametrize("opset", [17, 18])
def test_a_composite_op_fuses_runs_and_travels(opset: int, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    torch = pytest.importorskip("torch", reason=SKIP)
    model = export(torch, rms_model(torch), (2, 4, 16), tmp_path / "m.onnx", opset)
    x = np.random.default_rng(opset).standard_normal((2, 4, 16)).astype(np.float32)
    want = onnxruntime_run(model, x)
    out = tmp_path / "out.onnx"
    assert main(["optimize", str(model), "--rules", str(RMS), "-o", str(out)]) == 0
    assert "fuse_rms_norm" in capsys.readouterr().out
    written = onnx.load(out)
    assert [f.name for f in written.functions] == ["RMSNorm"]
    assert "ReduceMean" not in {n.op_type for n in written.graph.node}
    np.testing.assert_allclose(onnxruntime_run(out, x), want, rtol=1e-5, atol=1e-6)
    # compiled, the .om holds the body: it runs with no rule file anywhere
    assert main(["compile", str(model), "--rules", str(RMS), "--output",
                 str(tmp_path / "m")]) == 0
    with Model.load(tmp_path / "m.om") as m:
        np.testing.assert_allclose(m.run({"x": x})["y"], want, rtol=1e-5, atol=1e-6)
    # an ONNX file holding the op as a function compiles without the rule file
    npu = tmp_path / "npu.onnx"
    assert main(["optimize", str(model), "--rules", str(RMS), "--target", "npu", "-o",
                 str(npu)]) == 0
    assert main(["compile", str(npu), "--output", str(tmp_path / "again")]) == 0
    with Model.load(tmp_path / "again.om") as m:
        np.testing.assert_allclose(m.run({"x": x})["y"], want, rtol=1e-5, atol=1e-6)


def test_ops_list_and_show_name_kinds_and_bodies(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ops", "list", "--domain", "ge", "--rules", str(RMS)]) == 0
    rows = {line.split()[0]: line.split()[1] for line in capsys.readouterr().out.splitlines()[1:]}
    assert rows["ge.RMSNorm"] == "composite" and rows["ge.SiLU"] == "composite"
    assert rows["ge.AddLayerNorm"] == "fused" and "ge.Elementwise" not in rows
    assert main(["ops", "show", "ge.RMSNorm", "--rules", str(RMS)]) == 0
    text = capsys.readouterr().out
    assert "attribute epsilon: float, default 1e-06" in text
    assert f"defined at {RMS}:10" in text and "Mul(w, Div(x, Sqrt(" in text
    assert main(["ops", "show", "ReduceMean"]) == 0
    text = capsys.readouterr().out
    assert "ReduceMean (built-in, opset 18+)" in text and "axes? (int64)" in text
    assert main(["ops", "show", "ge.RMSNrom", "--rules", str(RMS)]) == 2
    assert "did you mean ge.RMSNorm?" in capsys.readouterr().err
