"""The executor computes settled values (Constants, shape chains) once per binding of the
symbolic dims, and a run that reuses them gives the numbers of a run that recomputes all."""

from __future__ import annotations

import numpy as np
import pytest
from memgraphs import registry
from test_executor_pool import _smallest_budget, assert_same, fresh

from gerules.budgets import DEFAULT
from gerules.errors import ResourceLimit
from gerules.ir.graph import Graph, Node, Value
from gerules.ir.infer import infer_graph
from gerules.runtime.executor import Executor


def reshaping(batch: str | int = "N", fed_weight: bool = False) -> Graph:
    """BERT's shape chain on ``x [N, 6]``: Shape, Gather, Unsqueeze, Concat with a Constant,
    Reshape to ``[N, 2, 3]``; a Constant scale ``c`` times a weight ``w`` (``w`` also a graph
    input when ``fed_weight``: a feed may override it), then Mul."""
    nodes = [Node("Shape", ("x",), ("s",), name="shape"),
             Node("Constant", (), ("zero",), name="zero",
                  attrs={"value": np.array(0, np.int64)}),
             Node("Gather", ("s", "zero"), ("n",), name="gather"),
             Node("Constant", (), ("axes",), name="axes",
                  attrs={"value": np.array([0], np.int64)}),
             Node("Unsqueeze", ("n", "axes"), ("n1",), name="unsq"),
             Node("Constant", (), ("rest",), name="rest",
                  attrs={"value": np.array([2, 3], np.int64)}),
             Node("Concat", ("n1", "rest"), ("shape3",), name="concat", attrs={"axis": 0}),
             Node("Reshape", ("x", "shape3"), ("r",), name="reshape"),
             Node("Constant", (), ("c",), name="c", attrs={"value": np.array(2.0, np.float32)}),
             Node("Mul", ("c", "w"), ("cw",), name="cw"),
             Node("Mul", ("r", "cw"), ("y",), name="y")]
    w = np.arange(3, dtype=np.float32)
    inputs = [Value.of("x", "float32", (batch, 6))]
    if fed_weight:
        inputs.append(Value.of("w", "float32", (3,)))
    g = Graph(tuple(nodes), tuple(inputs), (Value.of("y", "float32", None),),
              initializers={"w": w})
    return infer_graph(g, registry())


def feeds(n: int, seed: int) -> dict[str, np.ndarray]:
    return {"x": np.random.default_rng(seed).standard_normal((n, 6)).astype(np.float32)}


def settled(ex: Executor) -> set[str]:
    return {s.node.name for s in ex._steps if s.settled}


def test_constants_and_the_shape_chain_settle_but_nothing_reading_a_feed() -> None:
    ex = Executor(reshaping(), registry())
    assert settled(ex) == {"shape", "zero", "gather", "axes", "unsq", "rest", "concat", "c",
                           "cw"}
    fed = Executor(reshaping(fed_weight=True), registry())  # w may come from a feed
    assert "cw" not in settled(fed) and "c" in settled(fed)


def test_a_new_binding_recomputes_and_the_numbers_match_fresh_runs() -> None:
    g = reshaping()
    ex = Executor(g, registry())
    for seed, n in ((0, 2), (1, 2), (2, 5), (3, 2), (4, 1)):
        f = feeds(n, seed)
        got = ex.run(f)
        assert got["y"].shape == (n, 2, 3)
        assert_same(got, fresh(g, f))


def test_kept_values_are_read_only_copies_and_outputs_are_the_callers() -> None:
    g = reshaping(2)
    ex = Executor(g, registry())
    first = ex.run(feeds(2, 0))
    assert ex._kept is not None
    kept = [v for values in ex._kept[1] if values is not None for _, v in values[1]]
    assert kept and all(not v.flags.writeable for v in kept)
    assert first["y"].flags.writeable  # a graph output is never a kept value
    first["y"][...] = 0
    assert_same(ex.run(feeds(2, 1)), fresh(g, feeds(2, 1)))


def test_a_fed_weight_is_read_every_run() -> None:
    g = reshaping(2, fed_weight=True)
    ex = Executor(g, registry())
    for k in range(3):
        f = {**feeds(2, k), "w": np.full(3, float(k), np.float32)}
        assert_same(ex.run(f), fresh(g, f))


def test_kept_values_still_count_toward_the_live_budget() -> None:
    g = reshaping(2)
    f = feeds(2, 0)
    lo = _smallest_budget(g, f)
    ex = Executor(g, registry(), budgets=DEFAULT.replace(live_bytes=lo))
    for _ in range(2):
        assert_same(ex.run(f), fresh(g, f))
    tight = Executor(g, registry(), budgets=DEFAULT.replace(live_bytes=lo - 1))
    for _ in range(2):  # refused on the run that computes and on the one that reuses
        with pytest.raises(ResourceLimit, match="--max_live_bytes"):
            tight.run(f)


def test_a_reshape_to_a_settled_shape_is_sized_once_per_binding() -> None:
    """The data is larger than what inference reads by value, the shape is settled: the
    bytes are predicted on a binding's first run only. A small data input is read by value,
    so it is predicted every run."""
    for width, once in ((4104, True), (6, False)):
        g = infer_graph(Graph((
            Node("Constant", (), ("to",), name="to",
                 attrs={"value": np.array([-1, 2, width // 2], np.int64)}),
            Node("Reshape", ("x", "to"), ("r",), name="reshape"),
            Node("Neg", ("r",), ("y",), name="y")),
            (Value.of("x", "float32", ("N", width)),), (Value.of("y", "float32", None),)),
            registry())
        ex = Executor(g, registry())
        for n in (2, 2, 3):
            f = {"x": np.ones((n, width), np.float32)}
            assert_same(ex.run(f), fresh(g, f))
        assert ex._kept is not None
        assert ex._kept[2][1] == (3 * width * 4 if once else None)


def test_an_output_sized_by_a_fed_value_is_predicted_every_run() -> None:
    """``Expand`` to a shape the caller feeds: a small input whose value may change, so the
    second run's huge shape is refused before the kernel allocates it."""
    g = infer_graph(Graph((Node("Expand", ("x", "shape"), ("y",), name="expand"),),
                          (Value.of("x", "float32", (1,)), Value.of("shape", "int64", (1,))),
                          (Value.of("y", "float32", None),)), registry())
    ex = Executor(g, registry(), budgets=DEFAULT.replace(tensor_bytes=1 << 10))
    x = np.ones(1, np.float32)
    assert ex.run({"x": x, "shape": np.array([3])})["y"].shape == (3,)
    with pytest.raises(ResourceLimit, match="expand"):
        ex.run({"x": x, "shape": np.array([1 << 20])})


def test_a_fed_shape_changed_in_place_reshapes_by_its_new_value() -> None:
    """Reshape and Transpose keep their geometry per step; a fed target shape mutated in place
    between runs (the same array object) still reshapes by the value it holds."""
    g = infer_graph(Graph((Node("Reshape", ("x", "to"), ("r",), name="reshape"),
                           Node("Transpose", ("r",), ("y",), name="t", attrs={"perm": [1, 0]})),
                          (Value.of("x", "float32", (2, 6)), Value.of("to", "int64", (2,))),
                          (Value.of("y", "float32", None),)), registry())
    ex = Executor(g, registry())
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    to = np.array([3, 4], np.int64)
    assert_same(ex.run({"x": x, "to": to}), {"y": x.reshape(3, 4).T})
    to[...] = [4, 3]
    assert_same(ex.run({"x": x, "to": to}), {"y": x.reshape(4, 3).T})
