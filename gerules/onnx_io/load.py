"""``load_model``: bytes or a path in, a verified and shape-inferred ``Graph`` out.

Steps: read the file (a regular file under protobuf's 2 GiB limit) -> name non-ONNX formats
by their magic -> parse -> convert (``reader``) -> put nodes in topological order when they
are not -> ``verify`` (SSA, dangling inputs, cycles, op signatures, shape inference).

Invariants:
- Every failure caused by the input is a ``GeError`` whose place starts with the file (the
  path as given, or ``<bytes>``); any exception protobuf raises while parsing (DecodeError,
  RecursionError, ValueError, UnicodeDecodeError, ...) becomes "corrupt or truncated".
- External data is read only from inside the model's folder (``external``), and only when
  a folder is known: loading bytes that use external data needs ``base_dir``.
- The returned graph satisfies ``gerules.ir.verify.verify`` and has ``value_info`` for every
  node output.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

from ..errors import GeError, ModelError
from ..ir.graph import Graph
from ..ir.verify import toposort, verify
from .external import read_external
from .proto import ModelProto, TensorProto, parse_model
from .reader import model_to_graph
from .sniff import known_format, text_kind
from .tensors import DEFAULT_MAX_TENSOR_BYTES, ExternalReader
from .wire import WireError

log = logging.getLogger(__name__)

PROTOBUF_LIMIT = 2**31 - 1  # protobuf cannot parse a message of 2 GiB or more
Source = str | os.PathLike[str] | bytes | bytearray | memoryview


def load_model(source: Source, *, base_dir: str | os.PathLike[str] | None = None,
               max_bytes: int = DEFAULT_MAX_TENSOR_BYTES) -> Graph:
    """Load an ONNX model from a path or from its bytes.

    ``base_dir`` is the folder external data is resolved against (default: the model's own
    folder; required for bytes that use external data). ``max_bytes`` caps each tensor.
    """
    if isinstance(source, bytes | bytearray | memoryview):
        label, data = "<bytes>", bytes(source)
    else:
        label, data = str(source), read_file(source)
        base_dir = base_dir if base_dir is not None else Path(source).parent
    try:
        return _load(data, base_dir, max_bytes)
    except GeError as e:
        raise e.with_place(file=label) from None


def read_file(path: str | os.PathLike[str]) -> bytes:
    """The bytes of a model file; refuses folders, devices and files over 2 GiB."""
    try:
        with open(path, "rb") as f:
            info = os.fstat(f.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise ModelError("not a regular file", file=str(path))
            if info.st_size > PROTOBUF_LIMIT:
                raise ModelError(f"the file has {info.st_size} bytes; a protobuf model is under "
                                 "2 GiB (larger models keep weights in external data)",
                                 file=str(path))
            return f.read()
    except IsADirectoryError:
        raise ModelError("is a folder, not a model file", file=str(path)) from None
    except FileNotFoundError:
        raise ModelError("no such file", file=str(path)) from None
    except OSError as e:
        raise ModelError(f"cannot read: {e.strerror or e}", file=str(path)) from None


def parse(data: bytes) -> ModelProto:
    """The ``ModelProto`` in ``data``; non-ONNX content is named, never misparsed.

    Decoded by ``proto`` (ONNX's field tables over ``wire``), without the ``onnx`` package;
    ``raw_data`` fields are views of ``data``, not copies.
    """
    if not data:
        raise ModelError("empty file")
    fmt = known_format(data)
    if fmt:
        raise ModelError(f"not an ONNX model: this is {fmt}")
    try:
        model = parse_model(data)
    except WireError as e:
        kind = text_kind(data)
        if kind:
            raise ModelError(f"not an ONNX model: this is {kind}") from None
        if e.too_deep:
            raise ModelError("nesting too deep: subgraphs inside subgraphs exceed protobuf's "
                             "limit of 100 message levels") from None
        raise ModelError(f"corrupt or truncated ONNX protobuf ({e})") from None
    if not model.HasField("graph") and text_kind(data):
        raise ModelError(f"not an ONNX model: this is {text_kind(data)}")
    return model


def _load(data: bytes, base_dir: str | os.PathLike[str] | None, max_bytes: int) -> Graph:
    model = parse(data)
    graph = model_to_graph(model, max_bytes=max_bytes, external=_external(base_dir))
    if not _in_order(graph):
        log.info("nodes are not in topological order; sorting them")
        available = set(graph.input_names) | set(graph.initializers)
        graph = graph.replace(nodes=tuple(toposort(graph.nodes, available)))
    return verify(graph)


def _external(base_dir: str | os.PathLike[str] | None) -> ExternalReader | None:
    if base_dir is None:
        return None
    folder = os.fspath(base_dir)

    def read(t: TensorProto, nbytes: int) -> bytearray:
        name = t.name if isinstance(t.name, str) else "?"
        return read_external(t, nbytes, folder, name)

    return read


def _in_order(graph: Graph) -> bool:
    defined = set(graph.input_names) | set(graph.initializers)
    produced = set(graph.producers())
    for node in graph.nodes:
        if any(i in produced and i not in defined for i in node.present_inputs()):
            return False
        defined.update(node.outputs)
    return True
