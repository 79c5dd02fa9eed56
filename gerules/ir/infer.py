"""Whole-graph shape and dtype inference with compile-time constant propagation.

Invariants:
- ``infer_graph`` returns a graph whose ``value_info`` types every node output; declared
  types of graph outputs are refined, never contradicted (a contradiction raises
  ``ShapeError`` naming the node and tensor).
- Unknown dims produced by an op (``"?"``) are renamed to fresh symbols ``unk<N>`` so two
  unknown dims are never mistaken for equal.
- Constants propagate from initializers and small computable nodes (at most
  ``CONST_ELEMENTS`` elements per tensor) so shape subgraphs (Shape -> Gather -> Concat ->
  Reshape) give static shapes. Nothing here changes the graph's nodes.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping

import numpy as np

from ..errors import GeError, ShapeError
from .formats import ND
from .graph import UNTYPED, Graph, Node, Shape, TensorType, Value
from .registry import NONDETERMINISTIC, OpSchema, Registry, default_registry
from .symbolic import SymInts, of_array, sym_eval, sym_output_type
from .weights import Weight

CONST_ELEMENTS = 4096


class _Env:
    """Types and known constant values of the tensors seen so far."""

    def __init__(self, graph: Graph) -> None:
        self.types: dict[str, TensorType] = {v.name: v.type for v in graph.inputs}
        self.consts: dict[str, np.ndarray] = {}
        self.syms: dict[str, SymInts] = {}
        for name, arr in graph.initializers.items():
            if name not in self.types:  # a graph input shadows its initializer (a default)
                self.types[name] = initializer_type(graph, name, arr)
                if isinstance(arr, np.ndarray):  # a deferred weight is never computed here
                    self.consts[name] = arr
        self._fresh = itertools.count()

    def fresh(self, shape: Shape | None) -> Shape | None:
        if shape is None:
            return None
        return tuple(f"unk{next(self._fresh)}" if d == "?" else d for d in shape)


def initializer_type(graph: Graph, name: str, arr: Weight) -> TensorType:
    """An initializer's type: its array's, or the formatted type ``value_info`` records for a
    weight held in a blocked format (its array is then the physical one)."""
    declared = graph.value_info.get(name)
    if declared is not None and declared.type.format != ND:
        return declared.type
    return TensorType(arr.dtype.name, tuple(int(d) for d in arr.shape))


def schema_for(node: Node, graph: Graph, registry: Registry) -> OpSchema:
    """The schema of ``node``: a composite op the graph carries, else the registry's at the
    graph's opset."""
    function = graph.function(node.domain, node.op) if graph.functions else None
    if function is not None:
        return function.schema(registry)
    try:
        return registry.get(node.op, node.domain, graph.opset.get(node.domain))
    except GeError as e:
        raise e.with_place(node=node.label, op=node.qualified_op)


def infer_node(
    node: Node,
    schema: OpSchema,
    types: list[TensorType | None],
    consts: list[np.ndarray | None],
) -> tuple[list[TensorType], list[np.ndarray] | None]:
    """Output types of one node, and its outputs' values when they are small and known."""
    try:
        call = schema.call(node.attrs, len(node.outputs), node.label, types)
        out = list(schema.infer(types, consts, call))
    except GeError as e:
        raise e.with_place(node=node.label, op=node.qualified_op)
    except (ValueError, TypeError, IndexError, KeyError, AssertionError) as e:
        raise ShapeError(f"cannot infer output shape: {e}").with_place(
            node=node.label, op=node.qualified_op
        ) from None
    return out, _fold(schema, call, types, consts, out)


def _fold(
    schema: OpSchema,
    call: object,
    types: list[TensorType | None],
    consts: list[np.ndarray | None],
    out: list[TensorType],
) -> list[np.ndarray] | None:
    if schema.fold_types is not None:
        folded = schema.fold_types(types, call)  # type: ignore[arg-type]
        if folded is not None:
            return list(folded)
    if schema.has(NONDETERMINISTIC):
        return None
    present = [c for t, c in zip(types, consts, strict=False) if t is not None]
    if any(c is None for c in present):
        return None
    if any((t.numel() or CONST_ELEMENTS + 1) > CONST_ELEMENTS for t in out):
        return None
    try:
        return [np.asarray(v) for v in schema.kernel(consts, call)]  # type: ignore[arg-type]
    except (GeError, ValueError, TypeError, IndexError, ArithmeticError):
        return None  # the runtime reports it with full context if the node ever runs


def infer_graph(graph: Graph, registry: Registry | None = None) -> Graph:
    """A copy of ``graph`` whose ``value_info`` holds the type of every node output."""
    registry = registry or default_registry()
    env = _Env(graph)
    info: dict[str, Value] = graph.held_weights()
    for node in graph.nodes:
        schema = schema_for(node, graph, registry)
        types = [env.types.get(i) if i else None for i in node.inputs]
        consts = [env.consts.get(i) if i else None for i in node.inputs]
        out_types, values = infer_node(node, schema, types, consts)
        values = _symbolic(node, schema, env, types, out_types, values)
        for k, name in enumerate(node.outputs):
            if k >= len(out_types) or not name:
                continue
            t = TensorType(out_types[k].dtype, env.fresh(out_types[k].shape),
                           out_types[k].format)
            declared = graph.value_info.get(name)
            t = refine(t, declared.type if declared else None, node, name)
            env.types[name] = t
            info[name] = Value(name, t)
            if values is not None and k < len(values):
                env.consts[name] = values[k]
    producers = graph.producers()
    outputs = tuple(_refine_output(v, env.types, producers) for v in graph.outputs)
    return graph.replace(value_info=info, outputs=outputs)


def _symbolic(node: Node, schema: OpSchema, env: _Env, types: list[TensorType | None],
              out_types: list[TensorType], values: list[np.ndarray] | None
              ) -> list[np.ndarray] | None:
    """Shape arithmetic on dynamic dims: fill ``out_types`` in place from symbolic shape
    inputs, record the output's symbolic value, and return it as a constant when it turned
    out concrete (so folding goes on downstream)."""
    if node.domain or not out_types or not node.outputs[0]:
        return values
    syms = [None if not i else env.syms.get(i) or of_array(env.consts.get(i))
            for i in node.inputs]
    attrs = schema.resolve(node.attrs)
    out_types[0] = sym_output_type(node.op, attrs, out_types[0], types, syms)
    sym = of_array(values[0]) if values else sym_eval(node.op, attrs, syms, types)
    if sym is None:
        return values
    env.syms[node.outputs[0]] = sym
    if values is None and sym.concrete and sym.dtype == out_types[0].dtype:
        return [sym.array()]
    return values


def _refine_output(v: Value, types: Mapping[str, TensorType], producers: Mapping[str, Node]
                   ) -> Value:
    inferred = types.get(v.name)
    if inferred is None:
        return v
    producer = producers.get(v.name)
    node = producer or Node("Identity", (), (v.name,))
    return Value(v.name, refine(inferred, v.type, node, v.name))


def refine(inferred: TensorType, declared: TensorType | None, node: Node, name: str) -> TensorType:
    """Combine an inferred and a declared type; keep the more precise dim of each. The
    format is the inferred one (node outputs get theirs from their ops; a declaration, read
    from a file that cannot say formats, is about dims)."""
    if declared is None or declared.dtype == UNTYPED:
        return inferred
    if declared.dtype != inferred.dtype:
        raise ShapeError(
            f"inferred dtype {inferred.dtype} but the model declares {declared.dtype}"
        ).with_place(node=node.label, op=node.qualified_op, tensor=name)
    if inferred.shape is None:
        return declared
    if declared.shape is None:
        return inferred
    if len(declared.shape) != len(inferred.shape):
        raise _mismatch(inferred, declared, node, name)
    dims = []
    for a, b in zip(inferred.shape, declared.shape, strict=True):
        if isinstance(a, int) and isinstance(b, int) and a != b:
            raise _mismatch(inferred, declared, node, name)
        dims.append(a if isinstance(a, int) else b)
    return TensorType(inferred.dtype, tuple(dims), inferred.format)


def _mismatch(inferred: TensorType, declared: TensorType, node: Node, name: str) -> ShapeError:
    err = ShapeError(f"inferred shape {inferred} but the model declares {declared}")
    err.with_place(node=node.label, op=node.qualified_op, tensor=name)
    return err
