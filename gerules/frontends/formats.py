"""Source formats: atc's ``--framework`` values, the format a model path implies, and loading
a Caffe, MindIR or TensorFlow model (the CLI and ``gerules.parse_model`` both use these).

Importing this module is cheap: each frontend is imported when a model of its format loads.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from ..errors import UsageError
from ..ir.graph import Graph

FRAMEWORKS = {"5": "onnx", "onnx": "onnx", "pytorch": "pytorch", "torch": "pytorch",
              "0": "caffe", "caffe": "caffe", "1": "mindspore", "mindspore": "mindspore",
              "mindir": "mindspore", "3": "tensorflow", "tensorflow": "tensorflow",
              "tf": "tensorflow"}
"""atc's numbers (0 Caffe, 1 MindSpore, 3 TensorFlow, 5 ONNX) and names -> our name."""
SUFFIXES = {".pt": "pytorch", ".pt2": "pytorch", ".pth": "pytorch", ".ts": "pytorch",
            ".prototxt": "caffe", ".mindir": "mindspore", ".pb": "tensorflow"}
CHOICES = ("0 = Caffe, 1 = MindSpore MindIR, 3 = TensorFlow, 5 = ONNX, pytorch = a "
           "TorchScript or torch.export archive")


def framework_name(value: str) -> str:
    """Our name for a ``--framework`` value; a ``UsageError`` listing the choices."""
    name = FRAMEWORKS.get(str(value).strip().lower())
    if name is None:
        raise UsageError(f"--framework: unknown value '{value}' ({CHOICES})")
    return name


def framework_of(path: str | os.PathLike[str] | None) -> str:
    """The format a model path implies: a SavedModel folder, else by extension, else ONNX."""
    if path is None:
        return "onnx"
    model = Path(path)
    if (model / "saved_model.pb").is_file():
        return "tensorflow"
    return SUFFIXES.get(model.suffix.lower(), "onnx")


def load(path: str | os.PathLike[str], framework: str,
         input_shapes: Mapping[str, Sequence[int]], *,
         weight: str | os.PathLike[str] | None = None,
         out_nodes: Sequence[tuple[str, int]] = ()) -> Graph:
    """The verified graph of a Caffe, MindIR or TensorFlow model (``framework`` names it)."""
    if weight is not None and framework != "caffe":
        raise UsageError("--weight is the Caffe .caffemodel; it needs --framework=0")
    if framework == "caffe":
        from . import caffe

        return caffe.convert(path, weight, input_shapes)
    if framework == "mindspore":
        from . import mindir

        return mindir.convert(path, input_shapes)
    if framework == "tensorflow":
        from . import tensorflow

        return tensorflow.convert(path, input_shapes, out_nodes)
    raise UsageError(f"no frontend loads '{framework}' models here")
