"""``load_model``: bytes or a path in, a verified and shape-inferred ``Graph`` out.

Steps: map the file (``fileio.map_input``: a regular file under protobuf's 2 GiB limit) ->
name non-ONNX formats by their magic -> parse -> the budgets (``check_sizes``: nodes, outputs
per node, declared bytes of all weights) -> convert (``reader``) -> put nodes in topological
order when they are not -> ``verify`` (SSA, dangling inputs, cycles, op signatures, shapes).

Invariants:
- Every failure caused by the input is a ``GeError`` whose place starts with the file (the
  path as given, or ``<bytes>``); any exception protobuf raises while parsing (DecodeError,
  RecursionError, ValueError, UnicodeDecodeError, ...) becomes "corrupt or truncated".
- External data is read only from inside the model's folder (``external``), and only when
  a folder is known: loading bytes that use external data needs ``base_dir``.
- The returned graph satisfies ``gerules.ir.verify.verify`` and has ``value_info`` for every
  node output.
- A model file is memory-mapped, not read: ``raw_data`` weights are read-only views of the
  mapping, so they take no memory of this process until touched, and the pages a pass
  touched can be given back (``ir.weights.release``).
"""

from __future__ import annotations

import logging
import mmap
import os
from pathlib import Path

from ..budgets import DEFAULT, Budgets
from ..errors import GeError, ModelError
from ..fileio import map_input, read_input
from ..ir import dtypes
from ..ir.graph import Graph
from ..ir.verify import toposort, verify
from ..ir.weights import release_mapping
from .external import read_external
from .proto import TENSOR, ModelProto, TensorProto, parse_model
from .reader import model_to_graph
from .sniff import known_format, text_kind
from .tensors import ExternalReader
from .wire import WireError

log = logging.getLogger(__name__)

PROTOBUF_LIMIT = 2**31 - 1  # protobuf cannot parse a message of 2 GiB or more
Source = str | os.PathLike[str] | bytes | bytearray | memoryview
Data = bytes | mmap.mmap


def load_model(source: Source, *, base_dir: str | os.PathLike[str] | None = None,
               budgets: Budgets = DEFAULT) -> Graph:
    """Load an ONNX model from a path or from its bytes.

    ``base_dir`` is the folder external data is resolved against (default: the model's own
    folder; required for bytes that use external data). ``budgets`` bounds each tensor, all
    weights together, the node count and the outputs of one node (``gerules.budgets``).
    """
    data: Data
    if isinstance(source, bytes | bytearray | memoryview):
        label, data = "<bytes>", bytes(source)
    else:
        label, data = str(source), map_file(source)
        base_dir = base_dir if base_dir is not None else Path(source).parent
    try:
        return _load(data, base_dir, budgets)
    except GeError as e:
        raise e.with_place(file=label) from None
    finally:
        if isinstance(data, mmap.mmap):  # the pages parsing read: the weights stay views
            release_mapping(data)


_LIMIT_HINT = " (a protobuf model is under 2 GiB; larger models keep weights in external data)"


def read_file(path: str | os.PathLike[str]) -> bytes:
    """The bytes of a model file: a regular file under protobuf's 2 GiB limit."""
    return read_input(path, limit=PROTOBUF_LIMIT, what="a model file", hint=_LIMIT_HINT)


def map_file(path: str | os.PathLike[str]) -> Data:
    """A model file mapped read-only (``read_file``'s checks and limit)."""
    return map_input(path, limit=PROTOBUF_LIMIT, what="a model file", hint=_LIMIT_HINT)


SNIFF_BYTES = 1 << 16  # what the format checks look at


def parse(data: Data) -> ModelProto:
    """The ``ModelProto`` in ``data``; non-ONNX content is named, never misparsed.

    Decoded by ``proto`` (ONNX's field tables over ``wire``), without the ``onnx`` package;
    ``raw_data`` fields are views of ``data``, not copies.
    """
    if not len(data):
        raise ModelError("empty file")
    head = bytes(data[:SNIFF_BYTES])
    fmt = known_format(head, len(data))
    if fmt:
        raise ModelError(f"not an ONNX model: this is {fmt}")
    try:
        model = parse_model(data)
    except WireError as e:
        kind = text_kind(head)
        if kind:
            raise ModelError(f"not an ONNX model: this is {kind}") from None
        if e.too_deep:
            raise ModelError("nesting too deep: subgraphs inside subgraphs exceed protobuf's "
                             "limit of 100 message levels") from None
        raise ModelError(f"corrupt or truncated ONNX protobuf ({e})") from None
    if not model.HasField("graph") and text_kind(head):
        raise ModelError(f"not an ONNX model: this is {text_kind(head)}")
    return model


def _load(data: Data, base_dir: str | os.PathLike[str] | None, budgets: Budgets) -> Graph:
    model = parse(data)
    check_sizes(model, budgets)
    graph = model_to_graph(model, max_bytes=budgets.tensor_bytes, external=_external(base_dir))
    if not _in_order(graph):
        log.info("nodes are not in topological order; sorting them")
        available = set(graph.input_names) | set(graph.initializers)
        graph = graph.replace(nodes=tuple(toposort(graph.nodes, available)))
    return verify(graph)


def check_sizes(model: ModelProto, budgets: Budgets) -> None:
    """The node count, each node's outputs and the declared bytes of all weights (every
    initializer and tensor attribute, external data counted each time it is used) against
    ``budgets``, before any tensor is read."""
    g = model.graph
    budgets.check("nodes", len(g.node), "the graph")
    total = sum(_declared_bytes(t, budgets) for t in g.initializer)
    for node in g.node:
        budgets.check("node_outputs", len(node.output), "the node",
                      node=node.name if isinstance(node.name, str) else None)
        total += sum(_declared_bytes(a.t, budgets) for a in node.attribute
                     if a.type == TENSOR)
    budgets.check("model_bytes", total, "the model (all its initializers and constants)")


def _declared_bytes(t: TensorProto, budgets: Budgets) -> int:
    """Bytes a tensor's dims and type declare; 0 when they make no sense or break the tensor
    budget (the reader then refuses that tensor by name)."""
    if any(d < 0 for d in t.dims) or t.data_type not in dtypes.DTYPES:
        return 0
    n = dtypes.itemsize(dtypes.DTYPES[t.data_type])
    for d in t.dims:
        n *= d
    return n if n <= budgets.tensor_bytes else 0


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
