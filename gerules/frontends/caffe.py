"""Caffe input (atc's ``--framework=0 --model=net.prototxt --weight=net.caffemodel``).

Read natively with protobuf from the ``caffe.proto`` subset kept beside this module (built at
import by ``protodef``; no Caffe, no protoc). The net is the text ``.prototxt``; the weights
come from the binary ``.caffemodel`` by layer name (``layer`` or the old V1 ``layers``),
else from blobs written in the prototxt itself.

Steps: read both files (regular files, size caps) -> parse (text strictly; when a field is
unknown, leniently again so the layers we cannot convert are still named) -> keep the layers
of the TEST phase (``include``/``exclude`` rules as Caffe applies them) -> inputs (``input``
+ ``input_shape``/``input_dim``, Input, DummyData, MemoryData; Data/ImageData/HDF5Data/
WindowData need ``--input_shape``) -> each layer through ``caffe_layers`` into a
``GraphBuilder`` -> a verified ``Graph``.

Invariants:
- In-place layers (top == bottom) become SSA: each write of a blob is a new tensor. Graph
  inputs keep their blob names; the last write of a blob is named like the blob; earlier
  writes are ``<blob>@<layer>``. Graph outputs are the blobs no later layer reads (Caffe's
  net outputs), in the order they were produced; data layers' label tops are not inputs.
- Every problem with the files or a layer is a ``GeError`` naming the file (with
  ``line:col`` for text) or the layer (``node 'conv1' (Convolution)``).
- Parsing protobuf runs no code; nothing is loaded beyond the two named files.
"""

from __future__ import annotations

import functools
import logging
import os
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

import numpy as np
from google.protobuf import text_format

from ..api.builder import GraphBuilder
from ..api.handles import Tensor
from ..errors import GeError, ModelError, UsageError
from ..ir.graph import Graph
from ..ir.registry import suggest
from .caffe_layers import CONVERTERS, Layer
from .files import read_capped, read_message
from .protodef import message_classes

log = logging.getLogger(__name__)

TEXT_CAP = 64 << 20  # a prototxt is a few KiB; 64 MiB leaves room for weights written in it
INPUT_LAYERS = ("Input", "DummyData", "MemoryData")
DATA_LAYERS = ("Data", "ImageData", "HDF5Data", "WindowData")
PASS_LAYERS = ("Split", "Silence")  # Caffe's own copies; a sink
BATCH = "batch"


@functools.cache
def proto() -> dict[str, type]:
    """The message classes of ``caffe.proto`` (built once)."""
    text = resources.files("gerules.frontends").joinpath("caffe.proto").read_text("utf-8")
    return message_classes(text)


def supported_layers() -> list[str]:
    """Every layer type the frontend converts (inputs and Caffe's Split/Silence included)."""
    return sorted({*CONVERTERS, *INPUT_LAYERS, *DATA_LAYERS, *PASS_LAYERS})


def not_supported(kind: str) -> str:
    """Why a layer type is refused, with a "did you mean" (Caffe's types are case-sensitive)."""
    known = supported_layers()
    same = [k for k in known if k.lower() == kind.lower()]
    hint = f" (did you mean {same[0]}?)" if same else suggest(kind, known)
    return f"layer type '{kind}' is not supported{hint}"


@dataclass(frozen=True)
class CaffeNet:
    """A parsed prototxt: the TEST-phase layers and the inputs it declares."""

    name: str
    layers: tuple[Any, ...]  # caffe.LayerParameter
    inputs: dict[str, tuple[int, ...] | None]  # the net's own input fields
    problem: GeError | None = None  # the strict parse's error when the lenient one was used


# ----------------------------------------------------------------------------- reading


def read_net(path: str | os.PathLike[str]) -> CaffeNet:
    """The net of a ``.prototxt`` (see the module docstring)."""
    where = str(path)
    try:
        data = read_capped(path, TEXT_CAP, what="Caffe prototxt").decode("utf-8")
    except UnicodeDecodeError:
        raise ModelError("not a Caffe prototxt: not UTF-8 text (is this the .caffemodel? "
                         "give it with --weight)", file=where) from None
    net_type = proto()["NetParameter"]
    problem: GeError | None = None
    try:
        net = text_format.Parse(data, net_type())
    except Exception as strict:  # noqa: BLE001 - ParseError, RecursionError, ...
        problem = _text_error(strict, where)
        try:
            net = text_format.Parse(data, net_type(), allow_unknown_field=True)
        except Exception:  # noqa: BLE001 - not text format at all
            raise problem from None
    if len(net.layers) and not len(net.layer):
        raise ModelError("this prototxt uses Caffe's deprecated V1 'layers' format; upgrade "
                         "it with Caffe's upgrade_net_proto_text tool", file=where)
    if not len(net.layer):
        raise problem or ModelError("the prototxt has no layers (is it a Caffe net?)",
                                    file=where)
    layers = tuple(layer for layer in net.layer if _included(layer))
    return CaffeNet(net.name or "caffe", layers, _net_inputs(net, where), problem)


def _text_error(e: Exception, where: str) -> ModelError:
    if isinstance(e, text_format.ParseError) and e.GetLine():
        detail = str(e).split(" : ", 1)[-1]
        return ModelError(detail, file=f"{where}:{e.GetLine()}:{e.GetColumn()}")
    if isinstance(e, RecursionError):
        return ModelError("messages nested too deeply", file=where)
    text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    return ModelError(f"not a Caffe prototxt: {text}", file=where)


def _included(layer: Any) -> bool:
    """Caffe's StateMeetsRule for the TEST phase at level 0 with no stages."""
    def meets(rule: Any) -> bool:
        if rule.HasField("phase") and rule.phase != 1:
            return False
        if rule.HasField("min_level") and rule.min_level > 0:
            return False
        if rule.HasField("max_level") and rule.max_level < 0:
            return False
        return not len(rule.stage)

    if len(layer.include):
        return any(meets(r) for r in layer.include)
    return not any(meets(r) for r in layer.exclude)


def _net_inputs(net: Any, where: str) -> dict[str, tuple[int, ...] | None]:
    names = list(net.input)
    if len(net.input_shape):
        if len(net.input_shape) != len(names):
            raise ModelError(f"{len(names)} inputs but {len(net.input_shape)} input_shape "
                             "entries", file=where)
        return {n: tuple(int(d) for d in s.dim) for n, s in zip(names, net.input_shape,
                                                                 strict=True)}
    dims = [int(d) for d in net.input_dim]
    if dims:
        if len(dims) != 4 * len(names):
            raise ModelError(f"input_dim needs 4 values per input ({len(names)} inputs), has "
                             f"{len(dims)}", file=where)
        return {n: tuple(dims[4 * k:4 * k + 4]) for k, n in enumerate(names)}
    return {n: None for n in names}


def read_weights(path: str | os.PathLike[str]) -> dict[str, list[np.ndarray]]:
    """The weight blobs of a ``.caffemodel``, by layer name."""
    where = str(path)
    net = read_message(path, proto()["NetParameter"](), "Caffe .caffemodel")
    if not len(net.layer) and not len(net.layers):
        raise ModelError("the .caffemodel holds no layers (is it a binary NetParameter?)",
                         file=where)
    weights: dict[str, list[np.ndarray]] = {}
    for layer in (*net.layers, *net.layer):
        try:
            weights[layer.name] = [blob_array(b) for b in layer.blobs]
        except ModelError as e:
            raise e.with_place(file=where, node=layer.name) from None
    return weights


def blob_array(blob: Any) -> np.ndarray:
    """A ``BlobProto`` as a float32 array of its shape (``shape`` or the old 4-D fields)."""
    if len(blob.data):
        values = np.array(blob.data, np.float32)
    else:
        values = np.array(blob.double_data, np.float64).astype(np.float32)
    if blob.HasField("shape"):
        shape = tuple(int(d) for d in blob.shape.dim)
    elif any(blob.HasField(f) for f in ("num", "channels", "height", "width")):
        shape = (blob.num, blob.channels, blob.height, blob.width)
    else:
        shape = (values.size,)
    if any(d < 0 for d in shape) or int(np.prod(shape)) != values.size:
        raise ModelError(f"a blob of shape {list(shape)} holds {values.size} values")
    return values.reshape(shape)


# ----------------------------------------------------------------------------- converting


def convert(prototxt: str | os.PathLike[str], caffemodel: str | os.PathLike[str] | None = None,
            input_shapes: Mapping[str, Sequence[int]] | None = None) -> Graph:
    """The verified graph of a Caffe net with its weights (see the module docstring).

    ``input_shapes`` (atc's ``--input_shape``, by blob name) fixes or gives input shapes;
    ``-1`` keeps a dim dynamic (the batch).
    """
    net = read_net(prototxt)
    bad = unsupported(net)
    if bad:
        layer = bad[0]
        raise ModelError(not_supported(layer.type)
                         + (f" ({len(bad) - 1} more unsupported layers; --mode=3 lists them)"
                            if len(bad) > 1 else ""),
                         file=str(prototxt), node=layer.name, op=layer.type)
    if net.problem is not None:
        raise net.problem
    weights = read_weights(caffemodel) if caffemodel is not None else {}
    try:
        return _Builder(net, weights, dict(input_shapes or {})).build()
    except GeError as e:
        if isinstance(e, UsageError) and e.node is not None:
            e = ModelError(e.message, node=e.node, op=e.op, tensor=e.tensor)
        raise e.with_place(file=str(prototxt)) from None


def unsupported(net: CaffeNet) -> list[Any]:
    """The layers whose type the frontend does not convert, in net order."""
    known = set(supported_layers())
    return [layer for layer in net.layers if layer.type not in known]


class _Builder:
    """Turns the net's layers into graph nodes, one layer at a time, in SSA form."""

    def __init__(self, net: CaffeNet, weights: Mapping[str, list[np.ndarray]],
                 shapes: dict[str, Sequence[int]]) -> None:
        self.net, self.weights, self.shapes = net, weights, shapes
        self.g = GraphBuilder(net.name)
        self.current: dict[str, Tensor] = {}  # blob -> its latest tensor
        self.inputs: set[str] = set()
        self.writes = Counter(t for layer in net.layers for t in layer.top)
        self.read_after: dict[str, int] = {}  # blob -> last layer index that reads it
        for k, layer in enumerate(net.layers):
            for b in layer.bottom:
                self.read_after[b] = k

    def build(self) -> Graph:
        for name, dims in self.net.inputs.items():
            self._input(name, dims, "net input")
        produced: list[str] = []
        for layer in self.net.layers:
            if layer.type in INPUT_LAYERS or layer.type in DATA_LAYERS:
                self._data_layer(layer)
                continue
            tops = self._convert(layer)
            produced.extend(t for t in tops if t not in produced)
        outputs = [b for b in produced if self.read_after.get(b, -1) <= self._last_write(b)]
        if not outputs:
            raise ModelError("the net has no outputs (every blob is read by a later layer)")
        for blob in outputs:
            self.g.output(self.current[blob])
        return self.g.build()

    def _last_write(self, blob: str) -> int:
        return max(k for k, layer in enumerate(self.net.layers) if blob in layer.top)

    def _input(self, name: str, dims: Sequence[int] | None, what: str) -> None:
        given = self.shapes.get(name)
        if given is not None:
            dims = given
        if dims is None:
            raise UsageError(f"the shape of {what} '{name}' is not in the prototxt: give it "
                             f"with --input_shape \"{name}:N,C,H,W\"")
        shape = [BATCH if d == -1 else int(d) for d in dims]
        if any(isinstance(d, int) and d < 0 for d in shape):
            raise ModelError(f"{what} '{name}' has a negative dim {list(dims)}")
        self.current[name] = self.g.input(name, shape)
        self.inputs.add(name)

    def _data_layer(self, layer: Any) -> None:
        tops = list(layer.top)
        if not tops:
            raise ModelError("an input layer without tops", node=layer.name, op=layer.type)
        if layer.type == "Input":
            shapes = [tuple(s.dim) for s in layer.input_param.shape]
            if len(shapes) not in (1, len(tops)):
                raise ModelError(f"{len(tops)} tops but {len(shapes)} shapes",
                                 node=layer.name, op=layer.type)
            for k, top in enumerate(tops):
                self._input(top, shapes[0] if len(shapes) == 1 else shapes[k], "input")
            return
        if layer.type == "DummyData":
            p = layer.dummy_data_param
            legacy = (p.num, p.channels, p.height, p.width)
            if len(p.num) and not all(len(values) for values in legacy):
                raise ModelError("the legacy shape needs num, channels, height and width",
                                 node=layer.name, op=layer.type)
            for k, top in enumerate(tops):
                dims = (tuple(p.shape[k].dim) if k < len(p.shape) else
                        _legacy(legacy, k) if len(p.num) else None)
                self._input(top, dims, "input")
            return
        dims = None
        if layer.type == "MemoryData":
            p = layer.memory_data_param
            dims = (p.batch_size, p.channels, p.height, p.width)
        if layer.transform_param.ByteSize():
            log.warning("layer '%s': transform_param (preprocessing) is not part of the graph",
                        layer.name)
        self._input(tops[0], dims, f"{layer.type} layer '{layer.name}' top")

    def _convert(self, layer: Any) -> list[str]:
        if not layer.name:
            raise ModelError(f"a {layer.type or 'typeless'} layer without a name")
        missing = [b for b in layer.bottom if b not in self.current]
        if missing:
            raise ModelError(f"bottom '{missing[0]}' is not produced by any earlier layer "
                             "(or is a data layer's label, which inference does not have)",
                             node=layer.name, op=layer.type)
        if layer.type == "Silence":
            return []
        bottoms = [self.current[b] for b in layer.bottom]
        if layer.type == "Split":
            tops = [self._ssa(t, layer) for t in layer.top]
            for k, t in enumerate(tops):
                self.g.op("Identity", bottoms[0], name=f"{layer.name}#{k}" if k else layer.name,
                          outputs=[t])
        else:
            blobs = self.weights.get(layer.name)
            if blobs is None:
                blobs = [blob_array(b) for b in layer.blobs]
            tops = [self._ssa(t, layer) for t in layer.top]
            if not tops:
                raise ModelError("a layer without tops", node=layer.name, op=layer.type)
            try:
                outs = CONVERTERS[layer.type](Layer(self.g, layer, blobs, bottoms, tops))
            except GeError as e:
                raise e.with_place(node=layer.name, op=layer.type)
            if len(outs) != len(tops):
                raise ModelError(f"has {len(tops)} tops; this layer makes {len(outs)}",
                                 node=layer.name, op=layer.type)
        for blob, tensor in zip(layer.top, tops, strict=True):
            self.current[blob] = self.g[tensor]
        return list(layer.top)

    def _ssa(self, blob: str, layer: Any) -> str:
        """The tensor name of this write of ``blob`` (see the module invariants)."""
        self.writes[blob] -= 1
        if self.writes[blob] == 0 and blob not in self.inputs:
            return blob
        return f"{blob}@{layer.name}"


def _legacy(legacy: Sequence[Any], k: int) -> tuple[int, ...]:
    """Top ``k``'s dims from DummyData's legacy ``num``/``channels``/``height``/``width``
    lists (each non-empty; a list shorter than the tops repeats its first value)."""
    return tuple(int(values[k] if k < len(values) else values[0]) for values in legacy)
