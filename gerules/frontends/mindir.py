"""MindSpore MindIR input (atc's ``--framework=1``): a ``.mindir`` read natively with protobuf.

MindIR is a protobuf (``mind_ir.ModelProto``); the subset of its public definitions we read is
``mindir.proto`` beside this module (built by ``protodef``; reading needs no MindSpore, and
parsing runs no code). The graph is MindSpore's exported inference graph: parameters (the
weights, raw little-endian data), ``Constant`` value nodes (scalars, tuples), and nodes
``REF::<primitive>`` whose primitive (``model.primitives``) names the op. Old-style
primitives carry their attributes (``Conv2D``, ``MaxPool``); newer ones take them as inputs
(``BatchNorm``, ``AvgPool``, ``MatMul``, ``Softmax``, ...).

Modules: ``mindir_values`` (message classes, tensors, attribute values), ``mindir_ops`` (one
converter per primitive), this one (reading, the graph walk, ``--mode=3``).

MindSpore's side-effect plumbing is resolved, not converted: ``Load`` is its parameter,
``Depend`` its first input, ``UpdateState`` / ``MakeTuple`` of monads vanish,
``TupleGetItem`` picks from an op's tuple of outputs.

Invariants:
- Every problem is a ``GeError`` naming the file and the node (the node's name without
  MindSpore's scope prefix, its primitive as the op). An op we do not convert is refused by
  its primitive name; ``check`` lists every node for ``--mode=3``.
- Names: inputs and weights keep their names without the scope prefix (``x``,
  ``conv1.weight``); nodes are named after the MindIR node; the outputs are ``output``
  (``output0``, ``output1``, ... when there are several).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..api.builder import GraphBuilder
from ..api.handles import Tensor
from ..errors import GeError, ModelError, UsageError
from ..ir.graph import Graph
from .files import read_message
from .mindir_ops import CONVERTERS, Call
from .mindir_values import DTYPES, Param, attr_value, proto, short, tensor_array


def read_model(path: str | os.PathLike[str]) -> Any:
    """The ``mind_ir.ModelProto`` of a ``.mindir`` file."""
    where = str(path)
    model = read_message(path, proto()["ModelProto"](), "MindIR file")
    if not model.HasField("graph") or not len(model.graph.node):
        raise ModelError("not a MindIR model: it holds no graph", file=where)
    _check_text(model, where)
    if len(model.functions):
        raise ModelError(f"the model calls {len(model.functions)} sub-graphs (functions); only "
                         "a single inlined inference graph is supported", file=where)
    return model


def _check_text(model: Any, where: str) -> None:
    """Every name we read is text: protobuf hands back ``bytes`` for invalid UTF-8."""
    g = model.graph
    names = [g.name, *(p.name for p in g.parameter), *(v.name for v in (*g.input, *g.output))]
    for n in g.node:
        names += [n.name, n.op_type, *n.input, *n.output, *(a.name for a in n.attribute)]
    for p in model.primitives:
        names += [p.name, p.op_type, *(a.name for a in p.attribute)]
    for name in names:
        if not isinstance(name, str):
            shown = bytes(name).decode("utf-8", "replace")
            raise ModelError(f"the name {shown!r} is not valid UTF-8", file=where)


# ----------------------------------------------------------------------------- converting


def convert(path: str | os.PathLike[str],
            input_shapes: Mapping[str, Sequence[int]] | None = None) -> Graph:
    """The verified graph of a ``.mindir`` (see the module docstring)."""
    model = read_model(path)
    try:
        return _Builder(model, dict(input_shapes or {})).build()
    except GeError as e:
        if isinstance(e, UsageError) and e.node is not None:
            e = ModelError(e.message, node=e.node, op=e.op, tensor=e.tensor)
        raise e.with_place(file=str(path)) from None


def check(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """One ``--mode=3`` entry per MindIR node: its name, primitive and whether we convert it."""
    model = read_model(path)
    prims = {p.name: p for p in model.primitives}
    nodes = []
    for node in model.graph.node:
        if node.op_type == "Constant":
            continue
        op = _primitive(node, prims).op_type
        entry: dict[str, Any] = {"name": short(node.name), "op": op, "result": "supported"}
        if op not in CONVERTERS:
            entry.update(result="unsupported", reason=f"MindSpore primitive '{op}' is not "
                         "supported")
        nodes.append(entry)
    return nodes


def _primitive(node: Any, prims: Mapping[str, Any]) -> Any:
    ref = node.op_type.removeprefix("REF::")
    if ref not in prims:
        raise ModelError(f"op '{node.op_type}' names no primitive of the model",
                         node=short(node.name))
    return prims[ref]


class _Builder:
    def __init__(self, model: Any, shapes: dict[str, Sequence[int]]) -> None:
        self.model, self.shapes = model, shapes
        self.g = GraphBuilder(short(model.graph.name) or "mindir")
        self.values: dict[str, Any] = {}
        self.prims = {p.name: p for p in model.primitives}
        self.consts: dict[str, Tensor] = {}
        self.names: set[str] = set()

    def node_name(self, node: Any) -> str:
        return short(node.name) or (node.output[0] if len(node.output) else "(unnamed)")

    def const(self, p: Param) -> Tensor:
        if p.name not in self.consts:
            self.consts[p.name] = self.g.const(p.array, name=p.name)
        return self.consts[p.name]

    def build(self) -> Graph:
        graph = self.model.graph
        for t in graph.parameter:
            self.values[t.name] = Param(short(t.name), tensor_array(t, short(t.name)))
        for v in graph.input:
            self._input(v)
        for node in graph.node:
            self._node(node)
        for k, v in enumerate(graph.output):
            value = self.values.get(v.name)
            if not isinstance(value, Tensor):
                raise ModelError(f"output '{short(v.name)}' is not a computed tensor")
            self.g.output(value, name="output" if len(graph.output) == 1 else f"output{k}")
        return self.g.build()

    def _input(self, v: Any) -> None:
        name = short(v.name)
        if not len(v.tensor):
            raise ModelError("an input without a tensor type", tensor=name)
        t = v.tensor[0]
        dims: list[Any] = [int(d) for d in t.dims]
        given = self.shapes.get(name)
        if given is not None:
            dims = list(given)
        dims = ["batch" if d == -1 else d for d in dims]
        dtype = DTYPES.get(t.data_type)
        if dtype is None:
            raise ModelError(f"unsupported input data type {t.data_type}", tensor=name)
        self.values[v.name] = self.g.input(name, dims, np.dtype(dtype).name)

    def _node(self, node: Any) -> None:
        if not len(node.output):
            raise ModelError("a node without outputs", node=self.node_name(node))
        if node.op_type == "Constant":
            value = attr_value(node.attribute[0], short(node.name)) if len(
                node.attribute) else None
            self.values[node.output[0]] = value
            return
        prim = _primitive(node, self.prims)
        args = []
        for name in node.input:
            if name not in self.values:
                raise ModelError(f"input '{short(name)}' is not defined before it is used",
                                 node=self.node_name(node), op=prim.op_type)
            args.append(self.values[name])
        convert_op = CONVERTERS.get(prim.op_type)
        if convert_op is None:
            raise ModelError(f"MindSpore primitive '{prim.op_type}' is not supported",
                             node=self.node_name(node), op=prim.op_type)
        call = Call(self, node, prim, args)
        try:
            result = convert_op(call)
        except GeError as e:
            raise e.with_place(node=call.name, op=prim.op_type)
        if len(node.output) == 1:
            self.values[node.output[0]] = result
            return
        if not isinstance(result, tuple) or len(result) != len(node.output):
            raise ModelError(f"has {len(node.output)} outputs; {prim.op_type} makes one",
                             node=call.name, op=prim.op_type)
        self.values.update(zip(node.output, result, strict=True))
