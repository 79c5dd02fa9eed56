"""MODEL_DEF as JSON: encode a graph, its weights table and its variants.

Invariants:
- The output is plain JSON (no NaN/Infinity literals: non-finite floats are the strings
  ``"nan"``, ``"inf"``, ``"-inf"``); ``decode`` reads back an equal graph, equal attributes
  (attribute tensors included) and equal plans.
- Weights (initializers and attribute tensors) are stored once per content
  (``gerules.ir.weights.unique_arrays``: hashed only when fingerprints are equal); the
  table gives each blob's dtype, shape, offset in the
  WEIGHTS section (a multiple of 64) and byte size.
- Names are checked with ``check_name`` before anything is written, so the writer never
  produces a file its own reader refuses.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ModelError
from ..ir.attrs import AttrValue
from ..ir.composite import AttrRef, CompositeOp
from ..ir.dtypes import ONNX_CODES
from ..ir.formats import ND
from ..ir.graph import UNTYPED, Graph, Node, TensorType, Value
from ..ir.weights import Weight, unique_arrays
from .contents import OmContents, Variant
from .format import ALIGN, pad
from .names import check_name


@dataclass(frozen=True, slots=True)
class Blobs:
    """The unique weights in file order, with their offsets in the WEIGHTS section."""

    arrays: tuple[Weight, ...]
    offsets: tuple[int, ...]
    index: Mapping[int, int]  # id() of every weight array in the graph -> blob number
    size: int  # bytes of the WEIGHTS section, padding included


def collect_blobs(graph: Graph, groups: Sequence[Sequence[int]] = ()) -> Blobs:
    """Initializers and attribute tensors, each content stored once; with ``groups`` (a
    pipeline's stages as node indices) stage by stage, so the weights a stage uses first lie
    in one span of WEIGHTS."""
    arrays = _all_tensors(graph) if not groups else _by_stage(graph, groups)
    for arr in arrays:
        _check_dtype(arr.dtype.name)
    unique, index = unique_arrays(arrays)
    offsets, at = [], 0
    for arr in unique:
        offsets.append(at)
        at += arr.nbytes + pad(arr.nbytes, ALIGN)
    return Blobs(tuple(unique), tuple(offsets), index, at)


def _all_tensors(graph: Graph) -> list[Weight]:
    """Initializers and attribute tensors, of subgraphs too."""
    found: list[Weight] = list(graph.initializers.values())
    bodies = [n for f in graph.functions for n in f.nodes]
    for node in (*graph.nodes, *bodies):
        for v in node.attrs.values():
            if isinstance(v, np.ndarray):
                found.append(v)
            elif isinstance(v, Graph):
                found.extend(_all_tensors(v))
    return found


def _by_stage(graph: Graph, groups: Sequence[Sequence[int]]) -> list[Weight]:
    found: list[Weight] = []
    for group in groups:
        for k in group:
            node = graph.nodes[k]
            found += [graph.initializers[n] for n in node.present_inputs()
                      if n in graph.initializers]
            found += _all_tensors(Graph((node,), (), ()))
    return found + list(graph.initializers.values())


def _check_dtype(dtype: str) -> None:
    if dtype not in ONNX_CODES:
        raise ModelError(f"element type {dtype} cannot be stored in a .om file")


def encode(contents: OmContents, blobs: Blobs) -> dict[str, Any]:
    graph = contents.graph
    return {
        "producer": contents.producer,
        "graph": encode_graph(graph, blobs),
        "weights": [{"dtype": a.dtype.name, "shape": list(a.shape), "offset": off,
                     "nbytes": a.nbytes} for a, off in zip(blobs.arrays, blobs.offsets,
                                                            strict=True)],
        "variants": [encode_variant(v) for v in contents.variants],
        "soc_version": contents.soc_version,
        "compile_options": dict(contents.compile_options),
        "command_line": contents.command_line,
        **({"pipeline": encode_pipeline(contents, blobs)} if contents.pipeline else {}),
    }


def encode_pipeline(contents: OmContents, blobs: Blobs) -> dict[str, Any]:
    """The stages: nodes, the span of WEIGHTS their weights start in, their plans."""
    assert contents.pipeline is not None
    stages, seen = [], set()
    for st in contents.pipeline.stages:
        ids = sorted({blobs.index[id(a)] for a in _all_tensors(st.variant.graph)})
        own = [i for i in ids if i not in seen]
        seen.update(ids)
        lo = blobs.offsets[own[0]] if own else 0
        hi = blobs.offsets[own[-1]] + blobs.arrays[own[-1]].nbytes if own else 0
        stages.append({
            "name": check_name(st.name, "stage name"), "nodes": list(st.nodes),
            "weights": {"offset": lo, "nbytes": hi - lo, "blobs": ids,
                        "bytes": sum(blobs.arrays[i].nbytes for i in ids)},
            "variant": encode_variant(st.variant)})
    return {"stages": stages, "info": dict(contents.pipeline.info)}


def encode_graph(graph: Graph, blobs: Blobs) -> dict[str, Any]:
    return {
        "name": check_name(graph.name, "graph name", empty=True),
        "opset": dict(graph.opset),
        "metadata": dict(graph.metadata),
        "inputs": [encode_value(v) for v in graph.inputs],
        "outputs": [encode_value(v) for v in graph.outputs],
        "initializers": [{"name": check_name(name, "initializer"),
                          "weight": blobs.index[id(arr)], **_held(graph, name)}
                         for name, arr in graph.initializers.items()],
        "nodes": [encode_node(n, blobs) for n in graph.nodes],
        "functions": [encode_function(f, blobs) for f in graph.functions],
    }


def _held(graph: Graph, name: str) -> dict[str, Any]:
    """A weight held in a blocked format: its format and logical shape (its blob is the
    physical array)."""
    declared = graph.value_info.get(name)
    if declared is None or declared.type.format == ND:
        return {}
    return {"format": declared.type.format, "shape": list(declared.type.shape or ())}


def encode_function(f: CompositeOp, blobs: Blobs) -> dict[str, Any]:
    """A composite op with its body (its uses come earlier in the list)."""
    where = f"function '{f.qualified}'"
    return {
        "domain": check_name(f.domain, f"{where} domain"),
        "name": check_name(f.name, f"{where} name"),
        "opset": f.opset,
        "inputs": [{"name": check_name(p.name, f"{where} input"), "optional": p.optional}
                   for p in f.inputs],
        "outputs": [check_name(o, f"{where} output") for o in f.outputs],
        "attrs": [{"name": check_name(a.name, f"{where} attribute"), "kind": a.kind,
                   "default": None if a.default is None else
                   encode_attr(a.default, blobs, f"{where}.{a.name}")} for a in f.attrs],
        "nodes": [encode_node(n, blobs) for n in f.nodes],
        "doc": f.doc,
    }


def encode_value(v: Value) -> dict[str, Any]:
    return {"name": check_name(v.name, "tensor"), **encode_type(v.type)}


def encode_type(t: TensorType) -> dict[str, Any]:
    """dtype and logical shape; a tensor held in a blocked format also its ``format`` and
    ``physical`` shape (absent: ND, physical = logical)."""
    if t.dtype != UNTYPED:  # only subgraph signatures hold it; the reader checks that
        _check_dtype(t.dtype)
    out: dict[str, Any] = {"dtype": t.dtype, "shape": None if t.shape is None else list(t.shape)}
    if t.format != ND:
        out["format"] = t.format
        out["physical"] = list(t.physical_shape or ())
    return out


def uses_formats(contents: OmContents) -> bool:
    """True when a tensor of the model is held in a format other than ND."""
    graphs = [v.graph for v in contents.variants] + [contents.graph]
    return any(t.format != ND for g in graphs
               for t in (*(v.type for v in g.value_info.values()),
                         *(v.type for v in g.inputs), *(v.type for v in g.outputs)))


def encode_node(node: Node, blobs: Blobs) -> dict[str, Any]:
    where = f"node '{node.label}'"
    return {
        "name": check_name(node.name, f"{where} name", empty=True),
        "op": check_name(node.op, f"{where} op"),
        "domain": check_name(node.domain, f"{where} domain", empty=True),
        "inputs": [check_name(i, f"{where} input", empty=True) for i in node.inputs],
        "outputs": [check_name(o, f"{where} output") for o in node.outputs],
        "attrs": {check_name(k, f"{where} attribute"): encode_attr(v, blobs, f"{where}.{k}")
                  for k, v in node.attrs.items()},
    }


def encode_attr(value: AttrValue | AttrRef, blobs: Blobs, where: str) -> dict[str, Any]:
    if isinstance(value, AttrRef):  # a function body's reference to its own attribute
        return {"type": "ref", "value": check_name(value.name, where)}
    if isinstance(value, np.ndarray):
        return {"type": "tensor", "weight": blobs.index[id(value)]}
    if isinstance(value, Graph):
        return {"type": "graph", "value": encode_graph(value, blobs)}
    if isinstance(value, bool | int):
        return {"type": "int", "value": int(value)}
    if isinstance(value, float):
        return {"type": "float", "value": encode_float(value)}
    if isinstance(value, str):
        return {"type": "string", "value": value}
    if isinstance(value, tuple):
        return _encode_list(value, where)
    raise ModelError(f"{where}: attribute value of type {type(value).__name__} cannot be stored")


def _encode_list(items: Sequence[Any], where: str) -> dict[str, Any]:
    if all(isinstance(v, int) for v in items):
        return {"type": "ints", "value": [int(v) for v in items]}
    if all(isinstance(v, int | float) for v in items):
        return {"type": "floats", "value": [encode_float(float(v)) for v in items]}
    if all(isinstance(v, str) for v in items):
        return {"type": "strings", "value": list(items)}
    raise ModelError(f"{where}: a list attribute must hold only ints, floats or strings")


def encode_float(x: float) -> float | str:
    if math.isfinite(x):
        return x
    return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")


def encode_variant(v: Variant) -> dict[str, Any]:
    g, plan = v.graph, v.plan
    tensors = []
    for node in g.nodes:
        for name in node.outputs:
            t = g.type_of(name)
            if t is None:
                raise ModelError("variant has no type for node output", tensor=name)
            tensors.append({"name": name, **encode_type(t), "offset": plan.offsets[name]})
    return {
        "name": check_name(v.name, "variant name"),
        "dims": dict(v.dims),
        "inputs": [encode_value(x) for x in g.inputs],
        "outputs": [encode_value(x) for x in g.outputs],
        "tensors": tensors,
        "order": list(plan.order),
        "streams": list(plan.streams),
        "stream_count": plan.stream_count,
        "arena_bytes": plan.arena_bytes,
        "alignment": plan.alignment,
        "figures": plan.figures.to_json() if plan.figures else None,
        **({"ranges": {k: list(r) for k, r in v.ranges.items()}} if v.ranges else {}),
    }
