"""Export a ``Graph`` back to ONNX: ``to_model_proto`` and ``save_model``.

Invariants:
- Every name (graph, nodes, inputs, outputs, initializers, value_info) is written as it is in
  the graph, so ``load -> save -> load`` keeps names and node order.
- Attribute kinds come from the op's schema (an int default of a float attribute is written
  as a float); attributes of ops the registry does not know are typed by their Python values.
- ``opset_import`` holds the graph's opsets plus ``ge`` whenever a ``ge`` op is present;
  ``ir_version`` is the smallest one those opsets need.
- Composite ops the graph carries are written as model-local functions (``functions``), so
  onnxruntime runs them.
- ONNX types cannot say data formats (``ir.formats``): a weight held in a blocked format is
  written as its plain values with a ``ge.TransData`` node to its format, an input held in
  one (NHWC) as its physical dims read through a Transpose and a TransData back
  (``plain_boundaries``), so the file reads back as a graph that computes the same.
- A graph input with an initializer is written as both (an input with a default).
- A subgraph attribute is written as a GraphProto that reads the enclosing values by the names
  they have now: the node's captured inputs (``ir.graph.captures``) are dropped from its
  input list and the subgraph's reads of them renamed to those inputs' names. An untyped
  subgraph input or output is written without a type.
- ``save_model`` writes through ``gerules.fileio.atomic_write``: the target is complete or
  untouched. Above ``EXTERNAL_THRESHOLD`` bytes of weights (protobuf cannot hold 2 GiB) or when
  asked, tensors of at least 1 KiB go to a sidecar file ``<model file name>.data`` beside the
  model, 64-byte aligned, written before the model so the model never points at missing data.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import BinaryIO

import numpy as np
import onnx
from onnx import helper

from ..errors import GeError
from ..fileio import atomic_write, check_output_path
from ..ir import dtypes, formats
from ..ir.attrs import Attrs, AttrValue
from ..ir.graph import UNTYPED, Graph, Node, TensorType, Value, captures
from ..ir.infer import schema_for
from ..ir.registry import MAX_OPSET, AttrKind, Registry, default_registry
from ..ir.weights import materialize
from .functions import function_protos
from .read_functions import KIND_TYPES
from .tensors import array_to_tensor

EXTERNAL_THRESHOLD = 1800 << 20  # weights above this go to external data (protobuf: < 2 GiB)
EXTERNAL_MIN_TENSOR = 1024
ALIGNMENT = 64


def to_model_proto(graph: Graph, registry: Registry | None = None) -> onnx.ModelProto:
    """The ONNX model of ``graph`` (weights inline as ``raw_data``)."""
    registry = registry or default_registry()
    graph = plain_boundaries(graph)
    opset = _opset(graph)
    g = _graph_proto(graph, registry, opset)
    imports = [helper.make_opsetid(d, v) for d, v in sorted(opset.items())]
    functions = function_protos(graph.functions, registry, opset.get("", 17), _attribute)
    model = helper.make_model(g, opset_imports=imports, producer_name="gerules",
                              producer_version=_version(), functions=functions)
    model.ir_version = helper.find_min_ir_version_for(imports, ignore_unknown=True)
    if graph.metadata.get("onnx.domain"):
        model.domain = graph.metadata["onnx.domain"]
    _metadata(model, graph.metadata)
    return model


def plain_boundaries(graph: Graph) -> Graph:
    """``graph`` with its formatted weights and inputs stated in plain types (see the module
    docstring); the same graph when it holds none."""
    held = graph.held_weights()
    formatted = [v for v in graph.inputs if v.type.format != formats.ND]
    if not held and not formatted:
        return graph
    nodes: list[Node] = []
    inits = dict(graph.initializers)
    for name, v in held.items():
        t = v.type
        plain = f"{name}/plain"
        shape = tuple(int(d) for d in t.shape or ())
        held_array = materialize(inits.pop(name))  # a deferred weight computed now
        inits[plain] = np.ascontiguousarray(formats.from_format(held_array, t.format, shape))
        nodes.append(_transfer(plain, name, formats.name(formats.ND, t.rank), t.format_name))
    renamed: dict[str, str] = {}
    inputs = []
    for v in graph.inputs:
        if v.type.format != formats.NHWC:
            inputs.append(v)
            continue
        renamed[v.name] = f"{v.name}/held"
        inputs.append(Value(v.name, TensorType(v.dtype, v.type.physical_shape)))
        nodes += [Node("Transpose", (v.name,), (f"{v.name}/nchw",), Attrs({"perm": (0, 3, 1, 2)}),
                       name=f"Transpose/{v.name}"),
                  _transfer(f"{v.name}/nchw", renamed[v.name], "NCHW", formats.NHWC)]
    body = tuple(n.with_(inputs=tuple(renamed.get(i, i) for i in n.inputs))
                 for n in graph.nodes)
    return graph.replace(nodes=(*nodes, *body), inputs=tuple(inputs), initializers=inits,
                         value_info={k: v for k, v in graph.value_info.items() if k not in held},
                         opset={**graph.opset, "ge": graph.opset.get("ge", 1)})


def _transfer(source: str, target: str, src: str, dst: str) -> Node:
    return Node("TransData", (source,), (target,), Attrs({"src_format": src, "dst_format": dst}),
                name=f"TransData/{target}", domain="ge")


def _graph_proto(graph: Graph, registry: Registry, opset: Mapping[str, int],
                 renamed: Mapping[str, str] | None = None) -> onnx.GraphProto:
    """``graph`` as a GraphProto; ``renamed`` maps enclosing names a subgraph reads."""
    return helper.make_graph(
        nodes=[_node(n, graph, registry, opset, renamed or {}) for n in graph.nodes],
        name=graph.name,
        inputs=[_value_info(v) for v in graph.inputs],
        outputs=[_value_info(v) for v in graph.outputs],
        initializer=[array_to_tensor(materialize(a), name)
                     for name, a in graph.initializers.items()],
        value_info=[_value_info(v) for v in _intermediates(graph)],
    )


def _version() -> str:
    try:
        return importlib.metadata.version("gerules")
    except importlib.metadata.PackageNotFoundError:
        return "0"


def _opset(graph: Graph) -> dict[str, int]:
    opset = dict(graph.opset)
    for node in (*graph.nodes, *(n for f in graph.functions for n in f.nodes)):
        opset.setdefault(node.domain, MAX_OPSET.get(node.domain, 1))
    for f in graph.functions:
        opset.setdefault(f.domain, 1)
    return opset


def _metadata(model: onnx.ModelProto, metadata: Mapping[str, str]) -> None:
    props = {k: v for k, v in metadata.items() if not k.startswith("onnx.")}
    if props:
        helper.set_model_props(model, props)


def _intermediates(graph: Graph) -> list[Value]:
    skip = set(graph.input_names) | set(graph.output_names) | set(graph.initializers)
    return [v for name, v in graph.value_info.items() if name not in skip]


def _value_info(v: Value) -> onnx.ValueInfoProto:
    if v.dtype == UNTYPED:
        return helper.make_empty_tensor_value_info(v.name)
    shape = None if v.shape is None else list(v.shape)
    return helper.make_tensor_value_info(v.name, dtypes.to_onnx(v.dtype), shape)


def _node(node: Node, graph: Graph, registry: Registry, opset: Mapping[str, int],
          renamed: Mapping[str, str]) -> onnx.NodeProto:
    kinds = _attr_kinds(node, graph, registry)
    inputs = [renamed.get(i, i) for i in node.inputs]
    names = captures(node.attrs)
    bound = dict(zip(names, inputs[len(inputs) - len(names):], strict=True)) if names else {}
    proto = helper.make_node(node.op, inputs[:len(inputs) - len(names)], list(node.outputs),
                             name=node.name, domain=node.domain or None)
    for k, v in node.attrs.items():
        if isinstance(v, Graph):
            proto.attribute.append(helper.make_attribute(k, _graph_proto(v, registry, opset,
                                                                         bound)))
        else:
            proto.attribute.append(_attribute(k, v, kinds.get(k)))
    return proto


def _attr_kinds(node: Node, graph: Graph, registry: Registry) -> dict[str, str]:
    try:
        schema = schema_for(node, graph, registry)
    except GeError:
        return {}
    return {name: spec.kind for name, spec in schema.attrs.items()}


def _attribute(name: str, value: AttrValue, kind: str | None) -> onnx.AttributeProto:
    kind = kind or _guess_kind(value)
    if kind == "tensor":
        return helper.make_attribute(name, array_to_tensor(np.asarray(value), ""))
    if kind == "float":
        value = float(value)  # type: ignore[arg-type]
    elif kind == "floats":
        value = tuple(float(v) for v in value)  # type: ignore[union-attr]
    return helper.make_attribute(name, value, attr_type=KIND_TYPES[kind])


def _guess_kind(value: AttrValue) -> AttrKind:
    if isinstance(value, np.ndarray):
        return "tensor"
    if isinstance(value, str):
        return "string"
    if isinstance(value, float):
        return "float"
    if isinstance(value, int):
        return "int"
    if isinstance(value, Graph):
        return "graph"
    items = list(value)
    if any(isinstance(v, str) for v in items):
        return "strings"
    return "floats" if any(isinstance(v, float) for v in items) else "ints"


def save_model(graph: Graph, path: str | os.PathLike[str], *,
               external_data: bool | None = None, registry: Registry | None = None) -> Path:
    """Write ``graph`` as an ONNX file at ``path`` (atomically); returns the path.

    ``external_data``: ``True`` always writes a sidecar, ``False`` never does, ``None`` does
    when the weights exceed ``EXTERNAL_THRESHOLD``.
    """
    target = check_output_path(path)
    model = to_model_proto(graph, registry)
    if external_data is None:
        external_data = _weight_bytes(graph) > EXTERNAL_THRESHOLD
    if not external_data:
        return atomic_write(target, model.SerializeToString())
    sidecar = target.with_name(target.name + ".data")
    atomic_write(sidecar, lambda f: _externalize(model, sidecar.name, f))
    try:
        return atomic_write(target, model.SerializeToString())
    except BaseException:
        with contextlib.suppress(OSError):
            sidecar.unlink()
        raise


def _weight_bytes(graph: Graph) -> int:
    return sum(int(a.nbytes) for a in graph.initializers.values())


def _externalize(model: onnx.ModelProto, location: str, f: BinaryIO) -> None:
    """Move large tensors' bytes into ``f``, pointing each tensor at its slice."""
    offset = 0
    for t in _large_tensors(model):
        pad = -offset % ALIGNMENT
        f.write(b"\0" * pad)
        offset += pad
        data = t.raw_data
        f.write(data)
        t.ClearField("raw_data")
        t.data_location = onnx.TensorProto.EXTERNAL
        for key, value in (("location", location), ("offset", str(offset)),
                           ("length", str(len(data)))):
            t.external_data.add(key=key, value=value)
        offset += len(data)


def _large_tensors(model: onnx.ModelProto) -> Iterable[onnx.TensorProto]:
    for t in model.graph.initializer:
        if len(t.raw_data) >= EXTERNAL_MIN_TENSOR:
            yield t
