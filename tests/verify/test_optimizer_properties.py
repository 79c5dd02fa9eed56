"""Optimizer properties on random graphs (gerules.testing strategies, with the motifs the rules
fuse: conv blocks, linear layers, GELU and LayerNorm subgraphs, attention, no-op ops):

- optimized at O1, O2 and O3 (and for the onnx target) a graph stays equivalent: same inputs
  and outputs, values within the float32 tolerance of @exact rules (1e-4, see gerules.verify);
- extraction never yields a cycle, even though no-op ops put classes inside themselves;
- optimization is idempotent in cost: optimizing the result again never finds a graph the
  cost model estimates cheaper by more than rounding.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from gerules.ir.graph import Graph
from gerules.ir.verify import find_cycle, verify
from gerules.opt.optimize import OptimizeOptions, optimize
from gerules.testing import assert_equivalent, graphs, graphs_with_feeds, random_feeds

LEVELS = st.sampled_from(["O1", "O2", "O3"])
EXAMPLES = settings(max_examples=max(10, settings().max_examples // 2))


def _structure(graph: Graph, out: Graph) -> None:
    assert find_cycle(out.nodes) == []
    verify(out)
    assert [v.name for v in out.inputs] == [v.name for v in graph.inputs]
    assert [(v.name, v.dtype) for v in out.outputs] == [(v.name, v.dtype) for v in graph.outputs]


@EXAMPLES
@given(graphs_with_feeds(max_nodes=10), LEVELS)
def test_optimized_graphs_stay_equivalent(case: tuple[Graph, dict[str, np.ndarray]],
                                          level: str) -> None:
    graph, feeds = case
    out, _ = optimize(graph, OptimizeOptions(opt_level=level))
    _structure(graph, out)
    assert_equivalent(graph, out, [feeds, random_feeds(graph, 1)], rtol=1e-4, atol=1e-4)


@EXAMPLES
@given(graphs(max_nodes=10, symbolic=True), LEVELS)
def test_symbolic_batch_and_the_onnx_target(graph: Graph, level: str) -> None:
    out, _ = optimize(graph, OptimizeOptions(opt_level=level, target="onnx"))
    _structure(graph, out)
    # only ai.onnx ops, and composite ops, which are written as ONNX functions
    assert all(out.function(*op.rsplit(".", 1)) for op in out.op_counts() if "." in op)
    assert_equivalent(graph, out, rtol=1e-4, atol=1e-4, runs=2)


@EXAMPLES
@given(graphs(max_nodes=10), LEVELS)
def test_optimization_is_idempotent_in_cost(graph: Graph, level: str) -> None:
    options = OptimizeOptions(opt_level=level)
    once, first = optimize(graph, options)
    twice, second = optimize(once, options)
    before, after = first.estimate_after.total_us, second.estimate_after.total_us
    assert after >= before * (1 - 1e-9) - 1e-9, (before, after, once.op_counts(),
                                                  twice.op_counts())
    assert first.estimate_after.total_us <= first.estimate_before.total_us * (1 + 1e-9)
