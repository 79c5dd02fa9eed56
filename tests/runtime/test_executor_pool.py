"""The reference executor recycles its output buffers without changing a single number."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from memgraphs import feeds_for, make, random_graphs, registry, views

from gerules.budgets import DEFAULT
from gerules.errors import ResourceLimit
from gerules.ir.graph import Graph, Node, Value
from gerules.ir.infer import infer_graph
from gerules.ir.weights import arrays
from gerules.runtime.executor import Executor


def fresh(graph: Graph, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every node by its allocating kernel, nothing freed or reused: the oracle."""
    env = {**arrays(graph.initializers), **feeds}
    reg = registry()
    for node in graph.nodes:
        schema = reg.get(node.op, node.domain, 17)
        outs = schema.kernel([env[i] if i else None for i in node.inputs],
                             schema.call(node.attrs, len(node.outputs)))
        env.update(zip(node.outputs, outs, strict=False))
    return {name: env[name] for name in graph.output_names}


def block(batch: str | int = "N") -> Graph:
    """Conv-free ResNet-ish block on [N, 4, 3, 3] plus an FC: BN, Relu, a residual Add, a
    view (Identity) whose root dies before the view does, Flatten and Gemm."""
    rng = np.random.default_rng(3)
    w = {"s": rng.standard_normal(4).astype(np.float32), "b": rng.standard_normal(4).astype(
        np.float32), "m": rng.standard_normal(4).astype(np.float32),
        "v": (rng.random(4) + 0.5).astype(np.float32),
        "fc": rng.standard_normal((5, 36)).astype(np.float32),
        "fb": rng.standard_normal(5).astype(np.float32)}
    nodes = [Node("BatchNormalization", ("x", "s", "b", "m", "v"), ("bn",), name="bn"),
             Node("Relu", ("bn",), ("r",), name="relu"),
             Node("Identity", ("r",), ("view",), name="view"),
             Node("Sigmoid", ("view",), ("g",), name="gate"),
             Node("Mul", ("view", "g"), ("h",), name="mul"),
             Node("Add", ("h", "x"), ("res",), name="res"),
             Node("Flatten", ("res",), ("flat",), name="flat"),
             Node("Gemm", ("flat", "fc", "fb"), ("y",), name="fc", attrs={"transB": 1}),
             Node("Softmax", ("y",), ("p",), name="softmax")]
    g = Graph(tuple(nodes), (Value.of("x", "float32", (batch, 4, 3, 3)),),
              (Value.of("p", "float32", None), Value.of("flat", "float32", None)),
              initializers=w)
    return infer_graph(g, registry())


def feeds(n: int, seed: int) -> dict[str, np.ndarray]:
    return {"x": np.random.default_rng(seed).standard_normal((n, 4, 3, 3)).astype(np.float32)}


def assert_same(got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> None:
    assert got.keys() == want.keys()
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)


def test_runs_that_recycle_give_the_numbers_of_fresh_runs() -> None:
    g = block()
    ex = Executor(g, registry())
    for seed, n in ((0, 2), (1, 2), (2, 3), (3, 2)):  # a new batch size binds new slots
        f = feeds(n, seed)
        assert_same(ex.run(f), fresh(g, f))
    assert ex.pool.reused > 0  # the later runs really drew recycled buffers


def test_outputs_the_caller_keeps_and_the_feeds_are_never_written_over() -> None:
    g = block(2)
    ex = Executor(g, registry())
    f0 = feeds(2, 0)
    x0 = f0["x"].copy()
    first = ex.run(f0)
    kept = {k: v.copy() for k, v in first.items()}
    for seed in (1, 2):
        ex.run(feeds(2, seed))
    assert_same(first, kept)
    np.testing.assert_array_equal(f0["x"], x0)
    assert all(np.asarray(w).flags.writeable is False or np.array_equal(w, g.initializers[k])
               for k, w in arrays(g.initializers).items())


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(random_graphs())
def test_random_graphs_recycled_match_fresh(g: Graph) -> None:
    ex = Executor(g, registry())
    for seed in (0, 1, 2):
        f = feeds_for(g, seed)
        assert_same(ex.run(f), fresh(g, f))


def _smallest_budget(g: Graph, f: dict[str, np.ndarray]) -> int:
    lo, hi = 0, 1 << 20
    while lo < hi:  # the smallest live_bytes a fresh executor runs with
        mid = (lo + hi) // 2
        try:
            Executor(g, registry(), budgets=DEFAULT.replace(live_bytes=mid)).run(f)
            hi = mid
        except ResourceLimit:
            lo = mid + 1
    return lo


def test_the_pool_never_makes_a_budget_refuse_and_budgets_still_refuse() -> None:
    g = block(2)
    f = feeds(2, 0)
    need = _smallest_budget(g, f)
    ex = Executor(g, registry(), budgets=DEFAULT.replace(live_bytes=need))
    for _ in range(3):  # spare buffers are dropped rather than counted against the run
        assert_same(ex.run(f), fresh(g, f))
    with pytest.raises(ResourceLimit, match="--max_live_bytes"):
        Executor(g, registry(), budgets=DEFAULT.replace(live_bytes=need - 1)).run(f)


def test_the_spare_is_bounded_by_the_largest_live_set() -> None:
    g = make([Node("Abs", ("x",), ("a",), name="a"), Node("Neg", ("a",), ("b",), name="b"),
              Node("Add", ("a", "b"), ("y",), name="y")], {"x": (64,)}, ["y"])
    ex = Executor(g, registry())
    for seed in range(3):
        ex.run(feeds_for(g, seed))
        assert 0 < ex.pool.spare <= ex.pool.limit <= 4 * 64 * 4


def test_an_in_place_chain_writes_over_one_buffer() -> None:
    """Abs, Neg, Abs, Neg: each step's input dies at it, so all four share one buffer."""
    g = make([Node(op, (src,), (dst,), name=dst) for op, src, dst in
              (("Abs", "x", "t0"), ("Neg", "t0", "t1"), ("Abs", "t1", "t2"),
               ("Neg", "t2", "y"))], {"x": (32,)}, ["y"])
    ex = Executor(g, registry())
    for seed in (0, 1):
        f = feeds_for(g, seed)
        assert_same(ex.run(f), fresh(g, f))
    assert ex.pool.reused == 0 and ex.pool.spare == 0


def test_a_viewed_input_is_never_written_over() -> None:
    """a = Abs(x); v = Identity(a); w = Neg(v) may not write over v: ``a`` is read later."""
    g = views(16)
    ex = Executor(g, registry())
    for seed in (0, 1):
        f = feeds_for(g, seed)
        assert_same(ex.run(f), fresh(g, f))


def test_a_read_only_view_is_never_written_through() -> None:
    """Expand to [1, N] returns a read-only broadcast view of its dying input, the whole of
    that buffer: the Relu after it gets a buffer of its own (a fresh hypothesis draw found
    it written through: "output array is read-only")."""
    g = make([Node("Relu", ("x",), ("t0",), name="n0"),
              Node("Expand", ("t0", "c"), ("t1",), name="n1"),
              Node("Relu", ("t1",), ("y",), name="n2")],
             {"x": (6,)}, ["y"], {"c": np.array([1, 1], np.int64)})
    ex = Executor(g, registry())
    for seed in (0, 1):
        f = feeds_for(g, seed)
        assert_same(ex.run(f), fresh(g, f))


def test_outputs_sized_by_the_feeds_dims_are_checked_on_every_run() -> None:
    """tensor_bytes holds for each output the bound dims size (BN's is N * 144 bytes)."""
    ex = Executor(block(), registry(), budgets=DEFAULT.replace(tensor_bytes=400))
    for _ in range(2):  # a refused binding is never kept
        with pytest.raises(ResourceLimit, match=r"node 'bn'.*tensor 'bn'.*432 bytes"):
            ex.run(feeds(3, 0))
        assert_same(ex.run(feeds(2, 0)), fresh(block(), feeds(2, 0)))


@pytest.mark.parametrize("op", ["Add", "Sub"])
def test_an_elementwise_step_writes_over_its_dying_second_operand(op: str) -> None:
    """y = w - t with a broadcast weight w: t's buffer becomes y's (no second buffer)."""
    w = {"w": np.linspace(-1, 1, 8, dtype=np.float32)}
    g = make([Node("Abs", ("x",), ("t",), name="t"), Node(op, ("w", "t"), ("y",), name="y")],
             {"x": (3, 8)}, ["y"], w)
    ex = Executor(g, registry())
    for seed in (0, 1):
        f = feeds_for(g, seed)
        assert_same(ex.run(f), fresh(g, f))
    assert ex.pool.spare == 0 and ex.pool.reused == 0


def test_weights_off_a_cache_line_are_copied_once_into_an_aligned_arena() -> None:
    """A weight at any byte offset (as read in place from a model file) runs from a 64-byte
    aligned, read-only copy, made on the first run and kept; the numbers do not change."""
    g = block()
    shifted = {}
    for name, w in arrays(g.initializers).items():  # each 4 bytes past a 64-byte boundary
        raw = np.empty(w.nbytes + 128, np.uint8)
        at = -raw.ctypes.data % 64 + 4
        shifted[name] = raw[at:at + w.nbytes].view(w.dtype).reshape(w.shape)
        shifted[name][...] = w
        shifted[name].flags.writeable = False
    moved = Graph(g.nodes, g.inputs, g.outputs, initializers=shifted)
    ex = Executor(moved, registry())
    f = feeds(2, 0)
    assert_same(ex.run(f), fresh(g, f))
    kept = ex._aligned_weights()
    assert kept.keys() == shifted.keys()
    for name, copy in kept.items():
        assert copy.ctypes.data % 64 == 0 and not copy.flags.writeable
        np.testing.assert_array_equal(copy, shifted[name])
    assert_same(ex.run(feeds(2, 1)), fresh(g, feeds(2, 1)))
    assert ex._aligned_weights() is kept  # once per executor
