"""Models exported by torch's ONNX exporter (bench/models.py) load and run like onnxruntime.

Covers what hand-built models do not: the exporter's Constant nodes, dynamic batch dims with
Shape/Gather/Unsqueeze/Concat chains, Clip from ReLU6, unfolded BatchNormalization. Only the
small bench models run here (the big ones are bench/runtime.py's job).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import numpy as np
import onnxruntime as ort
import pytest

from gerules.onnx_io import load_model
from gerules.runtime.executor import run_graph

pytest.importorskip("torch", reason="the torch extra is not installed (pip install -e .[torch])")
pytestmark = pytest.mark.torch

BENCH_MODELS = Path(__file__).resolve().parents[2] / "bench" / "models.py"


def _bench_models() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_models", BENCH_MODELS)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name, opset", [("tcn_small", 17), ("tcn_small", 18),
                                         ("mobilenetv2", 18)])
def test_torch_export_matches_onnxruntime(name: str, opset: int, tmp_path: Path) -> None:
    bench = _bench_models()
    path = bench.export(name, opset, cache=tmp_path)
    graph = load_model(path)
    assert graph.inputs[0].shape is not None and graph.inputs[0].shape[0] == "batch"
    names = bench.MODELS[name][2]
    tensors = bench.example_inputs(name, seed=3)
    feeds = {n: t.numpy() for n, t in zip(names, tensors, strict=True)}
    if name == "tcn_small":  # a batch of 2 exercises the symbolic dim
        feeds = {n: np.concatenate([a, a[:, ::-1]]) for n, a in feeds.items()}
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    ours = run_graph(graph, feeds)
    for (key, got), want in zip(ours.items(), session.run(None, feeds), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, err_msg=key)
