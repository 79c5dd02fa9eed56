"""ONNX model-local functions (``FunctionProto``) read back as composite ops (``ir.composite``).

A function's nodes become the body (``ref_attr_name`` -> ``AttrRef``), read at the
function's own ai.onnx opset; its attributes without a default are required, those in
``attribute_proto`` carry their default; each function may call the functions listed before
it. The writer side is ``functions`` (which needs the ``onnx`` package; this module does not).

Invariants:
- A function read from a file passes ``ir.composite.body_problem`` or is refused with a
  ``ModelError`` naming it; a function in the ai.onnx domain is refused.
- An input is optional when the body reads it only at optional ports.
- The kind of an attribute without a default is the kind of the attribute that refers to it
  (a ``Constant``'s ``value_ints`` is ``ints``; an op's attribute, its schema's kind).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..errors import ModelError
from ..ir.composite import AttrRef, CompositeOp, body_problem
from ..ir.graph import Node
from ..ir.registry import AttrSpec, Port, Registry
from . import proto

KIND_TYPES: dict[str, int] = {  # attribute kinds as AttributeProto types
    "int": proto.INT, "float": proto.FLOAT, "string": proto.STRING, "ints": proto.INTS,
    "floats": proto.FLOATS, "strings": proto.STRINGS, "tensor": proto.TENSOR,
}
KINDS = {v: k for k, v in KIND_TYPES.items()}
# The kind of each Constant attribute that holds an attribute of the function as a tensor.
REF_KINDS = {"value_float": "float", "value_int": "int", "value_floats": "floats",
             "value_ints": "ints", "value_string": "string", "value_strings": "strings"}


def read_functions(model: proto.ModelProto, opset: Mapping[str, int],
                   node_of: Callable[[proto.NodeProto, str, bool], Node],
                   attr_of: Callable[[proto.AttributeProto], Any],
                   text: Callable[[object, str], str], registry: Registry
                   ) -> tuple[CompositeOp, ...]:
    """The model's functions as composite ops; ``node_of(node, name, refs)`` and
    ``attr_of(attribute)`` read nodes and attribute values as the model reader does, and
    ``text(value, what)`` checks a string field."""
    out: list[CompositeOp] = []
    for f in model.functions:
        domain, name = text(f.domain, "function domain"), text(f.name, "function name")
        place = f"function '{domain + '.' if domain else ''}{name}'"
        if not domain:
            raise ModelError(f"{place}: a function needs a domain other than ai.onnx")
        imports = {text(i.domain, "domain"): int(i.version) for i in f.opset_import}
        base = imports.get("", opset.get("", 17))
        nodes = tuple(node_of(n, text(n.name, "node name") or f"{name}_{k}", True)
                      for k, n in enumerate(f.node))
        kinds = _ref_kinds(nodes, registry, base)
        specs = [AttrSpec(a, kinds.get(a, "float"), required=True)  # type: ignore[arg-type]
                 for a in (text(x, "attribute name") for x in f.attribute)]
        for a in f.attribute_proto:
            specs.append(AttrSpec(text(a.name, "attribute name"),
                                  KINDS.get(a.type, "float"), attr_of(a)))  # type: ignore[arg-type]
        known = {(u.domain, u.name): u for u in out}
        op = CompositeOp(domain, name, tuple(Port(text(i, "input name")) for i in f.input),
                         tuple(text(o, "output name") for o in f.output), tuple(specs), nodes,
                         base, tuple(known[n.domain, n.op] for n in nodes
                                     if (n.domain, n.op) in known),
                         text(f.doc_string, "doc string"))
        problem = body_problem(op, registry)
        if problem:
            raise ModelError(f"{place}: {problem}")
        out.append(dataclasses.replace(op, inputs=_optional(op, registry)))
    return tuple(out)


def _optional(op: CompositeOp, registry: Registry) -> tuple[Port, ...]:
    """The inputs, each optional when the body reads it only at optional ports (ONNX
    functions do not mark optional inputs: ``b?`` of ``op t.F(x, b?)`` comes back so)."""
    find = op.lookup(registry)
    uses: dict[str, list[bool]] = {p.name: [] for p in op.inputs}
    for node in op.nodes:
        ports = find(node).inputs
        for k, name in enumerate(node.inputs):
            if name in uses and ports:
                uses[name].append(ports[min(k, len(ports) - 1)].optional)
    return tuple(dataclasses.replace(p, optional=all(uses[p.name])) for p in op.inputs)


def _ref_kinds(nodes: Sequence[Node], registry: Registry, opset: int) -> dict[str, str]:
    """The kind of each referenced attribute, from the attribute that refers to it."""
    kinds: dict[str, str] = {}
    for node in nodes:
        for key, value in node.attrs.items():
            if not isinstance(value, AttrRef):
                continue
            if node.op == "Constant" and key in REF_KINDS:
                kinds.setdefault(value.name, REF_KINDS[key])
            elif registry.has(node.op, node.domain):
                spec = registry.get(node.op, node.domain, opset if not node.domain else None
                                    ).attrs.get(key)
                if spec is not None:
                    kinds.setdefault(value.name, spec.kind)
    return kinds
