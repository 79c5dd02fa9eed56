"""``run_async`` keeps up to ``max_in_flight`` runs executing at once, one arena each."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

import gerules as ge
from gerules.runtime import model as model_module
from gerules.runtime.model import Model


def _om(tmp_path: Path) -> Path:
    g = ge.GraphBuilder("wide")
    x = g.input("x", [4, 8])
    w = g.const(np.arange(64, dtype=np.float32).reshape(8, 8) / 64)
    g.output(g.ops.Relu(g.ops.MatMul(x, w)), "y")
    return ge.compile(g.build(), None, tmp_path / "wide.om")


def test_two_runs_execute_at_once_in_two_arenas(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    both = threading.Barrier(2, timeout=60)  # one run alone would wait here until it breaks
    arenas: list[int] = []
    real = model_module.run_in_arena

    def meeting(pool, weights, feeds, streams, poison=False):  # type: ignore[no-untyped-def]
        arena = pool.acquire()
        arenas.append(id(arena))
        both.wait()
        pool.release(arena)
        return real(pool, weights, feeds, streams, poison)

    monkeypatch.setattr(model_module, "run_in_arena", meeting)
    xs = [np.full((4, 8), k, np.float32) for k in range(2)]
    with Model.load(_om(tmp_path), max_in_flight=2) as m:
        futures = [m.run_async({"x": x}) for x in xs]
        results = [f.result(timeout=120) for f in futures]
    assert len(set(arenas)) == 2  # each run held its own arena while the other ran
    monkeypatch.undo()
    with Model.load(tmp_path / "wide.om") as m:
        for x, got in zip(xs, results, strict=True):
            assert np.array_equal(got["y"], m.run({"x": x})["y"])


def test_the_limit_is_checked(tmp_path: Path) -> None:
    path = _om(tmp_path)
    for bad in (0, 65, 1.5):
        with pytest.raises(ge.UsageError, match="max_in_flight"):
            Model.load(path, max_in_flight=bad)  # type: ignore[arg-type]
