"""Lower a Graph into an e-graph (the conventions are in ``terms``).

Invariants:
- Every graph input becomes an ``Input`` leaf, every initializer and ``Constant`` node a
  ``Const`` leaf (identical bytes share one class); every other node one e-node (plus ``Proj``
  nodes for a node with several used outputs).
- Identical nodes over identical inputs land in one class through the hashcons: lowering is
  where common subexpressions merge.
- ``Lowered.names`` remembers, for each class made here, the tensor name it had and the node
  that wrote it, so extraction can keep names of what did not change and reports can say which
  original nodes a fusion replaced.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from ..engine import EGraph, ENode
from ..errors import GeError
from ..ir.graph import Graph, Node
from ..ir.infer import initializer_type
from .tensor import ConstTensor
from .terms import ABSENT, CONST, INPUT, OUTPUTS_ATTR, PROJ, TermContext, const_node


@dataclass
class Lowered:
    """An e-graph made from a graph, with the bookkeeping to raise it back."""

    egraph: EGraph
    ctx: TermContext
    roots: dict[str, int]  # graph output name -> class
    tensors: dict[str, int] = field(default_factory=dict)  # tensor name -> class at lowering
    producers: dict[str, Node] = field(default_factory=dict)  # tensor name -> original node
    const_names: dict[ConstTensor, str] = field(default_factory=dict)  # content -> init name
    node_enodes: list[tuple[Node, ENode, int]] = field(default_factory=list)

    def class_of(self, tensor: str) -> int:
        cid: int = self.egraph.find(self.tensors[tensor])
        return cid


def lower(graph: Graph, ctx: TermContext | None = None, *, explanations: bool = True) -> Lowered:
    """Build the e-graph of a shape-inferred ``graph``."""
    if ctx is None:
        ctx = TermContext(opset=graph.opset,
                          inputs={v.name: v.type for v in graph.inputs})
    egraph = ctx.new_egraph(explanations=explanations)
    low = Lowered(egraph, ctx, roots={})
    for v in graph.inputs:
        low.tensors[v.name] = egraph.add(ENode(INPUT, (("name", v.name),), ()))
    for name, array in graph.initializers.items():
        if name in low.tensors:
            continue  # a graph input with a default: the input wins
        node = const_node(array, initializer_type(graph, name, array))
        low.const_names.setdefault(node.get("value"), name)
        low.tensors[name] = egraph.add(node)
    used = _used_outputs(graph)
    for node in graph.nodes:
        try:
            _lower_node(low, node, used)
        except GeError as e:
            raise e.with_place(node=node.label, op=node.qualified_op)
    low.roots = {v.name: low.class_of(v.name) for v in graph.outputs}
    egraph.rebuild()
    return low


def _used_outputs(graph: Graph) -> set[str]:
    used = {i for n in graph.nodes for i in n.present_inputs()}
    return used | set(graph.output_names)


def _lower_node(low: Lowered, node: Node, used: set[str]) -> None:
    egraph = low.egraph
    if node.op == "Constant" and not node.domain:
        value = _constant_value(low, node)
        if value is not None:
            low.const_names.setdefault(ConstTensor(value), node.outputs[0])
            low.tensors[node.outputs[0]] = egraph.add(const_node(value))
            low.producers[node.outputs[0]] = node
            return
    children = _children(low, node)
    op = node.qualified_op
    live = [k for k, name in enumerate(node.outputs) if name and name in used]
    if live in ([], [0]) and len(node.outputs) >= 1 and not _always_tuple(low, node):
        attrs = low.ctx.op_attrs(op, node.attrs)
        enode = ENode(op, attrs, children)
        cid = egraph.add(enode)
        low.tensors[node.outputs[0]] = cid
        low.producers[node.outputs[0]] = node
        low.node_enodes.append((node, enode, cid))
        return
    attrs = low.ctx.op_attrs(op, {**node.attrs, OUTPUTS_ATTR: len(node.outputs)})
    enode = ENode(op, attrs, children)
    tup = egraph.add(enode)
    low.node_enodes.append((node, enode, tup))
    for k, name in enumerate(node.outputs):
        if name:
            low.tensors[name] = egraph.add(ENode(PROJ, (("index", k),), (tup,)))
            low.producers[name] = node


def _always_tuple(low: Lowered, node: Node) -> bool:
    """Ops whose output count is part of their meaning stay tuples: Split, and ops with
    several required outputs (TopK's values and indices), so a rule's ``TopK(x, k)[0]``
    matches whether or not the indices are read."""
    if node.domain or len(node.outputs) < 2:
        return False
    if node.op == "Split":
        return True
    try:
        schema = low.ctx.schema(node.qualified_op)
    except GeError:
        return False
    outputs = schema.outputs if schema is not None else ()
    return sum(not p.optional and not p.variadic for p in outputs) >= 2


def _children(low: Lowered, node: Node) -> tuple[int, ...]:
    inputs = list(node.inputs)
    while inputs and not inputs[-1]:
        inputs.pop()
    out = []
    for name in inputs:
        if not name:
            out.append(low.egraph.add(ENode(ABSENT, (), ())))
        else:
            out.append(low.tensors[name])
    return tuple(out)


def _constant_value(low: Lowered, node: Node) -> np.ndarray | None:
    """The value of a ``Constant`` node through its kernel (all value_* forms)."""
    schema = low.ctx.schema("Constant")
    try:
        return schema.kernel([], schema.call(node.attrs, 1, node.label))[0]
    except GeError:
        raise
    except (ValueError, TypeError, KeyError):
        return None


def input_types(graph: Graph) -> Mapping[str, object]:
    return {v.name: v.type for v in graph.inputs}


__all__ = ["CONST", "Lowered", "lower"]
