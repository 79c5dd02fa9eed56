"""TensorFlow to ONNX with tf2onnx; runs only inside ``isolate``'s child process.

TensorFlow's loaders execute graph code (a SavedModel's functions, any op in a GraphDef), so
the parent never imports TensorFlow: ``gerules.frontends.tensorflow`` sends a request here
through ``run_isolated("gerules.frontends.tf_worker:convert", ...)``.

Request: ``inputs`` (the runner's copy of the frozen GraphDef ``.pb`` or SavedModel folder),
``kind`` (``graphdef`` / ``saved_model``), ``input_names`` / ``output_names`` (TF tensor
names ``node:k``, or empty: the Placeholders and the nodes nothing reads, or the
SavedModel's signature),
``shapes`` (``{tensor: dims}``, -1 unknown), ``opset``, ``signature``, ``check``.

Output: the ONNX model's bytes; with ``check``, JSON: one entry per TF node (name, op,
supported or not, tf2onnx's reason) and the ONNX bytes (base64) when conversion got that far.
Graph inputs and outputs are renamed from ``node:0`` to ``node`` (a SavedModel's: to its
signature's names), so atc's ``--input_shape input:0`` and ``input`` both name them.

Errors are ``GeError``s naming the TF node (``node 'conv/Conv2D' (Conv2D)``), never the
copy's path (the parent names the user's file).
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import GeError, ModelError
from .files import read_message

NOT_OPS = {"Const", "NoOp", "Placeholder", "PlaceholderWithDefault", "Assert", "VarHandleOp",
           "VariableV2", "SaveV2", "RestoreV2"}
VARIABLES = {"VarHandleOp", "VariableV2", "Variable"}


class _Problems(logging.Handler):
    """Collects tf2onnx's per-node errors (it logs them and goes on)."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.unsupported: dict[str, str] = {}  # node -> op
        self.failed: dict[str, str] = {}  # node -> reason

    def emit(self, record: logging.LogRecord) -> None:
        msg = str(record.msg)
        args = record.args if isinstance(record.args, tuple) else ()
        if msg.startswith("Tensorflow op [") and len(args) >= 2:
            self.unsupported[str(args[0])] = str(args[1])
        elif msg.startswith("Failed to convert node") and args:
            reason = record.exc_info[1] if record.exc_info else None
            self.failed[str(args[0])] = str(reason).splitlines()[0] if reason else "failed"


def convert(request: Mapping[str, Any], output: Path) -> None:
    """The isolated entry point (see the module docstring)."""
    try:
        _convert(request, output)
    except GeError as e:
        e.file = None  # the path of the worker's copy means nothing to the user
        raise


def _convert(request: Mapping[str, Any], output: Path) -> None:
    import tensorflow as tf  # noqa: F401 - loads TF's op registry before tf2onnx
    import tf2onnx

    graph_def, inputs, outputs, rename = _load(request)
    problems = _Problems()
    logger = logging.getLogger("tf2onnx")
    logger.addHandler(problems)
    shapes = {k: [None if d < 0 else d for d in v] for k, v in request["shapes"].items()}
    missing = [k for k in shapes if k not in inputs]
    if missing:
        raise ModelError(f"--input_shape names '{missing[0].removesuffix(':0')}', which is not "
                         f"a model input (inputs: {', '.join(_plain(i) for i in inputs)})")
    rename.update({t: rename.get(t, _plain(t)) for t in (*inputs, *outputs)})
    model = None
    try:
        model, _ = tf2onnx.convert.from_graph_def(
            graph_def, name="tensorflow", input_names=inputs, output_names=outputs,
            opset=int(request["opset"]), shape_override=shapes or None,
            tensors_to_rename=rename)
    except Exception as e:  # noqa: BLE001 - tf2onnx raises many types
        if not request.get("check"):
            raise ModelError(f"tf2onnx could not convert the model: {_line(e)}") from None
        problems.failed.setdefault("", _line(e))
    finally:
        logger.removeHandler(problems)
    if request.get("check"):
        output.write_text(json.dumps(_check(graph_def, problems, model)))
        return
    _raise_first(problems, graph_def)
    assert model is not None
    _name_batch(model)
    output.write_bytes(model.SerializeToString())


def _name_batch(model: Any) -> None:
    """tf2onnx names an unknown dim ``unk__N``; the first dim of an input is the batch."""
    for value in model.graph.input:
        dims = value.type.tensor_type.shape.dim
        if len(dims) and dims[0].dim_param.startswith("unk__"):
            dims[0].dim_param = "batch"


def _plain(tensor: str) -> str:
    return tensor[:-2] if tensor.endswith(":0") else tensor


def _line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def _load(request: Mapping[str, Any]) -> tuple[Any, list[str], list[str], dict[str, str]]:
    if request["kind"] == "saved_model":
        return _saved_model(request)
    import tensorflow as tf

    path = request["inputs"][0]
    graph_def = read_message(path, tf.compat.v1.GraphDef(), "frozen TensorFlow GraphDef")
    if not len(graph_def.node):
        raise ModelError("the GraphDef has no nodes", file=path)
    for node in graph_def.node:
        if node.op in VARIABLES:
            raise ModelError("the graph is not frozen: it holds variables (freeze it with "
                             "convert_variables_to_constants_v2, or give the SavedModel folder)",
                             file=path, node=node.name, op=node.op)
    inputs = list(request["input_names"]) or [f"{n.name}:0" for n in graph_def.node
                                              if n.op == "Placeholder"]
    outputs = list(request["output_names"]) or _sinks(graph_def)
    names = {n.name: n for n in graph_def.node}
    for tensor in (*inputs, *outputs):
        if tensor.rpartition(":")[0] not in names:
            raise ModelError(f"the graph has no node '{tensor.rpartition(':')[0]}'", file=path)
    if not outputs:
        raise ModelError("found no output node; name them with --out_nodes", file=path)
    return graph_def, inputs, outputs, {}


def _sinks(graph_def: Any) -> list[str]:
    """``node:0`` of every op node whose outputs nothing reads (the graph's outputs)."""
    read = {i.lstrip("^").split(":")[0] for n in graph_def.node for i in n.input}
    return [f"{n.name}:0" for n in graph_def.node if n.name not in read and n.op not in NOT_OPS]


def _saved_model(request: Mapping[str, Any]) -> tuple[Any, list[str], list[str], dict[str, str]]:
    from tf2onnx import tf_loader

    path = request["inputs"][0]
    signature = request.get("signature") or "serving_default"
    try:
        graph_def, inputs, outputs, rename = tf_loader.from_saved_model(
            path, list(request["input_names"]) or None, list(request["output_names"]) or None,
            signatures=[signature], return_tensors_to_rename=True)
    except Exception as e:  # noqa: BLE001 - TF raises many types for a bad SavedModel
        raise ModelError(f"cannot load the SavedModel ({_line(e)})", file=path) from None
    return graph_def, list(inputs), list(outputs), dict(rename or {})


def _raise_first(problems: _Problems, graph_def: Any) -> None:
    ops = {n.name: n.op for n in graph_def.node}
    if problems.unsupported:
        node, op = next(iter(problems.unsupported.items()))
        more = len(problems.unsupported) - 1
        raise ModelError(f"TensorFlow op '{op}' is not supported by tf2onnx"
                         + (f" ({more} more unsupported nodes; --mode=3 lists them)"
                            if more else ""), node=node, op=op)
    if problems.failed:
        node, reason = next(iter(problems.failed.items()))
        raise ModelError(f"tf2onnx could not convert it: {reason}", node=node or None,
                         op=ops.get(node))


def _check(graph_def: Any, problems: _Problems, model: Any) -> dict[str, Any]:
    nodes: list[dict[str, Any]] = []
    for n in graph_def.node:
        entry: dict[str, Any] = {"name": n.name, "op": n.op, "result": "supported"}
        if n.name in problems.unsupported:
            entry.update(result="unsupported", reason=f"TensorFlow op '{n.op}' is not "
                         "supported by tf2onnx")
        elif n.name in problems.failed:
            entry.update(result="failed", reason=problems.failed[n.name])
        nodes.append(entry)
    errors = [{"node": None, "tensor": None, "message": f"tf2onnx: {problems.failed['']}"}
              ] if "" in problems.failed else []
    onnx = base64.b64encode(model.SerializeToString()).decode() if model is not None else None
    return {"nodes": nodes, "errors": errors, "onnx": onnx}

