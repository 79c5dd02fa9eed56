"""gerules.testing strategies: shapes broadcast, tensors stay in bounds, graphs verify and run
with the types they declare, and random graphs agree with onnxruntime."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter

import numpy as np
import onnxruntime as ort
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gerules.ir.graph import Graph
from gerules.ir.verify import verify
from gerules.onnx_io import to_model_proto
from gerules.runtime.executor import run_graph
from gerules.testing import (
    broadcastable_shapes,
    dtypes,
    feeds,
    graphs,
    graphs_with_feeds,
    random_feeds,
    random_graph,
    shapes,
    tensors,
)
from gerules.testing.opgen import GENERATORS


def _static(shape: tuple[object, ...], size: int = 3) -> tuple[int, ...]:
    return tuple(d if isinstance(d, int) else size for d in shape)


@given(shapes(min_rank=1, max_rank=3, max_side=4, symbolic=True))
def test_shapes_respect_their_bounds(shape: tuple[object, ...]) -> None:
    assert 1 <= len(shape) <= 3
    assert all(d == "N" or (isinstance(d, int) and 1 <= d <= 4) for d in shape)


@given(broadcastable_shapes(symbolic=True))
def test_broadcastable_shapes_broadcast(pair: tuple[tuple[object, ...], ...]) -> None:
    a, b = pair
    out = np.broadcast_shapes(_static(a), _static(b))
    for size in (1, 2):  # whatever size the symbol takes
        assert np.broadcast_shapes(_static(a, size), _static(b, size)) is not None
    assert len(out) == max(len(a), len(b))


@given(tensors(dtypes(), shapes(max_rank=3), min_value=-2, max_value=2))
def test_tensors_are_finite_and_bounded(array: np.ndarray) -> None:
    assert array.dtype.name in ("float16", "float32", "float64")
    assert np.isfinite(array).all() and (np.abs(array) <= 2).all()


def test_tensors_with_nan_and_inf_produce_them() -> None:
    seen: Counter[str] = Counter()

    @given(tensors("float32", (8,), allow_nan=True, allow_infinity=True))
    def draw(array: np.ndarray) -> None:
        seen["nan"] += int(np.isnan(array).any())
        seen["inf"] += int(np.isinf(array).any())

    draw()
    assert seen["nan"] and seen["inf"]


@given(tensors(dtypes(floats=False, ints=True, bools=True), (3, 2), min_value=-5, max_value=5))
def test_integer_and_bool_tensors(array: np.ndarray) -> None:
    assert array.shape == (3, 2)
    assert array.dtype.kind == "b" or (np.abs(array.astype(np.int64)) <= 5).all()


def _check_runs(graph: Graph, inputs: dict[str, np.ndarray]) -> None:
    """The graph verifies and its outputs have exactly the declared dtypes and static dims."""
    verify(graph)
    with np.errstate(all="ignore"):
        out = run_graph(graph, inputs)
    for v in graph.outputs:
        array = out[v.name]
        assert array.dtype.name == v.dtype, v
        assert v.shape is not None and array.ndim == len(v.shape), (v, array.shape)
        for want, got in zip(v.shape, array.shape, strict=True):
            assert not isinstance(want, int) or want == got, (v, array.shape)


@given(graphs_with_feeds(max_nodes=10))
def test_random_graphs_verify_and_run(case: tuple[Graph, dict[str, np.ndarray]]) -> None:
    _check_runs(*case)


@given(graphs_with_feeds(max_nodes=10, symbolic=True))
def test_random_graphs_with_a_symbolic_batch(case: tuple[Graph, dict[str, np.ndarray]]
                                              ) -> None:
    graph, inputs = case
    assert all(v.shape and v.shape[0] == "N" for v in graph.inputs)
    _check_runs(graph, inputs)


@pytest.mark.parametrize("dtype", ["float16", "float64"])
def test_random_graphs_in_other_float_types(dtype: str) -> None:
    for seed in range(15):
        graph = random_graph(seed, max_nodes=8, dtype=dtype)
        _check_runs(graph, random_feeds(graph, seed))


@given(st.data())
def test_graphs_restricted_to_some_ops(data: st.DataObject) -> None:
    graph = data.draw(graphs(ops=["MatMul", "Transpose"], max_nodes=6))
    assert set(graph.op_counts()) <= {"MatMul", "Transpose", "Relu"}
    _check_runs(graph, data.draw(feeds(graph)))


def test_every_generator_produces_its_op() -> None:
    """Each generator in the table, used alone, adds its op to some of 30 random graphs
    (``duplicate`` repeats nodes: the structure test below counts it)."""
    missing = []
    for name in set(GENERATORS) - {"Relu", "duplicate"}:
        ops: set[str] = set()
        for seed in range(30):
            ops |= set(random_graph(seed, ops=(name,), max_nodes=4).op_counts())
        if ops <= {"Relu"}:
            missing.append(name)
    assert not missing, f"generators that never applied: {missing}"


def test_graph_structure_over_many_seeds() -> None:
    """Random graphs share tensors (DAGs), repeat subterms, hold constants and have several
    outputs, some of them also read by other nodes."""
    seen: Counter[str] = Counter()
    for seed in range(150):
        g = random_graph(seed, max_nodes=10)
        reads = Counter(i for n in g.nodes for i in set(n.present_inputs()))
        keys = Counter((n.op, n.inputs, n.attrs) for n in g.nodes)
        seen["shared"] += any(k > 1 for k in reads.values())
        seen["duplicate"] += any(k > 1 for k in keys.values())
        seen["constants"] += bool(g.initializers)
        seen["outputs>1"] += len(g.outputs) > 1
        seen["output read"] += any(v.name in reads for v in g.outputs)
    assert all(seen[k] >= 10 for k in ("shared", "duplicate", "constants", "outputs>1",
                                      "output read")), seen


def test_random_graph_is_a_function_of_its_seed() -> None:
    a, b = random_graph(7, max_nodes=12), random_graph(7, max_nodes=12)
    assert a.nodes == b.nodes and a.outputs == b.outputs
    assert all(np.array_equal(a.initializers[k], b.initializers[k]) for k in a.initializers)
    assert random_graph(8, max_nodes=12).nodes != a.nodes


@pytest.mark.parametrize("symbolic", [False, True])
def test_random_graphs_agree_with_onnxruntime(symbolic: bool) -> None:
    """A second oracle: our executor and onnxruntime on 25 random graphs each."""
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    for seed in range(25):
        graph = random_graph(seed, max_nodes=10, symbolic=symbolic)
        inputs = random_feeds(graph, seed)
        session = ort.InferenceSession(to_model_proto(graph).SerializeToString(), options,
                                       providers=["CPUExecutionProvider"])
        theirs = session.run(None, inputs)
        with np.errstate(all="ignore"):
            ours = run_graph(graph, inputs)
        for v, want in zip(graph.outputs, theirs, strict=True):
            np.testing.assert_allclose(ours[v.name], want, rtol=1e-4, atol=1e-5,
                                       err_msg=f"seed {seed}, output {v.name}")


def test_importable_without_hypothesis() -> None:
    code = ("import sys; sys.modules['hypothesis'] = None; sys.modules['pytest'] = None\n"
            "import gerules.testing as t\n"
            "g = t.random_graph(3); t.assert_equivalent(g, g)\n"
            "try:\n    t.graphs\nexcept ImportError as e:\n    print('ImportError:', e)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=True)
    assert "ImportError: gerules.testing.graphs needs hypothesis" in done.stdout
