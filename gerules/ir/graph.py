"""The graph IR: values, nodes and graphs as frozen dataclasses.

Invariants (checked by ``gerules.ir.verify.verify``):
- SSA: every tensor name is defined once, by a graph input, an initializer or one node output.
- ``nodes`` are in a topological order: a node reads only names defined before it.
- An input name ``""`` stands for an omitted optional input; output names are never empty.
- Shapes hold ``int`` dims and ``str`` symbolic dims (the same name means the same size);
  ``shape is None`` means the rank itself is unknown.
- Initializers are weights (``ir.weights``): read-only NumPy arrays (views of the model
  file's memory map when loaded from a file) or ``Deferred`` constants (folded weights not
  computed yet; only the compiler's graphs between optimization and the ``.om`` hold them:
  ``materialized()`` computes them). ``weights.content_key`` addresses weights by content so
  identical ones are stored once.
- Domain ``""`` is ai.onnx; fused NPU ops live in domain ``"ge"``.
- ``functions`` holds the composite ops (``ir.composite``) the nodes use, with what they use,
  so a graph (and the ``.om`` or ONNX file written from it) runs without the rule files.
- A subgraph (an attribute of If, Loop, Scan) is a ``Graph`` whose nodes may read names it
  does not define: its ``free_names``, values of the enclosing graph. The node that owns it
  lists those values as its last inputs (the reader appends them), in the order of
  ``free_names`` over its subgraphs, so dependencies, lifetimes and renaming all see them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import numpy as np

from .attrs import EMPTY, Attrs
from .dtypes import DType, itemsize
from .formats import ND, physical_shape
from .formats import name as format_name
from .weights import Deferred, Weight, content_key, materialize

if TYPE_CHECKING:
    from .composite import CompositeOp

Dim = int | str
Shape = tuple[Dim, ...]
# The dtype of a subgraph input or output whose model leaves its type to inference (ONNX
# function bodies do); only subgraph signatures hold it, inference replaces it.
UNTYPED = ""


@dataclass(frozen=True, slots=True)
class TensorType:
    """Element type, logical shape and format of a tensor (``shape is None``: unknown rank).

    ``shape`` is always the logical shape (the model's dims); ``format`` says how memory
    holds it (``ir.formats``: ``ND`` plain, or a blocked NPU format), and ``physical_shape``
    and ``nbytes`` are what memory holds, padding included.
    """

    dtype: DType
    shape: Shape | None
    format: str = ND

    @property
    def rank(self) -> int | None:
        return None if self.shape is None else len(self.shape)

    @property
    def is_static(self) -> bool:
        return self.shape is not None and all(isinstance(d, int) for d in self.shape)

    def numel(self) -> int | None:
        """Number of elements when the shape is static (Python ints never overflow)."""
        if not self.is_static:
            return None
        n = 1
        for d in self.shape:  # type: ignore[union-attr]
            n *= int(d)
        return n

    @property
    def physical_shape(self) -> Shape | None:
        """The dims memory holds (the logical shape for plain formats)."""
        if self.format == ND or self.shape is None:
            return self.shape
        return physical_shape(self.shape, self.dtype, self.format)

    @property
    def format_name(self) -> str:
        """The format as GE names it (``NCHW`` for a plain 4-D tensor)."""
        return format_name(self.format, self.rank)

    def nbytes(self) -> int | None:
        """Bytes in memory: the physical shape's, padding included (static shapes only)."""
        shape = self.physical_shape if self.format != ND else self.shape
        if shape is None or not all(isinstance(d, int) for d in shape):
            return None
        n = 1
        for d in shape:
            n *= int(d)
        return n * itemsize(self.dtype)

    def held_str(self) -> str:
        """The type as memory holds it: ``float32[N,224,224,3] (NHWC)`` for a
        ``float32[N,3,224,224]`` held channel-last (what a caller feeds); ``str`` otherwise."""
        if self.format == ND or self.shape is None:
            return str(self)
        dims = ",".join(str(d) for d in self.physical_shape or ())
        return f"{self.dtype}[{dims}] ({self.format_name})"

    def with_format(self, fmt: str) -> TensorType:
        return self if fmt == self.format else TensorType(self.dtype, self.shape, fmt)

    def __str__(self) -> str:
        dims = "?" if self.shape is None else ",".join(str(d) for d in self.shape)
        tail = "" if self.format == ND else f"@{self.format}"
        return f"{self.dtype}[{dims}]{tail}"


@dataclass(frozen=True, slots=True)
class Value:
    """A named tensor with its type."""

    name: str
    type: TensorType

    @property
    def shape(self) -> Shape | None:
        return self.type.shape

    @property
    def dtype(self) -> DType:
        return self.type.dtype

    @staticmethod
    def of(name: str, dtype: DType, shape: Iterable[Dim] | None) -> Value:
        return Value(name, TensorType(dtype, None if shape is None else tuple(shape)))


@dataclass(frozen=True, slots=True)
class Node:
    """One operation: ``outputs = op(inputs, attrs)``."""

    op: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attrs: Attrs = EMPTY
    name: str = ""
    domain: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "inputs", tuple(self.inputs))
        object.__setattr__(self, "outputs", tuple(self.outputs))
        if not isinstance(self.attrs, Attrs):
            object.__setattr__(self, "attrs", Attrs(self.attrs))

    @property
    def qualified_op(self) -> str:
        """``"Conv"`` for ai.onnx, ``"ge.FusedConv"`` for other domains."""
        return f"{self.domain}.{self.op}" if self.domain else self.op

    @property
    def label(self) -> str:
        """The node's name, or its first output when it has none."""
        return self.name or (self.outputs[0] if self.outputs else self.op)

    def present_inputs(self) -> tuple[str, ...]:
        return tuple(i for i in self.inputs if i)

    def with_(self, **changes: Any) -> Node:
        return dataclasses.replace(self, **changes)


def _frozen_map(items: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return MappingProxyType(dict(items or {}))


def _readonly(array: Weight) -> Weight:
    if isinstance(array, Deferred):
        return array
    array = np.asarray(array)
    if array.flags.writeable:
        array = np.array(array, copy=True)
        array.setflags(write=False)
    return array


@dataclass(frozen=True, slots=True, eq=False, weakref_slot=True)
class Graph:
    """A model graph. Build it once; derive changed copies with ``replace``."""

    nodes: tuple[Node, ...]
    inputs: tuple[Value, ...]
    outputs: tuple[Value, ...]
    initializers: Mapping[str, Weight] = field(default_factory=dict)
    value_info: Mapping[str, Value] = field(default_factory=dict)
    name: str = "graph"
    opset: Mapping[str, int] = field(default_factory=lambda: {"": 17})
    metadata: Mapping[str, str] = field(default_factory=dict)
    functions: tuple[CompositeOp, ...] = ()  # ops defined by a body (ir.composite), used here

    def __post_init__(self) -> None:
        object.__setattr__(self, "nodes", tuple(self.nodes))
        object.__setattr__(self, "inputs", tuple(self.inputs))
        object.__setattr__(self, "outputs", tuple(self.outputs))
        inits = {k: _readonly(v) for k, v in self.initializers.items()}
        object.__setattr__(self, "initializers", _frozen_map(inits))
        object.__setattr__(self, "value_info", _frozen_map(self.value_info))
        object.__setattr__(self, "opset", _frozen_map(self.opset))
        object.__setattr__(self, "metadata", _frozen_map(self.metadata))
        object.__setattr__(self, "functions", tuple(self.functions))

    def replace(self, **changes: Any) -> Graph:
        return dataclasses.replace(self, **changes)

    @property
    def deferred(self) -> bool:
        """Whether some initializer is a ``Deferred`` constant not computed yet."""
        return any(isinstance(v, Deferred) for v in self.initializers.values())

    def materialized(self) -> Graph:
        """This graph with every deferred initializer computed (itself when there is none)."""
        if not self.deferred:
            return self
        return self.replace(initializers={k: materialize(v)
                                          for k, v in self.initializers.items()})

    @property
    def input_names(self) -> tuple[str, ...]:
        return tuple(v.name for v in self.inputs)

    @property
    def output_names(self) -> tuple[str, ...]:
        return tuple(v.name for v in self.outputs)

    def producers(self) -> dict[str, Node]:
        """Tensor name -> the node that writes it."""
        return {out: n for n in self.nodes for out in n.outputs}

    def consumers(self) -> dict[str, list[Node]]:
        """Tensor name -> the nodes that read it (a node reading twice is listed once)."""
        readers: dict[str, list[Node]] = {}
        for n in self.nodes:
            for name in dict.fromkeys(n.present_inputs()):
                readers.setdefault(name, []).append(n)
        return readers

    def type_of(self, name: str) -> TensorType | None:
        """The known type of a tensor, from inputs, outputs, value_info or initializers."""
        for v in self.inputs:
            if v.name == name:
                return v.type
        if name in self.value_info:
            return self.value_info[name].type
        for v in self.outputs:
            if v.name == name:
                return v.type
        if name in self.initializers:
            arr = self.initializers[name]
            return TensorType(arr.dtype.name, tuple(int(d) for d in arr.shape))
        return None

    def held_weights(self) -> dict[str, Value]:
        """The ``value_info`` entries of initializers held in a blocked format (their arrays
        are physical; these types say how to read them): what a copy of the graph that drops
        its inferred types must keep."""
        return {k: v for k, v in self.value_info.items()
                if k in self.initializers and v.type.format != ND}

    def function(self, domain: str, op: str) -> CompositeOp | None:
        """The composite op ``domain.op`` this graph carries, if any."""
        return next((f for f in self.functions if f.domain == domain and f.name == op), None)

    def key(self) -> tuple[Any, ...]:
        """A hashable structural key (nodes, signature, weights by content)."""
        return (self.nodes, self.inputs, self.outputs,
                tuple(sorted((k, content_key(v)) for k, v in self.initializers.items())))

    def op_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for n in self.nodes:
            counts[n.qualified_op] = counts.get(n.qualified_op, 0) + 1
        return dict(sorted(counts.items()))


def free_names(graph: Graph) -> tuple[str, ...]:
    """Names the nodes of ``graph`` read without ``graph`` defining them, in order of first
    use (a subgraph's values from its enclosing graph)."""
    defined = set(graph.input_names) | set(graph.initializers)
    free: dict[str, None] = {}
    for node in graph.nodes:
        for name in node.present_inputs():
            if name not in defined:
                free.setdefault(name)
        defined.update(node.outputs)
    return tuple(free)


def subgraphs(attrs: Mapping[str, Any]) -> list[Graph]:
    """The subgraph attributes among a node's ``attrs``, by attribute name."""
    return [v for _, v in sorted(attrs.items()) if isinstance(v, Graph)]


def captures(attrs: Mapping[str, Any]) -> tuple[str, ...]:
    """The enclosing-graph values read by the subgraphs among a node's ``attrs`` (the node's
    last inputs)."""
    seen: dict[str, None] = {}
    for g in subgraphs(attrs):
        for name in free_names(g):
            seen.setdefault(name)
    return tuple(seen)
