"""TensorFlow input (atc's ``--framework=3``): a frozen GraphDef ``.pb`` or a SavedModel folder.

Converted by tf2onnx (an existing converter; the ``tensorflow`` extra) in a separate process
with resource limits (``isolate.run_isolated`` running ``tf_worker``): TensorFlow's loaders
execute graph code, so this process never imports TensorFlow. The ONNX bytes that come back
are loaded like any ONNX model.

atc's TensorFlow flags: ``--input_shape`` by TF name (``input:0`` or ``input``),
``--out_nodes`` (``node:0;other:1``: those tensors become the outputs), ``--input_format``
(TF's default is NHWC; the layout is kept, tf2onnx puts Transposes around NCHW-only ops and
the rule library removes what cancels).

Invariants:
- Graph inputs and outputs are named by the TF node (``input``, not ``input:0``; a second
  output of a node keeps ``node:1``); a SavedModel's by its signature's names.
- Errors name the TF node that could not be converted; without the extra the message names
  it (``pip install 'gerules[tensorflow]'``).
"""

from __future__ import annotations

import base64
import binascii
import importlib.util
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import GeError, ModelError, UsageError
from ..ir.graph import Graph
from ..onnx_io import load_model
from .isolate import IsolationLimits, run_isolated

OPSET = 17
ENTRY = "gerules.frontends.tf_worker:convert"
LIMITS = IsolationLimits(memory_bytes=16 << 30)  # TensorFlow maps much address space
EXTRA = "TensorFlow input needs the tensorflow extra: pip install 'gerules[tensorflow]'"


def available() -> bool:
    """True when TensorFlow and tf2onnx are installed (the ``tensorflow`` extra)."""
    return all(importlib.util.find_spec(m) is not None for m in ("tensorflow", "tf2onnx"))


def tensor_name(name: str) -> str:
    """A TF tensor name: ``node`` -> ``node:0``; ``node:k`` kept."""
    head, sep, tail = name.rpartition(":")
    return name if sep and head and tail.isdigit() else f"{name}:0"


def graph_name(name: str) -> str:
    """The graph's name of a TF tensor: ``node:0`` and ``node`` -> ``node``."""
    return name[:-2] if name.endswith(":0") else name


def graph_shapes(shapes: Mapping[str, Sequence[int]]) -> dict[str, tuple[int, ...]]:
    """``--input_shape`` keyed by the converted graph's input names."""
    return {graph_name(k): tuple(v) for k, v in shapes.items()}


def _request(path: Path, shapes: Mapping[str, Sequence[int]],
             out_nodes: Sequence[tuple[str, int]], *, check: bool = False,
             signature: str | None = None) -> dict[str, Any]:
    if not available():
        raise UsageError(EXTRA)
    folder = path.is_dir()
    if folder and not (path / "saved_model.pb").is_file():
        raise ModelError("a folder that is not a SavedModel (it has no saved_model.pb)",
                         file=str(path))
    return {"kind": "saved_model" if folder else "graphdef", "input_names": [],
            "output_names": [f"{n}:{k}" for n, k in out_nodes],
            "shapes": {tensor_name(k): [int(d) for d in v] for k, v in shapes.items()},
            "opset": OPSET, "signature": signature, "check": check}


def onnx_bytes(path: str | os.PathLike[str], shapes: Mapping[str, Sequence[int]] | None = None,
               out_nodes: Sequence[tuple[str, int]] = (), *,
               limits: IsolationLimits = LIMITS, signature: str | None = None) -> bytes:
    """The ONNX model tf2onnx makes of the TF model at ``path`` (in an isolated process)."""
    source = Path(path)
    request = _request(source, shapes or {}, out_nodes, signature=signature)
    try:
        return run_isolated(ENTRY, request, limits=limits, inputs=[source])
    except GeError as e:
        raise e.with_place(file=str(path)) from None


def convert(path: str | os.PathLike[str], shapes: Mapping[str, Sequence[int]] | None = None,
            out_nodes: Sequence[tuple[str, int]] = (), *, limits: IsolationLimits = LIMITS,
            signature: str | None = None) -> Graph:
    """The verified graph of a TF model (see the module docstring)."""
    data = onnx_bytes(path, shapes, out_nodes, limits=limits, signature=signature)
    try:
        return load_model(data)
    except GeError as e:
        raise e.with_place(file=str(path)) from None


def check(path: str | os.PathLike[str], shapes: Mapping[str, Sequence[int]] | None = None,
          out_nodes: Sequence[tuple[str, int]] = (), *, limits: IsolationLimits = LIMITS
          ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], bytes | None]:
    """Per TF node: supported by tf2onnx or not (``--mode=3``); errors; the ONNX bytes."""
    source = Path(path)
    request = _request(source, shapes or {}, out_nodes, check=True)
    try:
        raw = run_isolated(ENTRY, request, limits=limits, inputs=[source])
        doc = json.loads(raw)
        data = base64.b64decode(doc["onnx"]) if doc.get("onnx") else None
    except GeError as e:
        raise e.with_place(file=str(path)) from None
    except (ValueError, KeyError, TypeError, binascii.Error):
        raise ModelError("the isolated TensorFlow check returned malformed data",
                         file=str(path)) from None
    return list(doc["nodes"]), list(doc["errors"]), data
