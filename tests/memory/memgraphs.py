"""Graphs for the memory, .om and runtime tests, built with the IR directly.

- ``registry()``: the default registry, plus a test ``Identity`` (a view op) while the shipped
  op set does not have one yet.
- Named graphs: ``chain`` (in-place all along), ``diamond`` (an input read after a branch),
  ``two_branches`` (a file order that keeps both branches' temporaries alive), ``views``.
- ``random_graphs``: a hypothesis strategy for random DAGs of elementwise ops with
  broadcasting (three tensor sizes), so in-place, views and reuse all occur.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache

import numpy as np
from hypothesis import strategies as st

from gerules.ir.graph import Graph, Node, TensorType, Value
from gerules.ir.infer import infer_graph
from gerules.ir.registry import AttrSpec, Call, OpSchema, Port, Registry, default_registry

F32 = "float32"


def _identity_infer(types: Sequence[TensorType | None], _c: object, _call: Call
                    ) -> list[TensorType]:
    assert types[0] is not None
    return [types[0]]


def _identity_kernel(inputs: Sequence[np.ndarray | None], _call: Call) -> list[np.ndarray]:
    assert inputs[0] is not None
    return [inputs[0]]


PROBE_ATTRS = (AttrSpec("i", "int"), AttrSpec("f", "float"), AttrSpec("s", "string"),
               AttrSpec("ints", "ints"), AttrSpec("floats", "floats"),
               AttrSpec("strings", "strings"), AttrSpec("t", "tensor"))


@cache
def registry() -> Registry:
    """The default ops, a test ``Identity`` if missing, and ``test.Probe`` (takes every kind
    of attribute, computes ``X + sum(t)``)."""
    reg = Registry(default_registry())
    if not reg.has("Identity"):
        reg.add(OpSchema("Identity", 1, (Port("input"),), (Port("output"),), _identity_infer,
                         _identity_kernel, traits=frozenset({"shape_op"})))
    reg.add(OpSchema("Probe", 1, (Port("X"),), (Port("Y"),), _identity_infer, _probe_kernel,
                     attrs={a.name: a for a in PROBE_ATTRS}, domain="test"))
    return reg


def _probe_kernel(inputs: Sequence[np.ndarray | None], call: Call) -> list[np.ndarray]:
    x, t = inputs[0], call.attrs.get("t")
    assert x is not None
    extra = np.asarray(t).sum() if isinstance(t, np.ndarray) else 0
    return [(x + extra).astype(x.dtype)]


def make(nodes: Sequence[Node], inputs: dict[str, tuple[int, ...]], outputs: Sequence[str],
         weights: dict[str, np.ndarray] | None = None) -> Graph:
    """A shape-inferred graph; outputs get their inferred types."""
    g = Graph(tuple(nodes), tuple(Value.of(n, F32, s) for n, s in inputs.items()),
              tuple(Value.of(o, F32, None) for o in outputs), initializers=weights or {})
    return infer_graph(g, registry())


def feeds_for(graph: Graph, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {v.name: rng.standard_normal(v.shape).astype(v.dtype)  # type: ignore[arg-type]
            for v in graph.inputs}


def chain(n: int = 4, size: int = 256) -> Graph:
    """x -> Abs -> Neg -> Abs ...: every node may write over its input."""
    ops = ["Abs", "Neg"]
    nodes = [Node(ops[k % 2], (f"t{k - 1}" if k else "x",), (f"t{k}",), name=f"n{k}")
             for k in range(n)]
    return make(nodes, {"x": (size,)}, [f"t{n - 1}"])


def diamond(size: int = 64) -> Graph:
    """a = Abs(x); b = Neg(a); c = Add(b, a): ``a`` is still needed after ``b``."""
    nodes = [Node("Abs", ("x",), ("a",), name="abs"), Node("Neg", ("a",), ("b",), name="neg"),
             Node("Add", ("b", "a"), ("c",), name="add")]
    return make(nodes, {"x": (size,)}, ["c"])


def two_branches(size: int = 1024) -> Graph:
    """Per branch ``b``: b0 = Abs(x), b1 = Neg(x), b2 = Add(b0, b1); listed interleaved, so the
    file order keeps four temporaries alive where branch by branch needs three."""
    nodes = [Node(op, args(b), (f"{b}{k}",), name=f"{b}{k}")
             for k, (op, args) in enumerate((("Abs", lambda b: ("x",)),
                                             ("Neg", lambda b: ("x",)),
                                             ("Add", lambda b: (f"{b}0", f"{b}1"))))
             for b in "pq"]
    nodes.append(Node("Add", ("p2", "q2"), ("y",), name="join"))
    return make(nodes, {"x": (size,)}, ["y"])


def views(size: int = 128) -> Graph:
    """a = Abs(x); v = Identity(a); w = Neg(v); y = Add(w, a): a view, then a read of its root."""
    nodes = [Node("Abs", ("x",), ("a",), name="abs"), Node("Identity", ("a",), ("v",), name="id"),
             Node("Neg", ("v",), ("w",), name="neg"), Node("Add", ("w", "a"), ("y",), name="add")]
    return make(nodes, {"x": (size,)}, ["y"])


UNARY = ("Abs", "Neg", "Identity", "Floor")
BINARY = ("Add", "Mul", "Sub")


@st.composite
def random_graphs(draw: st.DrawFn, max_nodes: int = 12) -> Graph:
    """A random DAG over three broadcast-compatible shapes ``(m, k)``, ``(k,)`` and ``(1,)``."""
    k = draw(st.integers(1, 24))
    m = draw(st.integers(1, 6))
    shapes = {"x": (m, k), "z": (k,)}
    avail = ["x", "z", "w"]
    nodes = []
    for i in range(draw(st.integers(1, max_nodes))):
        pick = st.sampled_from(avail)
        if draw(st.booleans()):
            op = draw(st.sampled_from(UNARY))
            args: tuple[str, ...] = (draw(pick),)
        else:
            op = draw(st.sampled_from(BINARY))
            args = (draw(pick), draw(pick))
        nodes.append(Node(op, args, (f"t{i}",), name=f"n{i}"))
        avail.append(f"t{i}")
    produced = [f"t{i}" for i in range(len(nodes))]
    extra = draw(st.lists(st.sampled_from(produced), max_size=3, unique=True))
    outputs = list(dict.fromkeys([produced[-1], *extra]))
    weights = {"w": np.full((1,), 0.5, dtype=np.float32)}
    return make(nodes, shapes, outputs, weights)

