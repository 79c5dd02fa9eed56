"""The golden rule library on whole graphs: lower, saturate, extract, raise, run.

Uses the committed optimizer foundations (``gerules.opt``: lowering, NPU extraction cost,
raising) with the compiled ``tests/dsl/good`` library, so the rule language's conventions
are checked against the real e-graph conventions, not only against hand-built e-graphs.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from gerules.cost.model import NpuCostModel
from gerules.dsl import load_compiled
from gerules.dsl.compile import CompiledRules
from gerules.engine import Limits, Runner, extract
from gerules.ir.infer import infer_graph
from gerules.ir.verify import verify
from gerules.onnx_io import load_model
from gerules.opt.costs import ExtractionCost
from gerules.runtime.executor import run_graph
from gerules.terms.lower import lower
from gerules.terms.raise_graph import raise_graph
from gerules.terms.terms import TermContext
from gerules.testing.models import cnn, residual_block, transformer_encoder

from .conftest import GOOD


@pytest.fixture(scope="module")
def library() -> CompiledRules:
    return load_compiled([GOOD], soundness=False)


CASES = {
    "cnn": (cnn, {"ge.FusedConv": 2, "BatchNormalization": 0, "Relu": 0}),
    "residual": (residual_block, {"ge.FusedConv": 2, "Add": 0, "Relu": 0}),
    "transformer": (transformer_encoder, {"ge.Attention": 2, "ge.AddLayerNorm": 4,
                                          "Softmax": 0, "Erf": 0, "MatMul": 0}),
}


@pytest.mark.parametrize("name", CASES)
def test_library_optimizes_and_preserves_outputs(name: str, library: CompiledRules) -> None:
    build, expected = CASES[name]
    case = build()
    graph = infer_graph(load_model(case.model.SerializeToString()))
    low = lower(graph, TermContext(library.registry, graph.opset,  # the library's own ops
                                   {v.name: v.type for v in graph.inputs}))
    report = Runner(low.egraph, limits=Limits(iterations=40, nodes=100_000, seconds=30)
                    ).run(library.schedules["O2"])
    assert report.stop_reason.value == "saturated"
    cost = ExtractionCost(low.ctx, NpuCostModel("Ascend910"))
    out = verify(raise_graph(graph, low, extract(low.egraph, list(low.roots.values()), cost)))
    ops = Counter(n.qualified_op for n in out.nodes)
    assert {op: ops[op] for op in expected} == expected
    feeds = case.feeds(0)
    before, after = run_graph(graph, feeds), run_graph(out, feeds)
    for k, v in before.items():
        np.testing.assert_allclose(after[k], v, rtol=1e-4, atol=1e-5)
