"""``Session``: .om files and graphs, sync and async, closed for good after ``close``."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest
from api_graphs import image, tiny_cnn

import gerules as ge
from gerules.runtime.executor import run_graph


def _want(batch: int, seed: int = 1) -> np.ndarray:
    return run_graph(tiny_cnn().build(), {"x": image(batch, seed)})["features"]


def test_describes_inputs_and_outputs(compiled: Path) -> None:
    with ge.Session(compiled) as session:
        assert session.inputs == (ge.TensorDesc("x", (2, 3, 8, 8), "float32"),)
        assert session.outputs == (ge.TensorDesc("features", (2, 4), "float32"),)
        assert session.variants == (session.inputs,)
        assert session.path == compiled and not session.closed
        assert session.graph.output_names == ("features",)
        assert repr(session) == f"<Session {compiled} (open)>"


def test_run_by_name_and_by_position(compiled: Path) -> None:
    with ge.Session(compiled) as session:
        by_name = session.run({"x": image(2)})["features"]
        by_position = session.run([image(2)])["features"]
    np.testing.assert_allclose(by_name, _want(2), rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(by_name, by_position)


def test_run_async_gives_futures_with_each_runs_outputs(compiled: Path) -> None:
    with ge.Session(compiled) as session:
        futures = [session.run_async({"x": image(2, seed)}) for seed in range(4)]
        results = [f.result(timeout=60)["features"] for f in futures]
    for seed, got in enumerate(results):
        np.testing.assert_allclose(got, _want(2, seed), rtol=1e-4, atol=1e-5)


def test_runs_from_several_threads_do_not_mix(compiled: Path) -> None:
    results: dict[int, np.ndarray] = {}
    with ge.Session(compiled) as session:
        def work(seed: int) -> None:
            results[seed] = session.run({"x": image(2, seed)})["features"]

        threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    for seed, got in results.items():
        np.testing.assert_allclose(got, _want(2, seed), rtol=1e-4, atol=1e-5)


def test_bad_feeds_name_the_tensor(compiled: Path) -> None:
    with ge.Session(compiled) as session:
        with pytest.raises(ge.ModelError, match="tensor 'x': expects shape"):
            session.run({"x": image(3)})
        with pytest.raises(ge.ModelError, match="tensor 'x': expects float32, got float64"):
            session.run({"x": image(2).astype(np.float64)})
        with pytest.raises(ge.ModelError, match="no graph input is called 'y'"):
            session.run({"y": image(2)})
        with pytest.raises(ge.UsageError, match="2 feeds given for 1 inputs"):
            session.run([image(2), image(2)])
        with pytest.raises(ge.UsageError, match="feeds must be a mapping"):
            session.run(image(2))  # type: ignore[arg-type]
        failed = session.run_async({"x": image(3)})
        with pytest.raises(ge.ModelError, match="expects shape"):
            failed.result(timeout=60)


def test_closed_sessions_refuse_every_call(compiled: Path) -> None:
    session = ge.Session(compiled)
    pending = session.run_async({"x": image(2)})
    session.close()
    assert pending.done() and session.closed  # close waited for the pending run
    session.close()  # closing twice is harmless
    for call in (lambda: session.run({"x": image(2)}), lambda: session.run_async([image(2)]),
                 lambda: session.inputs):
        with pytest.raises(ge.UsageError, match="closed"):
            call()


def test_a_graph_runs_through_a_temporary_om_that_close_deletes() -> None:
    with ge.Session(tiny_cnn(), options=ge.CompileOptions(input_shape={"x": (3, 3, 8, 8)})
                    ) as session:
        path = session.path
        assert path is not None and path.is_file() and path.suffix == ".om"
        assert "ge.FusedConv" in session.graph.op_counts()  # compiled, hence optimized
        got = session.run({"x": image(3)})["features"]
    np.testing.assert_allclose(got, _want(3), rtol=1e-4, atol=1e-5)
    assert not path.parent.exists()


def test_dynamic_batch_om_lists_its_variants(tmp_path: Path) -> None:
    options = ge.CompileOptions(input_shape={"x": (-1, 3, 8, 8)}, dynamic_batch_size=(1, 3))
    path = ge.compile(tiny_cnn(), options, output=tmp_path / "dyn")
    with ge.Session(path) as session:
        assert session.inputs[0].shape == ("N", 3, 8, 8)
        assert [v[0].shape for v in session.variants] == [(1, 3, 8, 8), (3, 3, 8, 8)]
        futures = {b: session.run_async([image(b)]) for b in (3, 1)}
        for batch, future in futures.items():
            got = future.result(timeout=60)["features"]
            np.testing.assert_allclose(got, _want(batch), rtol=1e-4, atol=1e-5)


def test_reference_executor_keeps_symbolic_dims() -> None:
    with ge.Session(tiny_cnn(), executor="reference") as session:
        assert session.path is None and session.inputs[0].shape == ("N", 3, 8, 8)
        assert session.streams == 1
        assert session.variants == (session.inputs,)
        assert repr(session) == "<Session reference executor (open)>"
        for batch in (1, 3):
            np.testing.assert_array_equal(session.run({"x": image(batch)})["features"],
                                          _want(batch))
        future = session.run_async([image(2)])
        np.testing.assert_array_equal(future.result(timeout=60)["features"], _want(2))
        assert session.outputs[0].name == "features"
        assert session.graph.nodes == tiny_cnn().build().nodes
    with pytest.raises(ge.UsageError, match="closed"):
        session.run([image(1)])


def test_bad_sessions(compiled: Path, tmp_path: Path) -> None:
    with pytest.raises(ge.UsageError, match="runs a Graph or a GraphBuilder"):
        ge.Session(compiled, executor="reference")
    with pytest.raises(ge.UsageError, match="options and streams apply to compiled"):
        ge.Session(tiny_cnn(), executor="reference", options=ge.CompileOptions())
    with pytest.raises(ge.UsageError, match="executor must be 'om' or 'reference'"):
        ge.Session(tiny_cnn(), executor="gpu")  # type: ignore[arg-type]
    with pytest.raises(ge.UsageError, match="expected a gerules Graph or GraphBuilder"):
        ge.Session(42)  # type: ignore[arg-type]
    with pytest.raises(ge.OmError, match="missing.om: no such file"):
        ge.Session(tmp_path / "missing.om")
    with pytest.raises(ge.UsageError, match="compiled for 1 stream"):
        ge.Session(compiled, streams=2)


def test_a_graph_compiled_for_two_streams_runs_on_them(tmp_path: Path) -> None:
    g = ge.GraphBuilder("branches")
    x = g.input("x", [64, 64])
    left = g.ops.Tanh(g.ops.MatMul(x, x))
    right = g.ops.Sigmoid(g.ops.MatMul(x, g.ops.Transpose(x)))
    g.output(g.ops.Add(left, right), name="y")
    path = ge.compile(g, ge.CompileOptions(opt_level="O0", streams=2), output=tmp_path / "s")
    feed = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)
    want = run_graph(g.build(), {"x": feed})["y"]
    for streams, used in ((None, 2), (1, 1)):
        with ge.Session(path, streams=streams) as session:
            assert session.streams == used
            np.testing.assert_allclose(session.run([feed])["y"], want, rtol=1e-5, atol=1e-6)
