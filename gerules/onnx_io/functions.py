"""Composite ops (``ir.composite``) written as ONNX model-local functions (``FunctionProto``).

Writing: each composite op the graph carries becomes a function of its domain, its body
written at the model's ai.onnx opset (onnxruntime inlines functions and reads their nodes
at the model's opset): an attribute the body gives that is an input at that opset
(ReduceMean's ``axes`` from 18) becomes a ``Constant`` input, a constant input that is an
attribute there becomes the attribute; references to the op's attributes are written with
``ref_attr_name``; defaults go in ``attribute_proto``.

Reading them back is ``read_functions`` (which, like the whole reader, needs no ``onnx``).

Invariants:
- A function that cannot be expressed at the model's opset (``CastLike`` below 15) is a
  ``ModelError`` naming it; nothing is written.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import onnx
from onnx import helper

from ..errors import ModelError
from ..ir.composite import AttrRef, CompositeOp
from ..ir.graph import Node
from ..ir.registry import OpSchema, Registry
from .read_functions import KIND_TYPES, REF_KINDS
from .tensors import array_to_tensor

_A = onnx.AttributeProto
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
            kind = spec.kind if spec is not None else REF_KINDS.get(key, "float")
            ref = _A(name=key, ref_attr_name=value.name, type=KIND_TYPES[kind])  # type: ignore[arg-type]
            proto.attribute.append(ref)
        elif isinstance(value, np.ndarray) and node.op == "Constant":
            proto.attribute.append(helper.make_attribute(key, array_to_tensor(value, "")))
        else:
            proto.attribute.append(attribute(key, value, spec.kind if spec else None))
    return proto
