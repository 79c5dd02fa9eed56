"""Folded weights over ``DEFER_BYTES`` stay deferred until the ``.om`` is written: computed
there once each, equal to what folding them at once gives. Before that only a guard that
reads a folded value computes it (the conv-bn folds check that the fold overflows nothing)
and drops it; a fold no guard reads (the Concat of constants) is computed only by the
writer."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import gerules as ge
from gerules.compiler import CompileOptions, compile_model
from gerules.ir.weights import DEFER_BYTES, Deferred
from gerules.om.reader import OmFile
from gerules.opt.optimize import optimize


def _conv_bn_and_concat() -> ge.Graph:
    """A Conv + BatchNorm (the fold rule computes the new weight) beside an Add of a Concat
    of two constants (the constant analysis folds it), both results over DEFER_BYTES."""
    rng = np.random.default_rng(0)
    g = ge.GraphBuilder("deferred")
    x = g.input("x", [1, 32, 8, 8], "float32")
    w = g.const(rng.standard_normal((64, 32, 3, 3)).astype(np.float32), name="w")
    y = g.ops.Conv(x, w, kernel_shape=[3, 3], pads=[1, 1, 1, 1], name="conv")
    bn = [g.const(rng.uniform(0.5, 1.5, 64).astype(np.float32), name=f"bn.{p}")
          for p in ("scale", "bias", "mean", "var")]
    y = g.ops.BatchNormalization(y, *bn, epsilon=1e-5, name="bn")
    g.output(g.ops.Relu(y, name="relu"))
    t = g.input("t", [256, 128], "float32")
    a, b = (g.const(rng.standard_normal((256, 64)).astype(np.float32), name=n)
            for n in ("a", "b"))
    g.output(g.ops.Add(t, g.ops.Concat(a, b, axis=1, name="cat"), name="add"))
    return g.build()


@pytest.fixture
def computed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The label of every deferred weight computed."""
    seen: list[str] = []
    real = Deferred.materialize

    def counting(self: Deferred) -> np.ndarray:
        seen.append(self.label)
        return real(self)

    monkeypatch.setattr(Deferred, "materialize", counting)
    return seen


def test_optimize_keeps_big_folds_deferred_only_when_asked(computed: list[str]) -> None:
    graph = _conv_bn_and_concat()
    lazy, _ = optimize(graph, deferred=True)
    held = {k: v for k, v in lazy.initializers.items() if isinstance(v, Deferred)}
    assert len(held) == 2
    assert computed and all(c.startswith("Mul") for c in computed)  # the overflow guard only
    computed.clear()
    assert all(d.nbytes > DEFER_BYTES for d in held.values())
    assert sorted(d.label.split("(")[0].split("{")[0] for d in held.values()) == ["Concat",
                                                                                 "Mul"]
    eager, _ = optimize(graph)  # the default: every weight an array
    assert not eager.deferred  # its guards computed what they read, then the kept weights:
    assert sorted(computed[-len(held):]) == sorted(d.label for d in held.values())
    for name, d in held.items():
        assert np.array_equal(d.materialize(), eager.initializers[name])
    rng = np.random.default_rng(1)
    feeds = {"x": rng.standard_normal((1, 32, 8, 8)).astype(np.float32),
             "t": rng.standard_normal((256, 128)).astype(np.float32)}
    want = ge.Session(graph, executor="reference").run(feeds)
    got = ge.Session(eager, executor="reference").run(feeds)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-4, atol=1e-4)


def test_compile_computes_each_deferred_weight_once_while_writing(
        tmp_path: Path, computed: list[str]) -> None:
    graph = _conv_bn_and_concat()
    options = CompileOptions()  # the NPU target: the folded weight also goes to FRACTAL_Z
    optimize(graph, options.optimize_options(), deferred=True)
    by_guards = len(computed)  # the same rules and guards run in the compile below
    computed.clear()
    result = compile_model(graph, options, tmp_path / "m.om")
    held = [v for v in result.graph.initializers.values() if isinstance(v, Deferred)]
    assert len(held) == 2  # the folded conv weight (in FRACTAL_Z on the NPU) and the Concat

    def chain(d: Deferred) -> list[str]:  # a deferred weight computes its deferred operands
        return [d.label, *(c for o in d.operands if isinstance(o, Deferred) for c in chain(o))]

    # the .om writer computed each kept weight once, with what it is computed from
    assert sorted(computed[by_guards:]) == sorted(c for d in held for c in chain(d))
    assert "Concat{'axis': 1}" in computed[by_guards:]
    eager, _ = optimize(graph, options.optimize_options())
    with OmFile(result.path) as om:
        stored = om.contents.graph.initializers
        for name in result.graph.initializers:
            assert np.array_equal(stored[name], eager.initializers[name]), name
