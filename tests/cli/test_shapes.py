"""Shapes that just work: overrides checked before any work, a baked-in batch named with its
fix (--fix_batch_dims, proven by inference), torch.export guards in words, and atc's
--dynamic_image_size, --dynamic_dims and --input_shape_range compiled into one .om."""

from __future__ import annotations

import importlib.util
import json
import time
from pathlib import Path

import numpy as np
import onnx
import pytest

from gerules.cli.main import main
from gerules.onnx_io import load_model
from gerules.runtime.executor import run_graph
from gerules.runtime.model import Model
from gerules.testing.models import residual_block, transformer_encoder

BENCH_MODELS = Path(__file__).resolve().parents[2] / "bench" / "models.py"


def _static_bert(path: Path) -> Path:
    """A small BERT exported by torch at batch 1 without dynamic axes: its attention Reshapes
    get constant targets [1, 16, 4, 16] and [1, 16, 64]."""
    torch = pytest.importorskip("torch", reason="the torch extra is not installed")
    spec = importlib.util.spec_from_file_location("bench_models_shapes", BENCH_MODELS)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    torch.manual_seed(0)
    model = bench.Bert(layers=2, hidden=64, heads=4, vocab=100, max_len=32).eval()
    ids = torch.randint(0, 100, (1, 16))
    with torch.no_grad():
        torch.onnx.export(model, (ids, torch.ones_like(ids)), str(path), dynamo=False,
                          opset_version=17, training=torch.onnx.TrainingMode.PRESERVE,
                          input_names=["input_ids", "attention_mask"],
                          output_names=["last_hidden_state", "pooler_output"])
    return path


@pytest.fixture(scope="module")
def bert(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _static_bert(tmp_path_factory.mktemp("bert") / "bert.onnx")


BERT_SHAPES = ["--input_shape=input_ids:-1,16;attention_mask:-1,16", "--dynamic_batch_size=1,8"]


def test_a_baked_batch_is_named_with_its_fix_before_any_work(
        bert: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compile", str(bert), f"--output={tmp_path / 'b'}", *BERT_SHAPES]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "node '/layers.0/attn/Reshape' (Reshape)" in err
    assert "cannot take batch=8" in err and "[1, 16, 4, 16] hard-codes dim 'batch' as 1" in err
    assert "--fix_batch_dims" in err and "dynamic_axes" in err
    assert not list(tmp_path.iterdir())


def test_fix_batch_dims_converts_and_computes_what_the_model_does(
        bert: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import onnxruntime as ort

    out = tmp_path / "b"
    assert main(["compile", str(bert), f"--output={out}", *BERT_SHAPES, "--fix_batch_dims",
                 f"--report={out}.json", "--quiet"]) == 0
    fixed = json.loads(Path(f"{out}.json").read_text())["shapes"]["fix_batch_dims"]
    assert len(fixed) == 8 and "/layers.0/attn/Reshape" in fixed
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 100, (8, 16)).astype(np.int64)
    mask = np.ones((8, 16), np.int64)
    mask[3:, 12:] = 0
    session = ort.InferenceSession(str(bert), providers=["CPUExecutionProvider"])
    want = np.concatenate([session.run(["last_hidden_state"], {
        "input_ids": ids[k:k + 1], "attention_mask": mask[k:k + 1]})[0] for k in range(8)])
    with Model.load(f"{out}.om") as model:
        got = model.run({"input_ids": ids, "attention_mask": mask})["last_hidden_state"]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_a_torch_export_guard_names_the_flag(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    torch = pytest.importorskip("torch", reason="the torch extra is not installed")
    net = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()).eval()
    torch.export.save(torch.export.export(net, (torch.randn(2, 4),)), tmp_path / "net.pt2")
    assert main(["compile", str(tmp_path / "net.pt2"), "--framework=pytorch",
                 f"--output={tmp_path / 'n'}", "--input_shape=input:-1,4",
                 "--dynamic_batch_size=1,8"]) == 1
    err = capsys.readouterr().err
    assert "Guard failed" not in err and err.count("\n") == 1
    assert "exported with input 'input' dim 0 fixed to 2" in err
    assert "--input_shape input:2,4" in err and "torch.export.Dim" in err


def _reference(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return run_graph(load_model(model.SerializeToString()), feeds)


def test_dynamic_image_size_compiles_one_plan_per_size(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    case = residual_block()
    onnx.save(case.model, tmp_path / "block.onnx")
    out = tmp_path / "img"
    assert main(["compile", str(tmp_path / "block.onnx"), f"--output={out}", "--quiet",
                 "--input_shape=x:1,16,-1,-1", "--dynamic_image_size=8,8;16,16"]) == 0
    x = np.random.default_rng(1).standard_normal((1, 16, 16, 16)).astype(np.float32)
    with Model.load(f"{out}.om") as model:
        assert len(model.variants) == 2
        got = model.run({"x": x})
    want = _reference(residual_block(size=16).model, {"x": x})  # the same weights at 16x16
    np.testing.assert_allclose(got["pooled"], want["pooled"], rtol=1e-4, atol=1e-5)


def test_dynamic_dims_shares_a_symbol_between_inputs(tmp_path: Path) -> None:
    case = transformer_encoder()
    onnx.save(case.model, tmp_path / "enc.onnx")
    out = tmp_path / "dd"
    assert main(["compile", str(tmp_path / "enc.onnx"), f"--output={out}", "--quiet",
                 "--input_shape=input_ids:-1,-1;attention_mask:-1,-1",
                 "--dynamic_dims=1,8,1,8;2,16,2,16", f"--report={out}.json"]) == 0
    shapes = json.loads(Path(f"{out}.json").read_text())["shapes"]
    assert shapes["symbols"] == ["batch", "seq"]
    assert shapes["gears"] == [{"batch": 1, "seq": 8}, {"batch": 2, "seq": 16}]
    feeds = transformer_encoder(seq=16).feeds(0)
    with Model.load(f"{out}.om") as model:
        got = model.run(feeds)
    want = _reference(case.model, feeds)
    np.testing.assert_allclose(got["pooler_output"], want["pooler_output"], rtol=1e-4,
                               atol=1e-5)


def test_input_shape_range_runs_any_size_in_its_bucket(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    case = residual_block()
    onnx.save(case.model, tmp_path / "block.onnx")
    out = tmp_path / "rg"
    assert main(["compile", str(tmp_path / "block.onnx"), f"--output={out}", "--quiet",
                 "--input_shape_range=x:[1~6],16,8,8"]) == 0
    with Model.load(f"{out}.om") as model:
        assert [v.name for v in model.variants] == ["N=1-1", "N=2-3", "N=4-6"]
        for batch in (1, 3, 5):
            x = np.random.default_rng(batch).standard_normal((batch, 16, 8, 8))
            got = model.run({"x": x.astype(np.float32)})
            want = _reference(case.model, {"x": x.astype(np.float32)})
            np.testing.assert_allclose(got["block.relu"], want["block.relu"], rtol=1e-4,
                                       atol=1e-5)
    assert main(["run", f"{out}.om", "--input-shape", "x:7,16,8,8"]) == 2
    assert "outside the compiled ranges (N in 1..6)" in capsys.readouterr().err


@pytest.mark.parametrize(("flags", "message"), [
    (["--input_shape=x:1,16,-1,-1", "--dynamic_image_size=8,8", "--dynamic_batch_size=1"],
     "cannot be combined"),
    (["--input_shape=x:1,16,8,-1", "--dynamic_image_size=8,8"], "exactly two -1 dims"),
    (["--input_shape=x:-1,16,8,8", "--dynamic_dims=1,2"], "has 2 sizes; --input_shape has 1"),
    (["--input_shape_range=x:[1~-1],16,8,8"], "no upper bound"),
    (["--input_shape_range=x:[4~2],16,8,8"], "needs 1 <= LO <= HI"),
])
def test_bad_gears_are_usage_errors(tmp_path: Path, flags: list[str], message: str,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    onnx.save(residual_block().model, tmp_path / "block.onnx")
    assert main(["compile", str(tmp_path / "block.onnx"), f"--output={tmp_path / 'x'}",
                 *flags]) == 2
    assert message in capsys.readouterr().err


def test_a_wrong_override_fails_in_the_shapes_phase(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """A size the graph cannot take is found by inference per gear, before optimizing."""
    onnx.save(residual_block().model, tmp_path / "block.onnx")
    start = time.perf_counter()
    assert main(["compile", str(tmp_path / "block.onnx"), f"--output={tmp_path / 'x'}",
                 "--input_shape=x:-1,8,8,8", "--dynamic_batch_size=1,2"]) == 1
    err = capsys.readouterr().err
    assert "Conv" in err and time.perf_counter() - start < 60
