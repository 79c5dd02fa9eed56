"""``GraphBuilder``: build a graph op by op from Python, then ``build()`` a frozen ``Graph``.

```python
g = GraphBuilder("tiny")
x = g.input("x", ["N", 3, 32, 32])
w = g.const(np.ones((8, 3, 3, 3), np.float32), name="conv.w")
y = g.ops.Relu(g.op("Conv", x, w, pads=[1] * 4, name="conv"))
g.output(y, name="y")
graph = g.build()
```

Invariants:
- Each ``op()`` is checked when it is called, with the node named in every error: the op
  exists at the builder's opset (did-you-mean otherwise), the inputs fit the op's ports
  (a missing required input names the port), every attribute exists and has its schema kind,
  and shape and dtype inference accepts the operands. A failed call changes nothing.
- Names are unique: tensor names (inputs, constants, op outputs) and node names each form one
  namespace; a name given twice is a ``UsageError``. Unnamed nodes are ``<Op>_<k>``; an op's
  single output is named like its node, several outputs ``<node>.<port>`` (``<port><k>`` for
  a variadic port).
- The returned ``Tensor`` handles carry the inferred types; constants of up to 4096 elements
  are propagated, so shape subgraphs (Shape -> Gather -> Concat -> Reshape) stay static.
- ``build()`` runs the same ``verify`` the ONNX loader runs and returns its shape-inferred
  graph; the builder stays usable afterwards (more ops, another ``build()``).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, overload

import numpy as np

from ..errors import GeError, GraphError, UsageError
from ..ir import formats
from ..ir.attrs import Attrs
from ..ir.graph import Dim, Graph, Node, TensorType, Value
from ..ir.infer import infer_node
from ..ir.registry import MAX_OPSET, OpSchema, Registry, default_registry
from ..ir.verify import verify
from ..ir.weights import materialize
from . import checks
from .handles import (
    Input,
    Tensor,
    array_of,
    dtype_name,
    is_weak,
    type_of,
    weak_array,
    weak_dtype,
)
from .names import (
    DEFAULT_OPSET,
    input_dim,
    named_dims,
    opsets,
    output_names,
    port_name,
    split_op,
)
from .namespace import Ops

if TYPE_CHECKING:
    import onnx

_owners = itertools.count(1)


class GraphBuilder:
    """A graph under construction: add inputs, constants, ops and outputs, then ``build()``.

    ``opset`` is the ai.onnx opset (an int) or a ``{domain: version}`` mapping; it picks each
    op's semantics. ``g.ops`` has one function per registry op (``g.ops.Conv(...)``).
    """

    def __init__(self, name: str = "graph", *, opset: int | Mapping[str, int] = DEFAULT_OPSET,
                 registry: Registry | None = None) -> None:
        self.name = name
        self.metadata: dict[str, str] = {}
        self._registry = registry or default_registry()
        self._opset = opsets(opset)
        self._owner = next(_owners)
        self._inputs: list[Value] = []
        self._initializers: dict[str, np.ndarray] = {}
        self._nodes: list[Node] = []
        self._outputs: list[Value] = []
        self._types: dict[str, TensorType] = {}
        self._consts: dict[str, np.ndarray] = {}
        self._node_names: set[str] = set()
        self._counts: dict[str, int] = {}
        self.ops = Ops(self)

    # ------------------------------------------------------------------ reading

    @property
    def registry(self) -> Registry:
        return self._registry

    @property
    def opset(self) -> dict[str, int]:
        """The opset per domain (a copy); ``ge`` appears once a ``ge`` op is added."""
        return dict(self._opset)

    def opset_of(self, domain: str) -> int:
        """The opset version ops of ``domain`` are resolved at."""
        return self._opset.get(domain, MAX_OPSET.get(domain, 1))

    @property
    def inputs(self) -> tuple[Tensor, ...]:
        return tuple(self[v.name] for v in self._inputs)

    @property
    def outputs(self) -> tuple[Tensor, ...]:
        return tuple(self[v.name] for v in self._outputs)

    @property
    def nodes(self) -> tuple[Node, ...]:
        return tuple(self._nodes)

    def __getitem__(self, name: str) -> Tensor:
        """The handle of the tensor called ``name``."""
        if name not in self._types:
            raise UsageError(f"graph '{self.name}' has no tensor '{name}'", tensor=name)
        return Tensor(name, self._types[name], self._owner)

    def __contains__(self, name: object) -> bool:
        return name in self._types

    def __repr__(self) -> str:
        return (f"<GraphBuilder '{self.name}': {len(self._inputs)} inputs, "
                f"{len(self._nodes)} nodes, {len(self._outputs)} outputs>")

    # ------------------------------------------------------------------ adding

    def input(self, name: str, shape: Sequence[Dim | None] | None,
              dtype: object = "float32", *, format: str = formats.ND) -> Tensor:  # noqa: A002
        """A graph input; dims are ints, names (``"N"``: symbolic) or ``None`` (unnamed).
        ``format``: an NPU data format it is held in (``NC1HWC0``, ``FRACTAL_NZ``...; the
        shape stays logical, feeds come in the physical layout), as the verifier's
        instances of layout rules have them."""
        self._check_new_tensor(name)
        where = f"input '{name}'"
        dims = None if shape is None else tuple(input_dim(d, k, name) for k, d in enumerate(shape))
        if format not in formats.FORMATS:
            raise UsageError(f"{where}: unknown format {format!r} (one of "
                             f"{', '.join(formats.FORMATS)})")
        why = formats.can_hold(format, dims)
        if why is not None:
            raise UsageError(f"{where}: {why}")
        value = Value(name, TensorType(dtype_name(dtype, where), dims, format))
        self._inputs.append(value)
        self._types[name] = value.type
        return self[name]

    def const(self, value: Any, name: str | None = None, *, dtype: object = None) -> Tensor:
        """A constant (an initializer) from a NumPy array, or from Python numbers or lists
        (ints as int64, floats as float32, unless ``dtype`` says otherwise)."""
        name = self._fresh_tensor(name, "const")
        where = f"constant '{name}'"
        target = None if dtype is None else dtype_name(dtype, where)
        if isinstance(value, np.ndarray | np.generic):
            array = array_of(value, where)
            array = array if target is None else array.astype(target)
        elif is_weak(value):
            array = weak_array(value, target, where)
        else:
            raise UsageError(f"{where}: expected a NumPy array or Python numbers, got "
                             f"{type(value).__name__}")
        self._store_const(name, array)
        return self[name]

    @overload
    def op(self, op: str, *inputs: Input, outputs: Literal[1] = 1, name: str | None = None,
           domain: str | None = None, **attrs: Any) -> Tensor: ...

    @overload
    def op(self, op: str, *inputs: Input,
           outputs: int | Sequence[str], name: str | None = None,
           domain: str | None = None, **attrs: Any) -> tuple[Tensor, ...]: ...

    def op(self, op: str, *inputs: Input, outputs: int | Sequence[str] = 1,
           name: str | None = None, domain: str | None = None,
           **attrs: Any) -> Tensor | tuple[Tensor, ...]:
        """Add one node of ``op`` (``"Conv"``, ``"ge.FusedConv"``, or ``domain=``).

        Inputs are handles, tensor names, ``None`` for an omitted optional input, NumPy
        arrays or Python numbers/lists (stored as constants). ``outputs`` is a count or the
        output names. Returns the output handle, or a tuple when asked for several outputs.
        """
        domain, op = split_op(op, domain)
        node = self._node_name(name, op)
        schema = self._schema(op, domain, node)
        out_names = self._output_names(schema, node, outputs)
        names, consts = self._operands(schema, node, inputs)
        checks.check_arity(schema, names, len(out_names), node)
        node_attrs = checks.attributes(schema, attrs, node)
        new = Node(op, tuple(names), tuple(out_names), Attrs(node_attrs), name=node,
                   domain=domain)
        types = {**self._types, **{k: type_of(v) for k, v in consts.items()}}
        out_types, values = self._infer(new, schema, types, {**self._consts, **consts})
        for cname, array in consts.items():
            self._store_const(cname, array)
        self._record(new, out_types, values)
        handles = tuple(self[o] for o in out_names)
        return handles[0] if outputs == 1 else handles

    def output(self, tensor: Tensor | str, name: str | None = None) -> Tensor:
        """Mark ``tensor`` as a graph output; a different ``name`` adds an Identity node."""
        source = self._resolve(tensor)
        if name is not None and name != source:
            return self.output(self.op("Identity", source, name=name))
        if source in {v.name for v in self._outputs}:
            raise UsageError(f"'{source}' is already an output of graph '{self.name}'",
                             tensor=source)
        self._outputs.append(Value(source, self._types[source]))
        return self[source]

    # ------------------------------------------------------------------ finishing

    def build(self) -> Graph:
        """The verified, shape-inferred ``Graph`` (the loader's checks and errors)."""
        graph = Graph(nodes=tuple(self._nodes), inputs=tuple(self._inputs),
                      outputs=tuple(self._outputs), initializers=dict(self._initializers),
                      name=self.name, opset=dict(self._opset), metadata=dict(self.metadata))
        return verify(graph, self._registry)

    def validate(self) -> None:
        """Raise the first problem (as ``build()`` would), naming its node or tensor."""
        self.build()

    def to_onnx(self) -> onnx.ModelProto:
        """The graph as an ONNX ``ModelProto`` (``ge`` ops in domain ``ge``)."""
        from ..onnx_io import to_model_proto

        return to_model_proto(self.build(), self._registry)

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the graph as an ONNX file (atomically); returns the path."""
        from ..onnx_io import save_model

        save_model(self.build(), path)
        return Path(path)

    @classmethod
    def from_graph(cls, graph: Graph, *, registry: Registry | None = None) -> GraphBuilder:
        """A builder holding ``graph`` (verified first), to extend or inspect."""
        builder = cls(graph.name, opset=graph.opset, registry=registry)
        graph = verify(graph, builder.registry)
        builder.metadata = dict(graph.metadata)
        for v in graph.inputs:
            builder._inputs.append(v)
            builder._types[v.name] = v.type
        for cname, weight in graph.initializers.items():
            array = materialize(weight)
            if cname in builder._types:  # a graph input with a default value
                builder._initializers[cname] = array
            else:
                builder._store_const(cname, array)
        for node in graph.nodes:
            builder._replay(node)
        builder._outputs = list(graph.outputs)
        return builder

    @classmethod
    def from_onnx(cls, source: str | os.PathLike[str] | bytes | onnx.ModelProto, *,
                  registry: Registry | None = None) -> GraphBuilder:
        """A builder holding an ONNX model (a path, its bytes, or a ``ModelProto``)."""
        from ..onnx_io import load_model

        if not isinstance(source, str | os.PathLike | bytes | bytearray | memoryview):
            source = source.SerializeToString()
        return cls.from_graph(load_model(source), registry=registry)

    # ------------------------------------------------------------------ internals

    def _check_new_tensor(self, name: object) -> None:
        if not isinstance(name, str) or not name:
            raise UsageError(f"a tensor name must be a non-empty str, got {name!r}")
        if name in self._types:
            raise UsageError(f"graph '{self.name}' already has a tensor called '{name}'",
                             tensor=name)

    def _fresh_tensor(self, name: str | None, stem: str) -> str:
        if name is None:
            return self._unused(stem)
        self._check_new_tensor(name)
        return name

    def _unused(self, stem: str) -> str:
        """The first free ``<stem>_<k>``; the counter moves only when a name is taken."""
        k = self._counts.get(stem, 0)
        while f"{stem}_{k}" in self._types or f"{stem}_{k}" in self._node_names:
            k += 1
        return f"{stem}_{k}"

    def _taken(self, name: str) -> None:
        stem, _, k = name.rpartition("_")
        if stem and k.isdigit():
            self._counts[stem] = max(self._counts.get(stem, 0), int(k) + 1)

    def _node_name(self, name: str | None, op: str) -> str:
        if name is None:
            return self._unused(op)
        if not isinstance(name, str) or not name:
            raise UsageError(f"{op}: a node name must be a non-empty str, got {name!r}")
        if name in self._node_names:
            raise UsageError(f"graph '{self.name}' already has a node called '{name}'",
                             node=name, op=op)
        return name

    def _schema(self, op: str, domain: str, node: str) -> OpSchema:
        qualified = f"{domain}.{op}" if domain else op
        try:
            return self._registry.get(op, domain, self.opset_of(domain))
        except GeError as e:
            raise e.with_place(node=node, op=qualified)

    def _output_names(self, schema: OpSchema, node: str,
                      outputs: int | Sequence[str]) -> list[str]:
        if isinstance(outputs, str) or not isinstance(outputs, int | Sequence):
            raise UsageError(f"outputs must be a count or a list of names, got {outputs!r}",
                             node=node, op=schema.qualified_op)
        if isinstance(outputs, int):
            checks.check_outputs(schema, outputs, node)
            names = output_names(schema, node, outputs)
        else:
            names = list(outputs)
            if len(set(names)) != len(names):
                raise UsageError(f"output names repeat: {names}", node=node)
        for out in names:
            self._check_new_tensor(out)
        checks.check_outputs(schema, len(names), node)
        return names

    def _operands(self, schema: OpSchema, node: str, inputs: Sequence[Input]
                  ) -> tuple[list[str], dict[str, np.ndarray]]:
        """Input names, and the constants made from arrays and Python values (not stored)."""
        weak = weak_dtype(schema, [self._type_if_known(x) for x in inputs])
        names: list[str] = []
        consts: dict[str, np.ndarray] = {}
        for k, x in enumerate(inputs):
            if x is None or isinstance(x, Tensor | str):
                names.append("" if x is None else self._resolve(x, node, schema.qualified_op))
                continue
            cname = self._const_name(node, schema, k, consts)
            where = f"node '{node}' ({schema.qualified_op}): input {k}"
            if isinstance(x, np.ndarray | np.generic):
                consts[cname] = array_of(x, where)
            elif is_weak(x):
                consts[cname] = weak_array(x, weak, where)
            else:
                raise UsageError(f"{where}: expected a Tensor, a tensor name, None, a NumPy "
                                 f"array or Python numbers, got {type(x).__name__}")
            names.append(cname)
        return names, consts

    def _type_if_known(self, x: object) -> TensorType | None:
        if isinstance(x, Tensor):
            return x.type
        if isinstance(x, str):
            return self._types.get(x)
        if isinstance(x, np.ndarray | np.generic):
            return type_of(np.asarray(x))
        return None

    def _const_name(self, node: str, schema: OpSchema, index: int,
                    pending: Mapping[str, object]) -> str:
        stem = f"{node}.{port_name(schema.inputs, index)}"
        name, k = stem, 1
        while name in self._types or name in pending:
            k += 1
            name = f"{stem}_{k}"
        return name

    def _resolve(self, x: Tensor | str, node: str | None = None, op: str | None = None
                 ) -> str:
        if isinstance(x, Tensor):
            if x.owner != self._owner:
                raise UsageError(f"tensor '{x.name}' belongs to another graph builder, not "
                                 f"to '{self.name}'", node=node, op=op)
            return x.name
        if x not in self._types:
            raise GraphError(f"input '{x}' is not a graph input, a constant or an op output "
                             f"of graph '{self.name}'", node=node, op=op)
        return x

    def _infer(self, node: Node, schema: OpSchema, types: Mapping[str, TensorType],
               consts: Mapping[str, np.ndarray]
               ) -> tuple[list[TensorType], list[np.ndarray] | None]:
        in_types = [types.get(i) if i else None for i in node.inputs]
        in_consts = [consts.get(i) if i else None for i in node.inputs]
        out, values = infer_node(node, schema, in_types, in_consts)
        if len(out) < len(node.outputs):
            raise GraphError(f"asked for {len(node.outputs)} outputs; inference gives "
                             f"{len(out)}", node=node.label, op=node.qualified_op)
        return [named_dims(t, o) for t, o in zip(out, node.outputs, strict=False)], values

    def _record(self, node: Node, types: Sequence[TensorType],
                values: Sequence[np.ndarray] | None) -> None:
        self._nodes.append(node)
        self._node_names.add(node.label)
        self._taken(node.label)
        self._opset.setdefault(node.domain, self.opset_of(node.domain))
        for k, out in enumerate(node.outputs):
            self._types[out] = types[k]
            if values is not None and k < len(values):
                self._consts[out] = values[k]

    def _replay(self, node: Node) -> None:
        schema = self._schema(node.op, node.domain, node.label)
        types, values = self._infer(node, schema, self._types, self._consts)
        self._record(node, types, values)

    def _store_const(self, name: str, array: np.ndarray) -> None:
        frozen = array
        if array.flags.writeable:  # the caller's array may change later: keep a copy
            frozen = np.array(array, copy=True)
            frozen.setflags(write=False)
        self._initializers[name] = frozen
        self._taken(name)
        self._types[name] = type_of(frozen)
        self._consts[name] = frozen

