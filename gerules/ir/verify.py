"""``verify``: check a graph's invariants and report the first problem by node and tensor.

Checks, in order: the graph has outputs; every tensor is defined once (SSA); a graph input's
default (its initializer) has the input's dtype and fits its declared shape, as onnx's checker
and onnxruntime require; each node reads only tensors defined before it (else: a cycle, named
by its nodes, or a dangling input); every graph output is defined; ops exist at the graph's
opset with a valid arity and attributes; shapes and dtypes infer without contradiction.
``toposort`` orders an acyclic node list.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence

from ..errors import GraphError
from .graph import Graph, Node
from .infer import infer_graph, schema_for
from .registry import Registry, default_registry

# Graphs ``verify`` returned (with shapes), with the registry that checked them: a Graph is
# immutable, so verifying one again gives itself; the compile passes a graph through several
# steps that each verify what they are given.
_VERIFIED: weakref.WeakKeyDictionary[Graph, Registry] = weakref.WeakKeyDictionary()


def verify(graph: Graph, registry: Registry | None = None, *, shapes: bool = True) -> Graph:
    """Raise ``GraphError`` on the first broken invariant; return the shape-inferred graph
    (a graph this function returned before is returned as it is, without checking again)."""
    registry = registry or default_registry()
    if _VERIFIED.get(graph) is registry:
        return graph
    if not graph.outputs:
        raise GraphError("the graph has no outputs")
    _check_ssa(graph)
    _check_defaults(graph)
    _check_order(graph)
    for node in graph.nodes:
        _check_signature(node, graph, registry)
    if not shapes:
        return graph
    inferred = infer_graph(graph, registry)
    for node in inferred.nodes:
        _check_port_types(node, inferred, registry)
    _VERIFIED[inferred] = registry
    return inferred


def _check_port_types(node: Node, graph: Graph, registry: Registry) -> None:
    """Inputs whose port takes integers (shapes, axes, sizes) must be integer tensors."""
    schema = schema_for(node, graph, registry)
    for i, name in enumerate(node.inputs):
        port = schema.inputs[min(i, len(schema.inputs) - 1)] if schema.inputs else None
        if not name or port is None or port.dtype is None:
            continue
        t = graph.type_of(name)
        if t is not None and port.dtype == "int64" and t.dtype not in ("int64", "int32"):
            raise GraphError(f"input '{port.name}' must be an integer tensor, got {t.dtype}",
                             node=node.label, op=node.qualified_op, tensor=name)


def _check_defaults(graph: Graph) -> None:
    """An input with an initializer takes it as its default: the two types must agree."""
    for v in graph.inputs:
        default = graph.initializers.get(v.name)
        if default is None:
            continue
        shape = list(default.shape)
        fits = v.shape is None or (len(v.shape) == len(shape) and all(
            isinstance(d, str) or d == n for d, n in zip(v.shape, shape, strict=True)))
        if default.dtype.name != v.dtype or not fits:
            raise GraphError(f"graph input declares {v.type} but its initializer (the default "
                             f"value) is {default.dtype.name}{shape}", tensor=v.name)


def _check_ssa(graph: Graph) -> None:
    owner: dict[str, str] = {}

    def define(name: str, who: str) -> None:
        if not name:
            raise GraphError(f"{who} has an output with an empty name")
        if name in owner:
            raise GraphError(f"tensor is defined twice: by {owner[name]} and by {who}",
                             tensor=name)
        owner[name] = who

    for v in graph.inputs:
        define(v.name, "a graph input")
    for name in graph.initializers:
        if name not in owner:
            define(name, "an initializer")
    for node in graph.nodes:
        for out in node.outputs:
            define(out, f"node '{node.label}'")


def _check_order(graph: Graph) -> None:
    defined = set(graph.input_names) | set(graph.initializers)
    produced = graph.producers()
    for node in graph.nodes:
        for name in node.present_inputs():
            if name in defined:
                continue
            if name in produced:
                cycle = find_cycle(graph.nodes)
                if cycle:
                    names = " -> ".join(f"'{n.label}'" for n in cycle)
                    raise GraphError(f"the graph has a cycle: {names}")
                raise GraphError(
                    f"reads '{name}' before node '{produced[name].label}' writes it "
                    "(nodes are not in topological order)",
                    node=node.label, op=node.qualified_op,
                )
            raise GraphError(
                f"input '{name}' is not a graph input, an initializer or a node output",
                node=node.label, op=node.qualified_op,
            )
        defined.update(node.outputs)
    for v in graph.outputs:
        if v.name not in defined:
            raise GraphError("graph output is never produced", tensor=v.name)


def _check_signature(node: Node, graph: Graph, registry: Registry) -> None:
    schema = schema_for(node, graph, registry)
    n_in, n_out = len(node.inputs), len(node.outputs)
    hi = schema.max_inputs
    if n_in < schema.min_inputs or (hi is not None and n_in > hi):
        want = f"{schema.min_inputs}" if hi == schema.min_inputs else (
            f"{schema.min_inputs} to {hi}" if hi is not None else f"at least {schema.min_inputs}")
        raise GraphError(f"takes {want} inputs, got {n_in}", node=node.label,
                         op=node.qualified_op)
    for i, port in enumerate(schema.inputs[: min(n_in, len(schema.inputs))]):
        if not node.inputs[i] and not port.optional:
            raise GraphError(f"required input '{port.name}' is empty", node=node.label,
                             op=node.qualified_op)
    max_out = schema.max_outputs
    if n_out == 0 or (max_out is not None and n_out > max_out):
        raise GraphError(f"has {n_out} outputs; {schema.qualified_op} gives "
                         f"{max_out if max_out is not None else 'one or more'}",
                         node=node.label, op=node.qualified_op)
    try:
        schema.resolve(node.attrs)
    except GraphError:
        raise
    except Exception as e:  # ModelError from resolve
        raise GraphError(str(e), node=node.label, op=node.qualified_op) from None


def toposort(nodes: Sequence[Node], available: set[str]) -> list[Node]:
    """Nodes in a topological order (stable: keeps the given order where it can).

    Raises ``GraphError`` naming the nodes of a cycle, or a node whose input is defined
    nowhere.
    """
    produced = {o: n for n in nodes for o in n.outputs}
    pending = {id(n): sum(1 for i in set(n.present_inputs()) if i not in available)
               for n in nodes}
    readers: dict[str, list[Node]] = {}
    for n in nodes:
        for name in set(n.present_inputs()):
            if name not in available:
                if name not in produced:
                    raise GraphError(
                        f"input '{name}' is not a graph input, an initializer or a node output",
                        node=n.label, op=n.qualified_op)
                readers.setdefault(name, []).append(n)
    position = {id(n): k for k, n in enumerate(nodes)}
    import heapq

    ready = [(position[id(n)], id(n), n) for n in nodes if pending[id(n)] == 0]
    heapq.heapify(ready)
    order: list[Node] = []
    while ready:
        _, _, n = heapq.heappop(ready)
        order.append(n)
        for out in n.outputs:
            for r in readers.get(out, ()):
                pending[id(r)] -= 1
                if pending[id(r)] == 0:
                    heapq.heappush(ready, (position[id(r)], id(r), r))
    if len(order) != len(nodes):
        cycle = find_cycle(nodes) or [n for n in nodes if pending[id(n)] > 0]
        raise GraphError("the graph has a cycle: " + " -> ".join(f"'{n.label}'" for n in cycle))
    return order


def find_cycle(nodes: Sequence[Node]) -> list[Node]:
    """One cycle of nodes (iterative DFS), or ``[]`` when the nodes are acyclic."""
    produced = {o: n for n in nodes for o in n.outputs}
    state: dict[int, int] = {}  # 1 = on the stack, 2 = done
    for root in nodes:
        if id(root) in state:
            continue
        stack: list[tuple[Node, list[Node]]] = [(root, _preds(root, produced))]
        path = [root]
        state[id(root)] = 1
        while stack:
            node, preds = stack[-1]
            if not preds:
                state[id(node)] = 2
                stack.pop()
                path.pop()
                continue
            p = preds.pop()
            if state.get(id(p)) == 1:
                start = next(k for k, n in enumerate(path) if n is p)
                return list(reversed(path[start:]))
            if id(p) not in state:
                state[id(p)] = 1
                stack.append((p, _preds(p, produced)))
                path.append(p)
    return []


def _preds(node: Node, produced: dict[str, Node]) -> list[Node]:
    return [produced[i] for i in node.present_inputs() if i in produced]
