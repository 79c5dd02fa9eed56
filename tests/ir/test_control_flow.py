"""Control flow (If, Loop, Scan with subgraphs reading enclosing values) through the whole
pipeline: import, the reference executor, the optimizer at every level and target, the .om
file (plain and poisoned arena), ONNX export, each against onnxruntime."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest

from gerules.build import build_om
from gerules.ir.attrs import Attrs
from gerules.ir.graph import Graph, Node, captures, free_names
from gerules.onnx_io import load_model
from gerules.onnx_io.writer import to_model_proto
from gerules.opt.optimize import OptimizeOptions, optimize
from gerules.runtime.executor import run_graph
from gerules.runtime.model import Model
from gerules.testing.models import control_flow
from gerules.testing.oracle import run_onnxruntime

CASE = control_flow()


_ort = run_onnxruntime


def _same(graph: Graph, got: dict[str, np.ndarray], want: list[np.ndarray]) -> None:
    for v, w in zip(graph.outputs, want, strict=True):
        np.testing.assert_allclose(got[v.name], w, rtol=1e-5, atol=1e-6, err_msg=v.name)


@pytest.fixture(scope="module")
def graph() -> Graph:
    onnx.checker.check_model(CASE.model, full_check=True)
    return load_model(CASE.model.SerializeToString())


def test_captured_values_are_the_nodes_last_inputs(graph: Graph) -> None:
    branch, loop, scan = graph.nodes[2:]
    assert branch.inputs == ("c", "x", "w") and captures(branch.attrs) == ("x", "w")
    assert loop.inputs[-1] == "y" and free_names(loop.attrs["body"]) == ("y",)  # type: ignore
    assert scan.inputs == ("init", "z") and captures(scan.attrs) == ()
    assert graph.type_of("zs").shape == (3, 2, 3)  # the Loop's constant trip count


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_reference_executor_agrees_with_onnxruntime(graph: Graph, seed: int) -> None:
    feeds = CASE.feeds(seed)
    _same(graph, run_graph(graph, feeds), _ort(CASE.model, feeds))


@pytest.mark.parametrize("level", ["O1", "O2", "O3"])
@pytest.mark.parametrize("target", ["npu", "onnx"])
def test_optimized_compiled_and_exported(graph: Graph, tmp_path: Path, level: str,
                                         target: str) -> None:
    out, _ = optimize(graph, OptimizeOptions(opt_level=level, target=target))
    feeds = CASE.feeds(3)
    want = _ort(CASE.model, feeds)
    _same(graph, run_graph(out, feeds), want)
    with Model.load(build_om(out, tmp_path / "m.om").path) as model:
        _same(graph, model.run(feeds), want)
        _same(graph, model.run(feeds, poison=True), want)
    exported = to_model_proto(out)
    onnx.checker.check_model(exported, full_check=True)
    _same(graph, dict(zip(graph.output_names, _ort(exported, feeds), strict=True)), want)
    again = load_model(exported.SerializeToString())
    assert [n.inputs for n in again.nodes if n.op == "If"] == \
        [n.inputs for n in out.nodes if n.op == "If"]


def test_renamed_enclosing_values_still_bind_by_position(graph: Graph) -> None:
    """The enclosing graph may rename what a subgraph reads: the node's inputs carry it."""
    nodes = list(graph.nodes)
    k = next(i for i, n in enumerate(nodes) if n.op == "If")
    alias = Node("Identity", ("w",), ("w_renamed",), Attrs(), name="rename")
    nodes[k] = nodes[k].with_(inputs=("c", "x", "w_renamed"))
    renamed = graph.replace(nodes=tuple(nodes[:k] + [alias] + nodes[k:]))
    feeds = CASE.feeds(4)
    want = _ort(CASE.model, feeds)
    _same(graph, run_graph(renamed, feeds), want)
    exported = to_model_proto(renamed)
    _same(graph, dict(zip(graph.output_names, _ort(exported, feeds), strict=True)), want)


def test_loop_stops_when_its_body_says_so() -> None:
    """``acc += 1`` while ``i < 2``, at most 10 trips: the body's condition ends it after 3."""
    from onnx import TensorProto, helper, numpy_helper

    def info(name: str, dtype: int, dims: list[int]) -> onnx.ValueInfoProto:
        return helper.make_tensor_value_info(name, dtype, dims)

    body = helper.make_graph(
        [helper.make_node("Less", ["i", "two"], ["cond_out"]),
         helper.make_node("Add", ["acc_in", "one"], ["acc_out"])], "body",
        [info("i", TensorProto.INT64, []), info("cond_in", TensorProto.BOOL, []),
         info("acc_in", TensorProto.FLOAT, [2])],
        [info("cond_out", TensorProto.BOOL, []), info("acc_out", TensorProto.FLOAT, [2])])
    inits = [numpy_helper.from_array(np.array(10, np.int64), "trips"),
             numpy_helper.from_array(np.array(True), "go"),
             numpy_helper.from_array(np.array(2, np.int64), "two"),
             numpy_helper.from_array(np.ones(2, np.float32), "one")]
    graph = helper.make_graph([helper.make_node("Loop", ["trips", "go", "x"], ["y"], body=body)],
                              "stop", [info("x", TensorProto.FLOAT, [2])],
                              [info("y", TensorProto.FLOAT, [2])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    feeds = {"x": np.zeros(2, np.float32)}
    (want,) = _ort(model, feeds)
    np.testing.assert_array_equal(want, [3, 3])
    np.testing.assert_array_equal(run_graph(load_model(model.SerializeToString()), feeds)["y"],
                                  want)
