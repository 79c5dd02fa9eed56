"""Convert a parsed ``ModelProto`` into the IR ``Graph``, refusing what the IR cannot hold.

Invariants:
- Nothing from the proto is trusted: names must be valid UTF-8 (protobuf hands back ``bytes``
  for invalid ones), types must be tensor types of a supported element type, dims must be
  ``>= 0`` and their product fit int64, attributes must be of a kind the IR holds.
- A graph attribute (the body of If, Loop, Scan) becomes a ``Graph`` converted the same way
  (nested at most ``MAX_NESTING`` deep); the values of the enclosing graph it reads
  (``ir.graph.captures``) are appended to its node's inputs. Lists of graphs are refused.
- Domains: ``""`` and ``"ai.onnx"`` are the same domain (stored as ``""``); ``"ge"`` is ours;
  ``ai.onnx.preview`` (FlexAttention) and ``ai.onnx.preview.training`` (the optimizers) keep
  their names;
  every other domain is refused where a node uses it. A node's domain must be imported.
- Model-local functions (``FunctionProto``) are read as composite ops (``read_functions``)
  and carried by the graph (``Graph.functions``); a node calling one keeps the function's
  domain.
- Names are kept. An unnamed node gets ``<op>_<index>`` (made unique); two nodes with the
  same name are an error (the ONNX IR makes node names unique within a graph).
- An omitted optional output (``""``) is dropped at the end of a node's outputs and gets a
  fresh tensor name (``<node>.omitted<k>``, unused elsewhere) before a present one, so IR
  output names are never empty.
- Symbolic dims (``dim_param``) are kept as ``str``; a dim with neither value nor name gets a
  fresh name ``<tensor>_d<axis>`` that no other dim in the model uses.
- From IR version 4 on, a graph input that also has an initializer is an input with a default
  (the initializer). Before IR 4 every initializer had to be listed as an input too, and such
  inputs are constants: they are dropped from the inputs, as onnxruntime does.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import GeError, ModelError
from ..ir import dtypes
from ..ir.attrs import Attrs
from ..ir.composite import AttrRef
from ..ir.graph import UNTYPED, Dim, Graph, Node, Value, captures
from ..ir.registry import MAX_OPSET, default_registry
from . import proto
from .proto import (
    AttributeProto,
    Dimension,
    GraphProto,
    ModelProto,
    NodeProto,
    OperatorSetIdProto,
    TensorProto,
    ValueInfoProto,
)
from .read_functions import read_functions
from .tensors import ExternalReader, check_dims, tensor_to_array

log = logging.getLogger(__name__)

ONNX_DOMAIN = ""
DOMAIN_ALIASES = {"": "", "ai.onnx": "", "ge": "ge", "ai.onnx.preview": "ai.onnx.preview",
                  "ai.onnx.preview.training": "ai.onnx.preview.training"}
MAX_IR_VERSION = 14  # onnx 1.23
MAX_NESTING = 16  # subgraphs inside subgraphs


@dataclass(slots=True)
class _Reader:
    """What converting one model needs: the budget, external data access, fresh names."""

    max_bytes: int
    external: ExternalReader | None
    used_dims: set[str] = field(default_factory=set)
    used_names: set[str] = field(default_factory=set)  # tensor names, for fresh ones
    opset: dict[str, int] = field(default_factory=dict)
    functions: set[tuple[str, str]] = field(default_factory=set)  # the model's own ops
    depth: int = 0


def text(value: object, what: str, **place: Any) -> str:
    """A proto string field as ``str``; invalid UTF-8 arrives as ``bytes`` and is refused."""
    if isinstance(value, str):
        return value
    shown = bytes(value).decode("utf-8", errors="replace") if isinstance(value, bytes) else value
    raise ModelError(f"{what} {shown!r} is not valid UTF-8", **place)


def domain_of(raw: object, **place: Any) -> str:
    name = text(raw, "domain", **place)
    if name not in DOMAIN_ALIASES:
        known = ", ".join(sorted({d or "ai.onnx" for d in DOMAIN_ALIASES.values()}))
        raise ModelError(f"unsupported domain '{name}' (supported: {known})", **place)
    return DOMAIN_ALIASES[name]


def model_to_graph(model: ModelProto, *, max_bytes: int,
                   external: ExternalReader | None) -> Graph:
    """The IR graph of ``model``, not yet verified or shape-inferred."""
    _check_header(model)
    opset = _opsets(model.opset_import)
    reader = _Reader(max_bytes, external, _dim_params(model.graph),
                     {t for n in model.graph.node for t in (*n.input, *n.output)})
    reader.opset = opset
    g = model.graph
    if len(g.sparse_initializer):
        name = text(g.sparse_initializer[0].values.name, "tensor name")
        raise ModelError("sparse initializers are not supported", tensor=name)
    initializers = _initializers(g.initializer, reader)
    inputs = [_value(vi, reader) for vi in g.input]
    if model.ir_version < 4:
        inputs = [v for v in inputs if v.name not in initializers]
    functions = read_functions(
        model, opset, lambda proto, name, refs: _node(proto, name, opset, set(), reader, refs),
        lambda a: _attr(a, {}, reader)[1], text, default_registry())
    reader.functions = {(f.domain, f.name) for f in functions}
    nodes = _nodes(g.node, opset, reader.functions, reader)
    return Graph(
        functions=functions,
        nodes=tuple(nodes),
        inputs=tuple(inputs),
        outputs=tuple(_value(vi, reader) for vi in g.output),
        initializers=initializers,
        value_info={v.name: v for v in (_value(vi, reader) for vi in g.value_info)},
        name=text(g.name, "graph name") or "graph",
        opset=opset,
        metadata=_metadata(model),
    )


def _check_header(model: ModelProto) -> None:
    if not model.HasField("graph"):
        raise ModelError("not an ONNX model: it holds no graph (corrupt, or another protobuf)")
    if model.ir_version <= 0:
        raise ModelError("the model has no ir_version (truncated or not an ONNX model?)")
    if model.ir_version > MAX_IR_VERSION:
        raise ModelError(f"ir_version {model.ir_version} is newer than the newest supported "
                         f"({MAX_IR_VERSION})")
    if not len(model.graph.node):
        raise ModelError("the graph is empty (no nodes)")
    if not len(model.graph.output):
        raise ModelError("the graph has no outputs")
    if len(model.training_info):
        log.warning("ignoring the model's training_info (inference only)")


def _opsets(imports: Iterable[OperatorSetIdProto]) -> dict[str, int]:
    opset: dict[str, int] = {}
    for entry in imports:
        name = text(entry.domain, "opset domain")
        domain = DOMAIN_ALIASES.get(name)
        if domain is None:
            log.info("model imports domain '%s'; only nodes that use it are refused", name)
            continue
        if domain in opset:
            raise ModelError(f"opset_import lists domain '{name or 'ai.onnx'}' twice")
        limit = MAX_OPSET[domain]
        if entry.version > limit or entry.version < 1:
            raise ModelError(f"the model imports opset {entry.version} of domain "
                             f"'{name or 'ai.onnx'}'; gerules supports 1 to {limit}")
        opset[domain] = int(entry.version)
    if not opset:
        raise ModelError("the model imports no ai.onnx opset (truncated file?)")
    return opset


def _dim_params(g: GraphProto) -> set[str]:
    found: set[str] = set()
    for vi in (*g.input, *g.output, *g.value_info):
        if vi.type.HasField("tensor_type"):
            for d in vi.type.tensor_type.shape.dim:
                if d.HasField("dim_param") and isinstance(d.dim_param, str):
                    found.add(d.dim_param)
    return found


def _initializers(protos: Sequence[TensorProto], reader: _Reader) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    for t in protos:
        name = text(t.name, "initializer name")
        if not name:
            raise ModelError("an initializer has no name")
        if name in out:
            raise ModelError("two initializers have this name", tensor=name)
        out[name] = tensor_to_array(t, name=name, max_bytes=reader.max_bytes,
                                    external=reader.external)
    return out


def _value(vi: ValueInfoProto, reader: _Reader) -> Value:
    name = text(vi.name, "tensor name")
    if not name:
        raise ModelError("a graph input, output or value_info entry has no name")
    if not vi.HasField("type"):
        if reader.depth:  # a subgraph's signature may leave types to inference
            return Value.of(name, UNTYPED, None)
        raise ModelError("has no type", tensor=name)
    kind = vi.type.WhichOneof("value")
    if kind != "tensor_type":
        raise ModelError(f"has type {kind or 'undefined'}; only tensors are supported",
                         tensor=name)
    tt = vi.type.tensor_type
    try:
        dtype = dtypes.from_onnx(tt.elem_type)
    except GeError as e:
        raise e.with_place(tensor=name) from None
    if not tt.HasField("shape"):
        return Value.of(name, dtype, None)
    shape = [_dim(d, name, axis, reader) for axis, d in enumerate(tt.shape.dim)]
    check_dims([d for d in shape if isinstance(d, int)], dtype, tensor=name)
    return Value.of(name, dtype, shape)


def _dim(d: Dimension, tensor: str, axis: int, reader: _Reader) -> Dim:
    if d.HasField("dim_value"):
        if d.dim_value < 0:
            raise ModelError(f"negative dim {d.dim_value} at axis {axis}", tensor=tensor)
        return int(d.dim_value)
    if d.HasField("dim_param") and d.dim_param:
        return text(d.dim_param, "dim name", tensor=tensor)
    base = fresh = f"{tensor}_d{axis}"
    k = 1
    while fresh in reader.used_dims:
        k += 1
        fresh = f"{base}_{k}"
    reader.used_dims.add(fresh)
    return fresh


def _nodes(protos: Sequence[NodeProto], opset: dict[str, int],
           functions: set[tuple[str, str]], reader: _Reader) -> list[Node]:
    explicit = [text(n.name, "node name") for n in protos]
    taken = {name for name in explicit if name}
    first: dict[str, int] = {}
    nodes = []
    for index, (node, name) in enumerate(zip(protos, explicit, strict=True)):
        if name and first.setdefault(name, index) != index:
            raise ModelError(f"two nodes have this name (node #{first[name]} and #{index})",
                             node=name)
        if not name:
            name = _generated_name(text(node.op_type, "op type"), index, taken)
        nodes.append(_node(node, name, opset, functions, reader))
    return nodes


def _generated_name(op: str, index: int, taken: set[str]) -> str:
    name = f"{op}_{index}"
    k = 1
    while name in taken:
        k += 1
        name = f"{op}_{index}_{k}"
    taken.add(name)
    return name


def _node(proto: NodeProto, name: str, opset: dict[str, int],
          functions: set[tuple[str, str]], reader: _Reader, refs: bool = False) -> Node:
    """One node; ``functions`` are the model's own (domain, op) pairs; ``refs`` allows
    references to the attributes of the function the node is in."""
    op = text(proto.op_type, "op type", node=name)
    raw_domain = text(proto.domain, "domain", node=name, op=op)
    place = {"node": name, "op": f"{raw_domain}.{op}" if raw_domain else op}
    if (raw_domain, op) in functions or refs and raw_domain not in DOMAIN_ALIASES:
        domain = raw_domain  # a model-local function (its body is checked where it is read)
    else:
        domain = domain_of(raw_domain, **place)
        if domain not in opset and not refs:
            raise ModelError(f"uses domain '{raw_domain or 'ai.onnx'}', which the model does "
                             "not import in opset_import", **place)
    inputs = tuple(text(i, "input name", **place) for i in proto.input)
    outputs = _outputs([text(o, "output name", **place) for o in proto.output], name, reader)
    attrs = dict(_attr(a, place, reader, refs) for a in proto.attribute)
    if len(attrs) != len(proto.attribute):
        raise ModelError("an attribute appears twice", **place)
    node = Node(op, inputs, outputs, Attrs(attrs), name=name, domain=domain)
    extra = captures(node.attrs)
    return node.with_(inputs=inputs + extra) if extra else node


def _outputs(names: list[str], node: str, reader: _Reader) -> tuple[str, ...]:
    """Trailing omitted outputs dropped, inner ones given fresh names."""
    while names and not names[-1]:
        names.pop()
    for k, out in enumerate(names):
        if not out:
            fresh, n = f"{node}.omitted{k}", 1
            while fresh in reader.used_names:
                n += 1
                fresh = f"{node}.omitted{k}_{n}"
            reader.used_names.add(fresh)
            names[k] = fresh
    return tuple(names)


def _attr(a: AttributeProto, place: dict[str, str], reader: _Reader, refs: bool = False
          ) -> tuple[str, object]:
    name = text(a.name, "attribute name", **place)
    if a.ref_attr_name and refs:
        return name, AttrRef(text(a.ref_attr_name, "attribute reference", **place))
    if a.ref_attr_name:
        raise ModelError(f"attribute '{name}' refers to a function attribute", **place)
    try:
        return name, _attr_value(a, name, reader)
    except GeError as e:
        raise e.with_place(**place) from None


def _attr_value(a: AttributeProto, name: str, reader: _Reader) -> object:
    if a.type == proto.TENSOR:
        tensor = text(a.t.name, "tensor name") or name
        return tensor_to_array(a.t, name=tensor, max_bytes=reader.max_bytes,
                               external=reader.external)
    convert = _ATTR_READERS.get(a.type)
    if convert is not None:
        return convert(a)
    if a.type == proto.GRAPH:
        return _subgraph(a.g, reader)
    if a.type == proto.GRAPHS:
        raise ModelError(f"attribute '{name}' holds a list of subgraphs (not supported)")
    kind = proto.ATTRIBUTE_TYPES.get(a.type, a.type)
    raise ModelError(f"attribute '{name}' has unsupported type {kind}")


def _subgraph(g: GraphProto, reader: _Reader) -> Graph:
    """A subgraph (the body of If, Loop, Scan) as a ``Graph`` with the model's opsets."""
    if reader.depth >= MAX_NESTING:
        raise ModelError(f"subgraphs nest more than {MAX_NESTING} deep")
    reader.depth += 1
    try:
        inits = _initializers(g.initializer, reader)
        return Graph(
            nodes=tuple(_nodes(g.node, reader.opset, reader.functions, reader)),
            inputs=tuple(_value(vi, reader) for vi in g.input),
            outputs=tuple(_value(vi, reader) for vi in g.output),
            initializers=inits,
            value_info={v.name: v for v in (_value(vi, reader) for vi in g.value_info)},
            name=text(g.name, "graph name") or "body", opset=reader.opset)
    finally:
        reader.depth -= 1


def _strings(values: Iterable[bytes]) -> tuple[str, ...]:
    try:
        return tuple(bytes(v).decode("utf-8") for v in values)
    except UnicodeDecodeError:
        raise ModelError("a string attribute is not valid UTF-8") from None


_ATTR_READERS: dict[int, Callable[[AttributeProto], object]] = {
    proto.FLOAT: lambda a: float(a.f),
    proto.INT: lambda a: int(a.i),
    proto.STRING: lambda a: _strings([a.s])[0],
    proto.FLOATS: lambda a: tuple(float(v) for v in a.floats),
    proto.INTS: lambda a: tuple(int(v) for v in a.ints),
    proto.STRINGS: lambda a: _strings(a.strings),
}


def _metadata(model: ModelProto) -> dict[str, str]:
    meta = {f"onnx.{k}": text(getattr(model, k), k) for k in
            ("producer_name", "producer_version", "domain") if getattr(model, k)}
    for entry in model.metadata_props:
        meta[text(entry.key, "metadata key")] = text(entry.value, "metadata value")
    return meta
