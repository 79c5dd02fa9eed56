"""Differential: small real architectures, our runtime against onnxruntime, and the round trip.

Each model from ``gerules.testing.models`` runs on seeded inputs through our executor and
through onnxruntime (graph optimizations off, so it computes the graph as written); outputs
must agree within rtol 1e-4, atol 1e-5. Import -> export must pass the full checker, keep the
graph (re-import gives the same nodes, names and weights) and give onnxruntime the same
outputs bit for bit.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from gerules.ir.registry import default_registry
from gerules.onnx_io import load_model, to_model_proto
from gerules.runtime.executor import run_graph
from gerules.testing.models import MODELS, ModelCase, transformer_encoder
from gerules.testing.oracle import run_onnxruntime

RTOL, ATOL = 1e-4, 1e-5


def _cases() -> list[ModelCase]:
    return [*(build() for build in MODELS.values()),
            transformer_encoder(opset=18, seed=1, layers=1, batch=3, seq=5)]


CASES = _cases()


_ort = run_onnxruntime


def _need_ops(model: onnx.ModelProto) -> None:
    missing = sorted({n.op_type for n in model.graph.node
                      if not default_registry().has(n.op_type)})
    assert not missing, f"ops of the test models missing from the registry: {missing}"


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.name}-opset"
                         f"{c.model.opset_import[0].version}")
@pytest.mark.parametrize("seed", [0, 1])
def test_runtime_matches_onnxruntime(case: ModelCase, seed: int) -> None:
    _need_ops(case.model)
    graph = load_model(case.model.SerializeToString())
    feeds = case.feeds(seed)
    ours = run_graph(graph, feeds)
    theirs = _ort(case.model, feeds)
    assert list(ours) == [o.name for o in case.model.graph.output]
    for (name, got), want in zip(ours.items(), theirs, strict=True):
        assert got.dtype == want.dtype and got.shape == want.shape, name
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL, err_msg=name)


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.name}-opset"
                         f"{c.model.opset_import[0].version}")
def test_round_trip_keeps_the_model(case: ModelCase) -> None:
    _need_ops(case.model)
    graph = load_model(case.model.SerializeToString())
    exported = to_model_proto(graph)
    onnx.checker.check_model(exported, full_check=True)
    again = load_model(exported.SerializeToString())
    assert again.nodes == graph.nodes
    assert again.inputs == graph.inputs and again.outputs == graph.outputs
    assert [n.name for n in exported.graph.node] == [n.name for n in case.model.graph.node]
    assert all(np.array_equal(again.initializers[k], v) for k, v in graph.initializers.items())
    feeds = case.feeds(0)
    for before, after in zip(_ort(case.model, feeds), _ort(exported, feeds), strict=True):
        assert np.array_equal(before, after)
