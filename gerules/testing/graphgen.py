"""Random well-typed graphs, driven by a ``Chooser`` (hypothesis draws or a NumPy generator).

A graph is grown node by node: each step picks an op generator from ``gerules.testing.opgen``
(the table ``GENERATORS``), which picks operands among the tensors built so far (so tensors
are shared: the result is a DAG, not a tree), makes the constants it needs (initializers) and
adds one or more nodes whose output types come from the op registry's inference.

Invariants:
- Every graph returned by ``build_graph`` passes ``gerules.ir.verify.verify`` and is returned
  shape-inferred (``value_info`` types every node output); a generator that cannot apply to
  the current tensors declines, it never produces an invalid node.
- The graph is a pure function of the choices: the same answers from the chooser give the same
  graph (names included), so hypothesis can replay and shrink it and a seed reproduces it.
- Values stay tame by construction: divisors are constants away from zero, variances are
  positive, no op that overflows on O(1) inputs (Exp, Log, Reciprocal) is in the default table.
- Only the first dim of a graph input is ever symbolic (``"N"``); constants are always static,
  and a constant broadcast against a symbolic dim uses size 1 there.
- Importable without hypothesis (``RngChooser`` drives it from ``numpy.random``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import numpy as np

from ..ir.attrs import Attrs
from ..ir.graph import Dim, Graph, Node, Shape, TensorType, Value
from ..ir.registry import Registry, default_registry
from ..ir.verify import verify
from ..runtime.feeds import random_array

T = TypeVar("T")
SYMBOL = "N"
DEFAULT_OPSET = 21
MIN_OPSET = 18  # Reduce*, Split, Squeeze take their axes as inputs


class Chooser(Protocol):
    """Where the random decisions come from."""

    def integer(self, lo: int, hi: int) -> int:
        """An integer in ``[lo, hi]`` (inclusive); smaller is simpler (hypothesis shrinks)."""
        ...

    def seed(self) -> int:
        """A seed for bulk random data (constant tensors)."""
        ...


class RngChooser:
    """A ``Chooser`` backed by ``numpy.random.Generator`` (no hypothesis needed)."""

    def __init__(self, rng: np.random.Generator | int) -> None:
        self.rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)

    def integer(self, lo: int, hi: int) -> int:
        return int(self.rng.integers(lo, hi + 1))

    def seed(self) -> int:
        return int(self.rng.integers(0, 2**32))


def choice(chooser: Chooser, items: Sequence[T]) -> T:
    return items[chooser.integer(0, len(items) - 1)]


def coin(chooser: Chooser) -> bool:
    return chooser.integer(0, 1) == 1


@dataclass(frozen=True, slots=True)
class GraphOptions:
    """What ``build_graph`` may produce.

    ``ops``: generator names from ``opgen.GENERATORS`` (``None``: all of them);
    ``symbolic``: graph inputs get a symbolic first dim ``"N"``; ``max_side``: largest
    static dim of a graph input; ``ranks``: the ranks a graph input may have (the motif
    presets ask for 3-D and 4-D inputs, which conv blocks and attention need);
    ``min_side``: smallest static dim past the first.
    """

    max_nodes: int = 8
    min_nodes: int = 1
    ops: tuple[str, ...] | None = None
    dtype: str = "float32"
    symbolic: bool = False
    max_inputs: int = 2
    max_outputs: int = 3
    max_side: int = 5
    opset: int = DEFAULT_OPSET
    ranks: tuple[int, ...] = (1, 2, 3, 4)
    min_side: int = 1


@dataclass
class Tensor:
    name: str
    type: TensorType

    @property
    def shape(self) -> Shape:
        assert self.type.shape is not None
        return self.type.shape

    @property
    def rank(self) -> int:
        return len(self.shape)

    def static(self, axis: int) -> bool:
        return isinstance(self.shape[axis], int)


@dataclass
class Builder:
    """A graph under construction: the tensors so far, the nodes and the initializers."""

    chooser: Chooser
    options: GraphOptions
    registry: Registry = field(default_factory=default_registry)
    inputs: list[Value] = field(default_factory=list)
    nodes: list[Node] = field(default_factory=list)
    inits: dict[str, np.ndarray] = field(default_factory=dict)
    pool: list[Tensor] = field(default_factory=list)
    consts: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def dtype(self) -> str:
        return self.options.dtype

    def integer(self, lo: int, hi: int) -> int:
        return self.chooser.integer(lo, hi)

    def pick(self, ok: Callable[[Tensor], bool] = lambda t: True) -> Tensor | None:
        """A tensor of the graph's dtype that satisfies ``ok`` (the most recent first)."""
        found = [t for t in reversed(self.pool) if t.type.dtype == self.dtype and ok(t)]
        return choice(self.chooser, found) if found else None

    def rng(self) -> np.random.Generator:
        return np.random.default_rng(self.chooser.seed())

    def const(self, value: np.ndarray) -> str:
        name = f"c{len(self.inits)}"
        self.inits[name] = np.asarray(value)
        self.consts[name] = self.inits[name]
        return name

    def weights(self, shape: Sequence[int], lo: float = -1.0, hi: float = 1.0) -> str:
        """A float constant of the graph's dtype, uniform in ``[lo, hi)``."""
        values = self.rng().uniform(lo, hi, size=tuple(shape))
        return self.const(values.astype(self.dtype))

    def ints(self, values: Sequence[int]) -> str:
        return self.const(np.asarray(list(values), dtype=np.int64))

    def add(self, op: str, inputs: Sequence[str], attrs: Mapping[str, Any] | None = None,
            outputs: int = 1, domain: str = "") -> list[Tensor]:
        """Append a node; its output types come from the registry (a failure is a bug here)."""
        k = len(self.nodes)
        names = [f"t{k}" if outputs == 1 else f"t{k}_{i}" for i in range(outputs)]
        node = Node(op, tuple(inputs), tuple(names), Attrs(attrs), name=f"n{k}", domain=domain)
        schema = self.registry.get(op, domain, self.options.opset)
        call = schema.call(node.attrs, outputs, node.name)
        types = [self.type_of(i) if i else None for i in inputs]
        values = [self.consts.get(i) for i in inputs]
        out = [TensorType(t.dtype, t.shape) for t in schema.infer(types, values, call)]
        if any(t.shape is None or "?" in t.shape for t in out):
            raise AssertionError(f"generator made {op} with an unknown output shape: {out}")
        self.nodes.append(node)
        made = [Tensor(n, t) for n, t in zip(names, out, strict=True)]
        self.pool.extend(made)
        return made

    def input_names(self) -> set[str]:
        return {v.name for v in self.inputs}

    def type_of(self, name: str) -> TensorType:
        for t in self.pool:
            if t.name == name:
                return t.type
        array = self.inits[name]
        return TensorType(array.dtype.name, tuple(int(d) for d in array.shape))


def input_shape(b: Builder) -> Shape:
    rank = choice(b.chooser, b.options.ranks)
    lo = b.options.min_side
    dims: list[Dim] = [b.integer(1 if i == 0 else lo, max(lo, b.options.max_side))
                       for i in range(rank)]
    if b.options.symbolic:
        dims[0] = SYMBOL
    return tuple(dims)


def build_graph(chooser: Chooser, options: GraphOptions = GraphOptions(),
                registry: Registry | None = None) -> Graph:
    """A random verified graph (see the module invariants)."""
    from .opgen import generators

    if options.opset < MIN_OPSET:
        raise ValueError(f"random graphs need opset {MIN_OPSET} or newer, not {options.opset}")
    b = Builder(chooser, options, registry or default_registry())
    for k in range(b.integer(1, max(1, options.max_inputs))):
        value = Value.of(f"x{k}", options.dtype, input_shape(b))
        b.inputs.append(value)
        b.pool.append(Tensor(value.name, value.type))
    table = generators(options.ops)
    for _ in range(b.integer(options.min_nodes, max(options.min_nodes, options.max_nodes))):
        gen = choice(chooser, table)
        if not gen(b):
            table[0](b)  # the first generator (a unary op) applies to anything
    return verify(_graph(b), b.registry)


def _graph(b: Builder) -> Graph:
    used = {i for n in b.nodes for i in n.inputs}
    made = [t for t in b.pool if t.name not in b.input_names()]
    sinks = [t for t in made if t.name not in used] or made[-1:]
    outputs = sinks[-b.options.max_outputs:]
    if made and coin(b.chooser):  # an intermediate that is also an output
        extra = choice(b.chooser, made)
        if extra not in outputs:
            outputs.append(extra)
    if not outputs:  # no node at all: the graph is the identity
        outputs = b.add("Identity", [b.inputs[0].name])
    return Graph(tuple(b.nodes), tuple(b.inputs),
                 tuple(Value(t.name, t.type) for t in outputs), b.inits,
                 name="random", opset={"": b.options.opset, "ge": 1})


# ----------------------------------------------------------------------------- feeds


def bind_dims(graph: Graph, rng: np.random.Generator, max_size: int = 4) -> dict[str, int]:
    """A size in ``[1, max_size]`` for each symbolic dim of the graph's inputs."""
    dims: dict[str, int] = {}
    for v in graph.inputs:
        for d in v.shape or ():
            if isinstance(d, str) and d not in dims:
                dims[d] = int(rng.integers(1, max_size + 1))
    return dims


def random_feeds(graph: Graph, rng: np.random.Generator | int = 0,
                 dims: Mapping[str, int] | None = None, *, scale: float = 1.0
                 ) -> dict[str, np.ndarray]:
    """Inputs for ``graph``: floats ~ N(0, scale), ints in ``[0, 10)``, bools fair coins.

    Inputs with an initializer default are left out; symbolic dims take ``dims`` or a random
    size from ``bind_dims``.
    """
    rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    sizes = dict(dims) if dims is not None else bind_dims(graph, rng)
    feeds = {}
    for v in graph.inputs:
        if v.name in graph.initializers:
            continue
        shape = tuple(d if isinstance(d, int) else sizes.get(d, 1) for d in v.shape or ())
        feeds[v.name] = random_array(rng, v.dtype, shape, scale)
    return feeds
