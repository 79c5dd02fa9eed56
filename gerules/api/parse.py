"""``parse_model``: a model file in, a verified and shape-inferred ``Graph`` out.

Invariants:
- ONNX (a path, the file's bytes or an ``onnx.ModelProto``) goes through the ONNX loader, so
  every problem in the file is the loader's ``ModelError`` naming the file and node.
- ``input_shape`` has atc's meaning (``--input_shape``) and the same implementation as the
  command line: a given dim replaces the model's, ``-1`` keeps it dynamic, and a symbolic dim
  left over that is not a batch dim (first dim of every input that has it) is set to 1 with a
  warning. It is a mapping ``{name: dims}`` or atc's text ``"x:1,3,224,224;y:1,8"``.
- ``input_format`` (atc's ``--input_format``, optional) is checked as the compiler checks it
  (``NCHW``/``NHWC`` need a 4-D input; ``NHWC`` only warns: ONNX models are NCHW) and recorded
  in the graph's metadata; it never reorders data.
- Caffe, MindIR and TensorFlow models go through ``gerules.frontends.formats.load`` (as the
  CLI's ``--framework=0/1/3``), by path only.
- PyTorch archives (``.pt``, ``.pth``, ``.pt2`` or ``framework="pytorch"``) go through
  ``gerules.frontends.torch.convert_archive`` with ``input_shape`` as the trace shapes (checked,
  then converted in the isolated worker; ``trust_archive`` as the CLI's); a
  missing ``torch`` extra or frontend is a ``UsageError`` that says what to do, found at call
  time (importing this module never imports torch).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import UsageError
from ..ir.graph import Graph

if TYPE_CHECKING:
    import onnx

Source = str | os.PathLike[str] | bytes
InputShape = Mapping[str, Sequence[int]] | str
FORMATS = ("NCHW", "NHWC", "ND")


def parse_model(source: Source | onnx.ModelProto, input_shape: InputShape | None = None,
                input_format: str | None = None, *, framework: str | None = None,
                weight: str | os.PathLike[str] | None = None,
                trust_archive: bool = False) -> Graph:
    """Load a model and fix its input shapes.

    ``source`` is an ONNX file path, its bytes or an ``onnx.ModelProto``, or the path of a
    PyTorch archive (the torch extra), a Caffe ``.prototxt`` (with ``weight``, its
    ``.caffemodel``), a MindIR ``.mindir``, a TensorFlow ``.pb`` or SavedModel folder (the
    tensorflow extra). ``input_shape`` maps input names to dims (``-1``: dynamic) or is
    atc's text form. ``input_format`` is ``"NCHW"``, ``"NHWC"`` or ``"ND"`` (checked and
    recorded only). ``framework`` is ``"onnx"``, ``"pytorch"``, ``"caffe"``,
    ``"mindspore"``, ``"tensorflow"`` or atc's number (default: by the path).
    ``trust_archive`` is the CLI's ``--trust_archive`` (docs/SECURITY.md).
    """
    fmt = None if input_format is None else format_name(input_format)
    shapes = input_shapes(input_shape)
    kind = _framework(source, framework)
    if kind == "pytorch":
        graph = _load_torch(source, shapes, trust_archive)
    elif kind == "onnx":
        graph = _load_onnx(source)
    else:
        graph, shapes = _load_other(source, kind, shapes, weight)
    graph = fix_shapes(graph, shapes) if shapes else graph
    if fmt is None:
        return graph
    check_format(graph, fmt)
    return graph.replace(metadata={**graph.metadata, "input_format": fmt})


def format_name(input_format: str) -> str:
    fmt = str(input_format).upper()
    if fmt not in FORMATS:
        raise UsageError(f"input_format '{input_format}' is not supported (choose "
                         f"{', '.join(FORMATS)})")
    return fmt


def check_format(graph: Graph, fmt: str) -> None:
    """NCHW and NHWC describe a 4-D input; the format is recorded in the graph's metadata
    (``compile`` with ``CompileOptions(input_format="NHWC")`` changes the input's layout)."""
    if fmt in ("NCHW", "NHWC") and not any(v.type.rank == 4 for v in graph.inputs):
        inputs = ", ".join(f"{v.name} {v.type}" for v in graph.inputs)
        raise UsageError(f"input_format {fmt} needs a 4-D input; the inputs are {inputs} "
                         "(use ND)")


def input_shapes(given: InputShape | None) -> dict[str, tuple[int, ...]]:
    """``{name: dims}`` from a mapping or from atc's ``"a:1,3;b:2"`` text."""
    if given is None:
        return {}
    if isinstance(given, str):
        return _parse_shapes(given)
    if not isinstance(given, Mapping):
        raise UsageError(f"input_shape must be a mapping {{name: dims}} or text "
                         f"'name:1,3,224,224', got {type(given).__name__}")
    return {str(name): _dims(name, dims) for name, dims in given.items()}


def _dims(name: object, dims: object) -> tuple[int, ...]:
    if isinstance(dims, str | bytes) or not isinstance(dims, Sequence):
        raise UsageError(f"input_shape '{name}': dims must be a list of ints, got {dims!r}")
    if not all(isinstance(d, int) and not isinstance(d, bool) and d >= -1 for d in dims):
        raise UsageError(f"input_shape '{name}': dims must be ints >= 0 or -1 (dynamic), "
                         f"got {list(dims)}")
    return tuple(int(d) for d in dims)


def _parse_shapes(text: str) -> dict[str, tuple[int, ...]]:
    out: dict[str, tuple[int, ...]] = {}
    for part in filter(None, (p.strip() for p in text.split(";"))):
        name, sep, dims = part.rpartition(":")
        if not sep or not name:
            raise UsageError(f"input_shape: expected NAME:D0,D1,... in '{part}'")
        try:
            values = [int(d) for d in dims.split(",")] if dims.strip() else []
        except ValueError:
            raise UsageError(f"input_shape: dims must be integers in '{part}'") from None
        out[name] = _dims(name, values)
    return out


def fix_shapes(graph: Graph, shapes: Mapping[str, Sequence[int]]) -> Graph:
    """``graph`` with ``shapes`` applied as atc's ``--input_shape`` does, re-verified."""
    from ..compiler import fix_input_shapes
    from ..ir.verify import verify

    fixed, _ = fix_input_shapes(graph, shapes, keep_batch=True)
    return verify(fixed)


def _framework(source: object, framework: str | None) -> str:
    from ..frontends import formats

    if framework is not None:
        name = formats.FRAMEWORKS.get(str(framework).lower())
        if name is None:
            raise UsageError(f"framework '{framework}' is not supported ({formats.CHOICES})")
        return name
    if isinstance(source, str | os.PathLike):
        return formats.framework_of(source)
    return "onnx"


def _load_other(source: Any, kind: str, shapes: dict[str, tuple[int, ...]],
                weight: str | os.PathLike[str] | None
                ) -> tuple[Graph, dict[str, tuple[int, ...]]]:
    """A Caffe, MindIR or TensorFlow model, and the shapes keyed by its graph's names."""
    from ..frontends import formats

    if not isinstance(source, str | os.PathLike):
        raise UsageError(f"parse_model: a {kind} model is given as a file path")
    graph = formats.load(source, kind, shapes, weight=weight)
    if kind == "tensorflow":
        from ..frontends.tensorflow import graph_shapes

        shapes = graph_shapes(shapes)
    return graph, shapes


def _load_onnx(source: Any) -> Graph:
    from ..onnx_io import load_model

    if isinstance(source, str | os.PathLike | bytes | bytearray | memoryview):
        return load_model(source)
    serialize = getattr(source, "SerializeToString", None)
    if serialize is None:
        raise UsageError(f"parse_model: expected a path, bytes or an onnx.ModelProto, got "
                         f"{type(source).__name__}")
    return load_model(serialize())


def _load_torch(source: Any, shapes: Mapping[str, Sequence[int]], trust: bool) -> Graph:
    if not isinstance(source, str | os.PathLike):
        raise UsageError("parse_model: a PyTorch model is given as a file path; for an "
                         "nn.Module use gerules.frontends.torch.convert(module, inputs)")
    convert = getattr(torch_frontend(), "convert_archive", None)
    if convert is None:
        raise UsageError("the torch frontend (gerules.frontends.torch) has no "
                         "convert_archive(); export the model to ONNX and parse that")
    graph: Graph = convert(source, dict(shapes), trust=trust)
    return graph


def torch_frontend() -> Any:
    """The ``gerules.frontends.torch`` module, or a ``UsageError`` saying what is missing."""
    try:
        return importlib.import_module("gerules.frontends.torch")
    except ModuleNotFoundError as e:
        if e.name == "torch":
            raise UsageError("PyTorch models need the torch extra: "
                             "pip install 'gerules[torch]'") from None
        if e.name in ("gerules.frontends", "gerules.frontends.torch"):
            raise UsageError("PyTorch models need the torch frontend "
                             "(gerules.frontends.torch), which this installation of gerules "
                             "does not have; export the model to ONNX and parse that") from None
        raise
