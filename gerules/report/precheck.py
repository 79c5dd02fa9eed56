"""atc ``--mode=3``: which ops of a model we support, node by node (``check_result.json``).

``precheck`` checks an ONNX model; the other frontends list their own layers or ops by their
original names and build the same document with ``summarize``.

Invariants:
- Every node of the main graph gets one entry: ``supported`` when the op registry has the op
  at the model's opset for its domain, else ``unsupported`` with the reason (unknown op with a
  "did you mean", an opset too old, an unknown domain).
- When every op is known the whole model is also loaded (verify + shape inference); a failure
  there is recorded under ``errors`` with the node it names, and that node is marked
  ``failed``. Nothing is compiled or written besides the JSON the caller writes.
- ``result`` is ``"success"`` only when every node is supported and the model loads.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import GeError
from ..ir.registry import Registry, default_registry
from ..onnx_io import load_model, parse
from ..onnx_io.proto import ModelProto, NodeProto
from ..onnx_io.reader import DOMAIN_ALIASES


def _opsets(model: ModelProto) -> dict[str, int]:
    out: dict[str, int] = {}
    for imp in model.opset_import:
        domain = DOMAIN_ALIASES.get(imp.domain, imp.domain)
        out[domain] = int(imp.version)
    return out


def _check_node(node: NodeProto, index: int, opsets: dict[str, int], registry: Registry
                ) -> dict[str, Any]:
    name = node.name or f"{node.op_type}_{index}"
    op = f"{node.domain}.{node.op_type}" if node.domain not in ("", "ai.onnx") else node.op_type
    entry: dict[str, Any] = {"name": name, "op": op, "result": "supported"}
    domain = DOMAIN_ALIASES.get(node.domain)
    if domain is None:
        entry.update(result="unsupported", reason=f"unknown domain '{node.domain}'")
        return entry
    try:
        registry.get(node.op_type, domain, opsets.get(domain))
    except GeError as e:
        entry.update(result="unsupported", reason=e.message)
    return entry


def precheck(data: bytes, label: str, registry: Registry | None = None) -> dict[str, Any]:
    """The ``check_result.json`` content for the ONNX model ``data`` (see the invariants)."""
    registry = registry or default_registry()
    model = parse(data)
    opsets = _opsets(model)
    nodes = [_check_node(n, k, opsets, registry) for k, n in enumerate(model.graph.node)]
    errors: list[dict[str, Any]] = []
    if all(n["result"] == "supported" for n in nodes):
        try:
            load_model(data)
        except GeError as e:
            record_failure(nodes, errors, e)
    return summarize(label, nodes, errors, framework="onnx", opset=opsets)


def record_failure(nodes: list[dict[str, Any]], errors: list[dict[str, Any]], e: GeError
                   ) -> None:
    """Add ``e`` to ``errors`` and mark the node it names ``failed``."""
    errors.append({"node": e.node, "tensor": e.tensor, "message": str(e)})
    for n in nodes:
        if n["name"] == e.node:
            n.update(result="failed", reason=e.message)


def summarize(label: str, nodes: list[dict[str, Any]], errors: list[dict[str, Any]], *,
              framework: str, **extra: Any) -> dict[str, Any]:
    """The ``check_result.json`` document from per-node entries of any source format.

    ``nodes`` are ``{"name", "op", "result", "reason"?}`` in the source's own names (ONNX
    nodes, Caffe layers, TensorFlow nodes); ``extra`` adds format-specific keys.
    """
    counts = Counter(n["result"] for n in nodes)
    ops = Counter(n["op"] for n in nodes)
    bad_ops = sorted({n["op"] for n in nodes if n["result"] != "supported"})
    return {
        "model": label, "format": "gerules check_result 1", "framework": framework,
        "result": "success" if not bad_ops and not errors else "failed",
        "summary": {"nodes": len(nodes), "supported": counts["supported"],
                    "unsupported": counts["unsupported"], "failed": counts["failed"],
                    "op_types": len(ops), "unsupported_op_types": bad_ops},
        "op_types": {op: ops[op] for op in sorted(ops)},
        **extra, "errors": errors, "nodes": nodes,
    }


def precheck_caffe(prototxt: str | os.PathLike[str], caffemodel: str | os.PathLike[str] | None,
                   input_shapes: Mapping[str, Sequence[int]]) -> dict[str, Any]:
    """``check_result.json`` for a Caffe net: one entry per TEST-phase layer, by layer name.

    Unsupported layer types are listed with a "did you mean"; when every layer is supported
    and the weights are given, the net is also converted and a failure marks its layer.
    """
    from ..frontends import caffe

    net = caffe.read_net(prototxt)
    known = caffe.supported_layers()
    nodes: list[dict[str, Any]] = []
    for layer in net.layers:
        entry: dict[str, Any] = {"name": layer.name, "op": layer.type, "result": "supported"}
        if layer.type not in known:
            entry.update(result="unsupported", reason=caffe.not_supported(layer.type))
        nodes.append(entry)
    errors: list[dict[str, Any]] = []
    if all(n["result"] == "supported" for n in nodes) and caffemodel is not None:
        try:
            caffe.convert(prototxt, caffemodel, input_shapes)
        except GeError as e:
            record_failure(nodes, errors, e)
    return summarize(str(prototxt), nodes, errors, framework="caffe",
                     weights=None if caffemodel is None else str(caffemodel))


def precheck_tensorflow(model: str | os.PathLike[str], input_shapes: Mapping[str, Sequence[int]],
                        out_nodes: Sequence[tuple[str, int]]) -> dict[str, Any]:
    """``check_result.json`` for a TensorFlow model: one entry per TF node, by node name.

    tf2onnx (in the isolated process) says which TF ops it cannot convert; the ONNX ops it
    made are then checked against the registry, and a problem there marks the TF node of the
    same name (tf2onnx keeps TF names) or is listed under ``errors``.
    """
    from ..frontends import tensorflow

    nodes, errors, data = tensorflow.check(model, input_shapes, out_nodes)
    if data is not None and all(n["result"] == "supported" for n in nodes):
        onnx_result = precheck(data, str(model))
        by_name = {n["name"]: n for n in nodes}
        for entry in onnx_result["nodes"]:
            if entry["result"] == "supported":
                continue
            reason = f"tf2onnx made ONNX op {entry['op']}: {entry.get('reason', '')}"
            if entry["name"] in by_name:
                by_name[entry["name"]].update(result=entry["result"], reason=reason)
            else:
                errors.append({"node": entry["name"], "tensor": None, "message": reason})
        errors.extend(onnx_result["errors"])
    return summarize(str(model), nodes, errors, framework="tensorflow")


def precheck_mindir(model: str | os.PathLike[str], input_shapes: Mapping[str, Sequence[int]]
                    ) -> dict[str, Any]:
    """``check_result.json`` for a MindIR model: one entry per node, by MindIR node name and
    MindSpore primitive; when all are supported the model is also converted."""
    from ..frontends import mindir

    nodes = mindir.check(model)
    errors: list[dict[str, Any]] = []
    if all(n["result"] == "supported" for n in nodes):
        try:
            mindir.convert(model, input_shapes)
        except GeError as e:
            record_failure(nodes, errors, e)
    return summarize(str(model), nodes, errors, framework="mindspore")
