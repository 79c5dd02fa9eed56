"""``Model``: a .om runs inside its arena and gives the reference executor's numbers."""

from __future__ import annotations

import dataclasses
import logging
import threading
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from memgraphs import chain, diamond, feeds_for, make, random_graphs, registry, two_branches, views
from om_files import build, model_def, probe_graph, with_model_def

from gerules.errors import KernelError, ModelError, UsageError
from gerules.ir.graph import Graph, Node, Value
from gerules.ir.infer import infer_graph
from gerules.onnx_io import load_model
from gerules.runtime.arena import Arena, Program, run_sequential
from gerules.runtime.executor import run_graph
from gerules.runtime.model import Model, TensorDesc
from gerules.testing.models import MODELS

HAND_MADE = {"chain": chain, "diamond": diamond, "two_branches": two_branches, "views": views,
             "probe": probe_graph}


def compile_and_run(graph: Graph, path: Path, feeds: dict[str, np.ndarray], **kw: object
                    ) -> dict[str, np.ndarray]:
    build(graph, path, **kw)  # type: ignore[arg-type]
    with Model.load(path, registry=registry()) as model:
        return model.run(feeds)


def assert_same(got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> None:
    assert got.keys() == want.keys()
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)


@pytest.mark.parametrize("name", sorted(HAND_MADE))
def test_hand_made_graphs_match_the_reference(tmp_path: Path, name: str) -> None:
    g = HAND_MADE[name]()
    feeds = feeds_for(g)
    assert_same(compile_and_run(g, tmp_path / "m.om", feeds), run_graph(g, feeds, registry()))


def _test_model(name: str) -> tuple[Graph, dict[str, np.ndarray], dict[str, int]]:
    case = MODELS[name]()
    graph = load_model(case.model.SerializeToString())
    feeds = case.feeds(0)
    dims = {d: n for v in graph.inputs for d, n in zip(v.shape or (), feeds[v.name].shape,
                                                       strict=True) if isinstance(d, str)}
    return graph, feeds, dims


@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize("streams", [1, 2])
def test_shipped_test_models_match_the_reference(tmp_path: Path, name: str, streams: int) -> None:
    graph, feeds, dims = _test_model(name)
    got = compile_and_run(graph, tmp_path / "m.om", feeds, dims=[dims], streams=streams)
    assert_same(got, run_graph(graph, feeds))


def test_multi_stream_runs_equal_single_stream_runs(tmp_path: Path) -> None:
    graph, feeds, dims = _test_model("transformer_encoder")
    path = build(graph, tmp_path / "m.om", dims=[dims], streams=3).path
    with Model.load(path) as threaded, Model.load(path, streams=1) as single:
        assert threaded.streams == 3 and single.streams == 1
        assert len(set(threaded.variants[0].plan.streams)) > 1  # branches really are spread
        want = single.run(feeds)
        for _ in range(5):
            assert_same(threaded.run(feeds), want)


@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(g=random_graphs())
def test_random_graphs_match_the_reference(tmp_path: Path, g: Graph) -> None:
    feeds = feeds_for(g, seed=1)
    want = run_graph(g, feeds, registry())
    for streams in (1, 2):
        got = compile_and_run(g, tmp_path / f"r{streams}.om", feeds, streams=streams)
        for name in want:
            np.testing.assert_array_equal(got[name], want[name])


def test_a_wrong_plan_gives_wrong_numbers() -> None:
    g = diamond()
    feeds = feeds_for(g)
    plan = build_plan(g)
    good = Program(g, plan, registry())
    bad_plan = dataclasses.replace(plan, offsets={**plan.offsets, "b": plan.offsets["a"]})
    bad = Program(g, bad_plan, registry())  # never verified: runs as told
    outs = []
    for program in (good, bad):
        arena = Arena(program)
        env = {**feeds, **arena.views}
        run_sequential(program, env, arena.views)
        outs.append(np.array(arena.views["c"]))
    want = run_graph(g, feeds, registry())["c"]
    np.testing.assert_array_equal(outs[0], want)
    assert not np.array_equal(outs[1], want)


def build_plan(g: Graph):  # noqa: ANN201
    from gerules.memory import plan_memory

    return plan_memory(g, registry=registry())


def test_descriptions_and_figures(tmp_path: Path) -> None:
    graph, _, dims = _test_model("cnn")
    path = build(graph, tmp_path / "m.om", dims=[dims]).path
    with Model.load(path) as model:
        assert model.inputs == (TensorDesc("input", (2, 3, 16, 16), "float32"),)
        assert model.outputs == (TensorDesc("logits", (2, 10), "float32"),)
        assert model.inputs[0].nbytes == 2 * 3 * 16 * 16 * 4
        assert model.graph.inputs[0].shape == ("N", 3, 16, 16)  # as declared
        (figures,) = model.figures
        assert figures is not None and figures.arena == model.arena_bytes()
        assert figures.arena < figures.no_reuse


def test_outputs_are_copies_and_weights_read_only_views(tmp_path: Path) -> None:
    g = probe_graph()
    feeds = feeds_for(g)
    path = build(g, tmp_path / "m.om").path
    with Model.load(path, registry=registry()) as model:
        first = model.run(feeds)["y"]
        first[...] = 12345.0
        again = model.run(feeds)["y"]
        assert not np.any(again == 12345.0)
        w = model.graph.initializers["w1"]
        assert not w.flags.writeable and not w.flags.owndata


def test_run_async_and_concurrent_runs_use_separate_arenas(tmp_path: Path) -> None:
    g = two_branches(size=4096)
    path = build(g, tmp_path / "m.om").path
    feeds = [feeds_for(g, seed=s) for s in range(6)]
    want = [run_graph(g, f, registry()) for f in feeds]
    with Model.load(path, registry=registry()) as model:
        futures = [model.run_async(f) for f in feeds]
        results: dict[int, dict[str, np.ndarray]] = {}

        def worker(i: int) -> None:
            results[i] = model.run(feeds[i])

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(feeds))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for i, fut in enumerate(futures):
            assert_same(fut.result(timeout=30), want[i])
            assert_same(results[i], want[i])


def test_feed_errors_name_the_input(tmp_path: Path) -> None:
    g = chain()
    path = build(g, tmp_path / "m.om").path
    with Model.load(path, registry=registry()) as model:
        with pytest.raises(ModelError, match=r"m\.om: tensor 'x': missing input"):
            model.run({})
        with pytest.raises(ModelError, match="expects float32"):
            model.run({"x": np.zeros(256, np.float64)})
        with pytest.raises(ModelError, match="no graph input is called 'q'"):
            model.run({"x": np.zeros(256, np.float32), "q": np.zeros(1)})
        with pytest.raises(ModelError, match="missing input"):
            model.run_async({}).result(timeout=30)


def test_closed_models_refuse_to_run(tmp_path: Path) -> None:
    path = build(chain(), tmp_path / "m.om").path
    with Model.load(path, registry=registry()) as model:
        pass
    with pytest.raises(UsageError, match="closed"):
        model.run({"x": np.zeros(256, np.float32)})
    with pytest.raises(UsageError, match="closed"):
        model.run_async({})
    model.close()  # twice is fine


def test_close_unmaps_the_file(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    g = probe_graph()
    path = build(g, tmp_path / "m.om").path
    caplog.set_level(logging.DEBUG, logger="gerules.om.reader")
    model = Model.load(path, registry=registry())
    model.run(feeds_for(g))
    model.run_async(feeds_for(g)).result(timeout=30)
    model.close()
    assert "still in use" not in caplog.text
    assert model.inputs[0].name == "x"  # descriptions survive close


def test_stream_count_must_match_the_file(tmp_path: Path) -> None:
    path = build(two_branches(), tmp_path / "m.om", streams=2).path
    with pytest.raises(UsageError, match="compiled for 2 stream"):
        Model.load(path, streams=3, registry=registry())


def test_dynamic_batch_picks_the_variant_by_input_shape(tmp_path: Path) -> None:
    nodes = [Node("Abs", ("x",), ("a",)), Node("Add", ("a", "w"), ("y",))]
    g = Graph(tuple(nodes), (Value.of("x", "float32", ("N", 8)),),
              (Value.of("y", "float32", ("N", 8)),),
              initializers={"w": np.linspace(0, 1, 8, dtype=np.float32)})
    g = infer_graph(g, registry())
    path = build(g, tmp_path / "m.om", dims=[{"N": 1}, {"N": 4}]).path
    with Model.load(path, registry=registry()) as model:
        assert [v.name for v in model.variants] == ["N=1", "N=4"]
        assert model.inputs == (TensorDesc("x", ("N", 8), "float32"),)
        assert model.inputs[0].nbytes is None
        assert model.arena_bytes(1) > model.arena_bytes(0)
        for n in (1, 4):
            x = np.random.default_rng(n).standard_normal((n, 8)).astype(np.float32)
            assert_same(model.run({"x": x}), run_graph(g, {"x": x}, registry()))
        with pytest.raises(ModelError, match=r"no compiled variant .*N=1: x\[1, 8\]"):
            model.run({"x": np.zeros((3, 8), np.float32)})


def test_a_kernel_disagreeing_with_the_tensor_table_names_node_and_tensor(tmp_path: Path
                                                                          ) -> None:
    g = make([Node("Abs", ("x",), ("a",), name="abs"), Node("Neg", ("a",), ("y",), name="neg")],
             {"x": (4, 4)}, ["y"])
    data = build(g, tmp_path / "m.om").path.read_bytes()
    doc = model_def(data)
    doc["variants"][0]["tensors"][0]["shape"] = [16]  # same bytes, another shape
    path = tmp_path / "bad.om"
    path.write_bytes(with_model_def(data, doc))
    with Model.load(path, registry=registry()) as model:
        with pytest.raises(KernelError, match=r"node 'abs' \(Abs\): tensor 'a': .* "
                                              r"float32\[4, 4\], the .* float32\[16\]"):
            model.run({"x": np.ones((4, 4), np.float32)})
