"""Composite ops (``ir.composite``) as ONNX model-local functions (``FunctionProto``), both ways.

Writing: each composite op the graph carries becomes a function of its domain, its body
written at the model's ai.onnx opset (onnxruntime inlines functions and reads their nodes
at the model's opset): an attribute the body gives that is an input at that opset
(ReduceMean's ``axes`` from 18) becomes a ``Constant`` input, a constant input that is an
attribute there becomes the attribute; references to the op's attributes are written with
``ref_attr_name``; defaults go in ``attribute_proto``.

Reading: a function's nodes become the body (``ref_attr_name`` -> ``AttrRef``), read at the
function's own ai.onnx opset; it may call functions listed before it.

Invariants:
- A function that cannot be expressed at the model's opset (``CastLike`` below 15) is a
  ``ModelError`` naming it; nothing is written.
- A function read from a file passes ``ir.composite.body_problem`` or is refused.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import onnx
from onnx import helper

from ..errors import ModelError
from ..ir.composite import AttrRef, CompositeOp, body_problem
from ..ir.graph import Node
from ..ir.registry import AttrSpec, OpSchema, Port, Registry
from .tensors import array_to_tensor

_A = onnx.AttributeProto
KIND_TYPES: dict[str, int] = {
    "int": _A.INT, "float": _A.FLOAT, "string": _A.STRING, "ints": _A.INTS,
    "floats": _A.FLOATS, "strings": _A.STRINGS, "tensor": _A.TENSOR,
}
_KINDS = {v: k for k, v in KIND_TYPES.items()}
AttrWriter = Callable[[str, Any, str | None], onnx.AttributeProto]


# ----------------------------------------------------------------------------- writing


def function_protos(functions: Sequence[CompositeOp], registry: Registry, opset: int,
                    attribute: AttrWriter) -> list[onnx.FunctionProto]:
    """The functions of ``functions`` (dependencies first) for a model at ai.onnx ``opset``;
    ``attribute(name, value, kind)`` writes one attribute as the model writer does."""
    return [_function(f, registry, opset, attribute) for f in functions]


def _function(f: CompositeOp, registry: Registry, opset: int, attribute: AttrWriter
              ) -> onnx.FunctionProto:
    find = f.lookup(registry)
    consts = {n.outputs[0]: n for n in f.nodes if n.op == "Constant" and not n.domain}
    nodes: list[onnx.NodeProto] = []
    for node in f.nodes:
        if node.domain:
            nodes.append(_proto(node, node.attrs, node.inputs, find(node), attribute))
            continue
        if node.op == "CastLike" and opset < 15:
            raise ModelError(f"{f.qualified} casts a constant with CastLike (opset 15); the "
                             f"model's opset is {opset}: export at opset 15 or newer")
        target = registry.get(node.op, "", opset)
        attrs, inputs = _at_opset(f, node, find(node), target, consts, nodes, attribute)
        nodes.append(_proto(node, attrs, inputs, target, attribute))
    imports = [helper.make_opsetid("", opset)] + [
        helper.make_opsetid(d, 1) for d in sorted({u.domain for u in f.uses})]
    plain = [a.name for a in f.attrs if a.default is None]
    defaults = [attribute(a.name, a.default, a.kind) for a in f.attrs if a.default is not None]
    return helper.make_function(f.domain, f.name, [p.name for p in f.inputs], list(f.outputs),
                                nodes, imports, plain, defaults, doc_string=f.doc or None)


def _at_opset(f: CompositeOp, node: Node, schema: OpSchema, target: OpSchema,
              consts: Mapping[str, Node], nodes: list[onnx.NodeProto], attribute: AttrWriter
              ) -> tuple[dict[str, Any], list[str]]:
    """``node``'s attributes and inputs in ``target``'s form (attributes <-> inputs)."""
    attrs = dict(node.attrs)
    inputs = list(node.inputs)
    ports = {p.name: k for k, p in enumerate(target.inputs)}
    for name in [k for k in attrs if k not in target.attrs and k in ports]:
        value, out = attrs.pop(name), f"{node.name}_{name}"
        kind = "value_ints" if isinstance(value, AttrRef) else "value"
        arg = value if isinstance(value, AttrRef) else np.asarray(value, np.int64)
        nodes.append(_proto(Node("Constant", (), (out,), name=out), {kind: arg}, [],
                            None, attribute))
        inputs += [""] * (ports[name] + 1 - len(inputs))
        inputs[ports[name]] = out
    for k, port in enumerate(schema.inputs[:len(inputs)]):
        const = consts.get(inputs[k])
        if port.name in target.attrs and port.name not in ports and const is not None:
            literal = const.attrs.get("value")
            if not isinstance(literal, np.ndarray):
                raise ModelError(f"{f.qualified}: the {port.name} of node '{node.name}' is "
                                 f"an attribute at this opset and must be a literal there")
            attrs[port.name] = tuple(literal.reshape(-1).tolist())
            inputs[k] = ""
    while inputs and not inputs[-1]:
        inputs.pop()
    return attrs, inputs


def _proto(node: Node, attrs: Mapping[str, Any], inputs: Sequence[str],
           schema: OpSchema | None, attribute: AttrWriter) -> onnx.NodeProto:
    proto = helper.make_node(node.op, list(inputs), list(node.outputs), name=node.name,
                             domain=node.domain or None)
    for key, value in attrs.items():
        spec = schema.attrs.get(key) if schema is not None else None
        if isinstance(value, AttrRef):
            kind = spec.kind if spec is not None else _REF_KINDS.get(key, "float")
            ref = _A(name=key, ref_attr_name=value.name, type=KIND_TYPES[kind])  # type: ignore[arg-type]
            proto.attribute.append(ref)
        elif isinstance(value, np.ndarray) and node.op == "Constant":
            proto.attribute.append(helper.make_attribute(key, array_to_tensor(value, "")))
        else:
            proto.attribute.append(attribute(key, value, spec.kind if spec else None))
    return proto


# The kind of each Constant attribute that holds an attribute of the function as a tensor.
_REF_KINDS = {"value_float": "float", "value_int": "int", "value_floats": "floats",
              "value_ints": "ints", "value_string": "string", "value_strings": "strings"}


# ----------------------------------------------------------------------------- reading


def _ref_kinds(nodes: Sequence[Node], registry: Registry, opset: int) -> dict[str, str]:
    """The kind of each referenced attribute, from the attribute that refers to it."""
    kinds: dict[str, str] = {}
    for node in nodes:
        for key, value in node.attrs.items():
            if not isinstance(value, AttrRef):
                continue
            if node.op == "Constant" and key in _REF_KINDS:
                kinds.setdefault(value.name, _REF_KINDS[key])
            elif registry.has(node.op, node.domain):
                spec = registry.get(node.op, node.domain, opset if not node.domain else None
                                    ).attrs.get(key)
                if spec is not None:
                    kinds.setdefault(value.name, spec.kind)
    return kinds


def read_functions(model: onnx.ModelProto, opset: Mapping[str, int],
                   node_of: Callable[[onnx.NodeProto, str, bool], Node],
                   attr_of: Callable[[onnx.AttributeProto], Any],
                   registry: Registry) -> tuple[CompositeOp, ...]:
    """The model's functions as composite ops (each may call the ones before it)."""
    out: list[CompositeOp] = []
    for f in model.functions:
        place = f"function '{f.domain + '.' if f.domain else ''}{f.name}'"
        if not f.domain:
            raise ModelError(f"{place}: a function needs a domain other than ai.onnx")
        imports = {i.domain: int(i.version) for i in f.opset_import}
        nodes = tuple(node_of(n, n.name or f"{f.name}_{k}", True)
                      for k, n in enumerate(f.node))
        kinds = _ref_kinds(nodes, registry, imports.get("", opset.get("", 17)))
        specs = [AttrSpec(name, kinds.get(name, "float"), required=True)  # type: ignore[arg-type]
                 for name in f.attribute]
        for a in f.attribute_proto:
            specs.append(AttrSpec(a.name, _KINDS.get(a.type, "float"),  # type: ignore[arg-type]
                                  attr_of(a)))
        known = {(u.domain, u.name): u for u in out}
        op = CompositeOp(f.domain, f.name, tuple(Port(i) for i in f.input), tuple(f.output),
                         tuple(specs), nodes, imports.get("", opset.get("", 17)),
                         tuple(known[n.domain, n.op] for n in nodes
                               if (n.domain, n.op) in known), f.doc_string)
        problem = body_problem(op, registry)
        if problem:
            raise ModelError(f"{place}: {problem}")
        out.append(op)
    return tuple(out)

