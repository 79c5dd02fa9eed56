"""``optimize`` and ``compile`` on builders and graphs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from api_graphs import image, tiny_cnn

import gerules as ge
from gerules.runtime.executor import run_graph


def test_optimize_fuses_and_keeps_the_outputs() -> None:
    g = tiny_cnn()
    optimized, report = ge.optimize(g)
    assert isinstance(report, ge.OptimizeReport)
    assert report.nodes_after < report.nodes_before == len(g.nodes)
    # the conv block becomes a ge.FusedConv; the head's GlobalAveragePool + Flatten a
    # ReduceMean (global_pool_flatten): a fusion into a plain ONNX op
    assert {f.op for f in report.fusions} == {"ge.FusedConv", "ReduceMean"}
    assert report.ops_after == optimized.op_counts()
    assert optimized.output_names == g.build().output_names
    feeds = {"x": image(2)}
    np.testing.assert_allclose(run_graph(optimized, feeds)["features"],
                               run_graph(g.build(), feeds)["features"], rtol=1e-4, atol=1e-5)


def test_optimize_options_and_compile_options() -> None:
    graph = tiny_cnn().build()
    same, report = ge.optimize(graph, ge.OptimizeOptions(opt_level="O0"))
    assert same.nodes == graph.nodes and report.level == "O0"
    fixed, report = ge.optimize(graph, ge.CompileOptions(opt_level="O1",
                                                         input_shape={"x": (5, 3, 8, 8)}))
    assert fixed.inputs[0].shape == (5, 3, 8, 8) and report.level == "O1"
    _, report = ge.optimize(graph, ge.CompileOptions(
        disabled=frozenset({"fuse_conv_activation"})))
    assert "fuse_conv_activation" not in {f.rule for f in report.fusions}


def test_optimize_refuses_other_things() -> None:
    with pytest.raises(ge.UsageError, match="options must be OptimizeOptions or CompileOptions"):
        ge.optimize(tiny_cnn(), "O2")  # type: ignore[arg-type]
    with pytest.raises(ge.UsageError, match="expected a gerules Graph or GraphBuilder"):
        ge.optimize("model.onnx")  # type: ignore[arg-type]
    with pytest.raises(ge.UsageError, match="unknown opt level 'O9'"):
        ge.optimize(tiny_cnn(), ge.OptimizeOptions(opt_level="O9"))


def test_compile_writes_name_dot_om_that_runs_like_the_graph(compiled: Path) -> None:
    assert compiled.name == "tiny.om" and compiled.is_file()
    with ge.Session(compiled) as session:
        got = session.run({"x": image(2)})["features"]
    want = run_graph(tiny_cnn().build(), {"x": image(2)})["features"]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_compile_keeps_an_om_suffix_and_takes_a_graph(tmp_path: Path) -> None:
    g = ge.GraphBuilder("small")
    g.output(g.ops.Relu(g.input("x", [2, 2])))
    path = ge.compile(g.build(), ge.CompileOptions(opt_level="O0"), output=tmp_path / "a.om")
    assert path == tmp_path / "a.om" and path.is_file()
    assert ge.compile(g, output=str(tmp_path / "b")) == tmp_path / "b.om"


def test_bad_compiles_write_nothing(tmp_path: Path) -> None:
    g = tiny_cnn()
    with pytest.raises(ge.UsageError, match="options must be CompileOptions"):
        ge.compile(g, ge.OptimizeOptions(), output=tmp_path / "x")  # type: ignore[arg-type]
    with pytest.raises(ge.UsageError, match="does not exist"):
        ge.compile(g, output=tmp_path / "missing" / "x")
    with pytest.raises(ge.UsageError, match="output must be a file name"):
        ge.compile(g, output="")
    with pytest.raises(ge.UsageError, match="dynamic batch dim"):
        ge.compile(g, ge.CompileOptions(dynamic_batch_size=(1, 2),
                                        input_shape={"x": (1, 3, 8, 8)}), output=tmp_path / "d")
    bad = ge.GraphBuilder("no_outputs")
    bad.input("x", [1])
    with pytest.raises(ge.GraphError, match="no outputs"):
        ge.compile(bad, output=tmp_path / "e")
    assert list(tmp_path.iterdir()) == []
