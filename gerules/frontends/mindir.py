"""MindSpore MindIR input (atc's ``--framework=1``): a ``.mindir`` read natively with protobuf.

MindIR is a protobuf (``mind_ir.ModelProto``); the subset of its public definitions we read is
``mindir.proto`` beside this module (built by ``protodef``; reading needs no MindSpore, and
parsing runs no code). The graph is MindSpore's exported inference graph: parameters (the
weights, raw little-endian data), ``Constant`` value nodes (scalars, tuples), and nodes
``REF::<primitive>`` whose primitive (``model.primitives``) names the op. Old-style
primitives carry their attributes (``Conv2D``, ``MaxPool``); newer ones take them as inputs
(``BatchNorm``, ``AvgPool``, ``MatMul``, ``Softmax``, ...).

MindSpore's side-effect plumbing is resolved, not converted: ``Load`` is its parameter,
``Depend`` its first input, ``UpdateState`` / ``MakeTuple`` of monads vanish,
``TupleGetItem`` picks from an op's tuple of outputs.

Invariants:
- Every problem is a ``GeError`` naming the file and the node (the node's name without
  MindSpore's scope prefix, its primitive as the op). An op we do not convert is refused by
  its primitive name; ``check`` lists every node for ``--mode=3``.
- Names: inputs and weights keep their names without the scope prefix (``x``,
  ``conv1.weight``); nodes are named after the MindIR node; the outputs are ``output``
  (``output0``, ``output1``, ... when there are several).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

import numpy as np

from ..api.builder import GraphBuilder
from ..api.handles import Tensor
from ..errors import GeError, ModelError, UsageError
from ..ir.graph import Graph
from .files import read_message
from .protodef import message_classes

# AttributeProto.AttributeType / TensorProto.data_type numbers
FLOAT, UINT8, INT8, INT16, INT32, INT64, STRING, BOOL = 1, 2, 3, 5, 6, 7, 8, 9
FLOAT16, DOUBLE, TUPLE, LIST, UMONAD, IOMONAD, NONE = 10, 11, 20, 21, 23, 24, 25
DTYPES = {FLOAT: np.float32, UINT8: np.uint8, INT8: np.int8, INT16: np.int16,
          INT32: np.int32, INT64: np.int64, BOOL: np.bool_, FLOAT16: np.float16,
          DOUBLE: np.float64}
PAD_MODES = {0: "pad", 1: "same", 2: "valid"}  # MindSpore's PadMode enum
INTS = (int, tuple)  # a size given as one int or a tuple
FORMATS = {0: "NCHW", 1: "NHWC"}


@functools.cache
def proto() -> dict[str, type]:
    text = resources.files("gerules.frontends").joinpath("mindir.proto").read_text("utf-8")
    return message_classes(text)


class _Monad:
    """MindSpore's state token (UMonad / IOMonad / UpdateState): carries no data."""


MONAD = _Monad()


@dataclass(frozen=True)
class _Param:
    """A weight, made a graph constant when an op first uses it."""

    name: str
    array: np.ndarray


# ----------------------------------------------------------------------------- reading


def read_model(path: str | os.PathLike[str]) -> Any:
    """The ``mind_ir.ModelProto`` of a ``.mindir`` file."""
    where = str(path)
    model = read_message(path, proto()["ModelProto"](), "MindIR file")
    if not model.HasField("graph") or not len(model.graph.node):
        raise ModelError("not a MindIR model: it holds no graph", file=where)
    _check_text(model, where)
    if len(model.functions):
        raise ModelError(f"the model calls {len(model.functions)} sub-graphs (functions); only "
                         "a single inlined inference graph is supported", file=where)
    return model


def _check_text(model: Any, where: str) -> None:
    """Every name we read is text: protobuf hands back ``bytes`` for invalid UTF-8."""
    g = model.graph
    names = [g.name, *(p.name for p in g.parameter), *(v.name for v in (*g.input, *g.output))]
    for n in g.node:
        names += [n.name, n.op_type, *n.input, *n.output, *(a.name for a in n.attribute)]
    for p in model.primitives:
        names += [p.name, p.op_type, *(a.name for a in p.attribute)]
    for name in names:
        if not isinstance(name, str):
            shown = bytes(name).decode("utf-8", "replace")
            raise ModelError(f"the name {shown!r} is not valid UTF-8", file=where)


def short(name: str) -> str:
    """A MindIR name without its scope prefix (``123_Net_construct_4:conv.weight``)."""
    return name.split(":", 1)[1] if ":" in name else name


def tensor_array(t: Any, where: str) -> np.ndarray:
    """A ``TensorProto``'s data as a NumPy array of its dims."""
    if t.HasField("external_data"):
        raise ModelError("weights in external data files are not supported", tensor=where)
    if t.compression_type:
        raise ModelError("compressed weights are not supported", tensor=where)
    dtype = DTYPES.get(t.data_type)
    if dtype is None:
        raise ModelError(f"unsupported data type {t.data_type}", tensor=where)
    dims = tuple(int(d) for d in t.dims)
    if any(d < 0 for d in dims):
        raise ModelError(f"negative dims {list(dims)}", tensor=where)
    count = int(np.prod(dims))
    if t.raw_data:
        if len(t.raw_data) != count * np.dtype(dtype).itemsize:
            raise ModelError(f"{len(t.raw_data)} bytes of data for dims {list(dims)}",
                             tensor=where)
        return np.frombuffer(t.raw_data, dtype=np.dtype(dtype).newbyteorder("<")).astype(
            dtype).reshape(dims)
    for field in ("float_data", "int32_data", "int64_data", "double_data"):
        values = getattr(t, field)
        if len(values):
            if len(values) != count:
                raise ModelError(f"{len(values)} values for dims {list(dims)}", tensor=where)
            return np.array(values).astype(dtype).reshape(dims)
    raise ModelError("a tensor without data", tensor=where)


def attr_value(a: Any, where: str) -> Any:
    """An ``AttributeProto``'s value: a Python scalar, str, tuple, array, None or a monad."""
    kind = int(a.type)
    if kind in (TUPLE, LIST):
        return tuple(attr_value(v, where) for v in a.values)
    if kind in (UMONAD, IOMONAD):
        return MONAD
    if kind == NONE:
        return None
    if kind == BOOL:
        return bool(a.ints[0] if len(a.ints) else a.i)
    if kind in (INT8, INT16, INT32, INT64, UINT8):
        return int(a.ints[0] if len(a.ints) else a.i)
    if kind in (FLOAT, DOUBLE):
        return float(a.floats[0] if len(a.floats) else a.doubles[0] if len(a.doubles)
                     else a.f if kind == FLOAT else a.d)
    if kind == STRING:
        return a.s.decode("utf-8", "replace")
    if kind == 17:  # TENSOR
        return tensor_array(a.t, where)
    enum = proto()["AttributeProto"].DESCRIPTOR.enum_types_by_name["AttributeType"]
    name = enum.values_by_number[kind].name if kind in enum.values_by_number else str(kind)
    raise ModelError(f"a value of kind {name} is not supported", node=where)


# ----------------------------------------------------------------------------- converting


def convert(path: str | os.PathLike[str],
            input_shapes: Mapping[str, Sequence[int]] | None = None) -> Graph:
    """The verified graph of a ``.mindir`` (see the module docstring)."""
    model = read_model(path)
    try:
        return _Builder(model, dict(input_shapes or {})).build()
    except GeError as e:
        if isinstance(e, UsageError) and e.node is not None:
            e = ModelError(e.message, node=e.node, op=e.op, tensor=e.tensor)
        raise e.with_place(file=str(path)) from None


def check(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """One ``--mode=3`` entry per MindIR node: its name, primitive and whether we convert it."""
    model = read_model(path)
    prims = {p.name: p for p in model.primitives}
    nodes = []
    for node in model.graph.node:
        if node.op_type == "Constant":
            continue
        op = _primitive(node, prims).op_type
        entry: dict[str, Any] = {"name": short(node.name), "op": op, "result": "supported"}
        if op not in CONVERTERS:
            entry.update(result="unsupported", reason=f"MindSpore primitive '{op}' is not "
                         "supported")
        nodes.append(entry)
    return nodes


def _primitive(node: Any, prims: Mapping[str, Any]) -> Any:
    ref = node.op_type.removeprefix("REF::")
    if ref not in prims:
        raise ModelError(f"op '{node.op_type}' names no primitive of the model",
                         node=short(node.name))
    return prims[ref]


@dataclass
class Call:
    """One MindIR node being converted."""

    b: _Builder
    node: Any
    prim: Any
    args: list[Any]

    @property
    def name(self) -> str:
        return self.b.node_name(self.node)

    def attr(self, name: str, index: int | None = None, default: Any = None,
             kind: type | tuple[type, ...] = object) -> Any:
        """An attribute: from the primitive (old style) or input ``index`` (new style), of
        Python type ``kind`` (a tuple's items are ints or floats)."""
        value = default
        found = [a for a in self.prim.attribute if a.name == name]
        if found:
            value = attr_value(found[0], self.name)
        elif index is not None and index < len(self.args):
            value = self.args[index]
        elif default is None:
            raise self.error(f"missing attribute '{name}'")
        if not isinstance(value, kind) or isinstance(value, bool) and kind in (int, float) or (
                isinstance(value, tuple) and not all(isinstance(v, int | float) for v in value)):
            raise self.error(f"attribute '{name}' has the wrong kind of value: {value!r:.80}")
        return value

    def arg(self, k: int) -> Any:
        if k >= len(self.args):
            raise self.error(f"needs {k + 1} inputs, has {len(self.args)}")
        return self.args[k]

    def error(self, message: str) -> ModelError:
        return ModelError(message, node=self.name, op=self.prim.op_type)

    def tensor(self, k: int) -> Tensor:
        value = self.arg(k)
        if isinstance(value, _Param):
            return self.b.const(value)
        if isinstance(value, Tensor):
            return value
        if isinstance(value, np.ndarray | int | float):
            return self.b.g.const(np.asarray(value, np.float32 if isinstance(value, float)
                                             else None), name=f"{self.name}.in{k}")
        raise self.error(f"input {k} is not a tensor ({type(value).__name__})")

    def array(self, k: int) -> np.ndarray | None:
        value = self.arg(k)
        return value.array if isinstance(value, _Param) else None

    def op(self, op: str, *inputs: Any, **attrs: Any) -> Tensor:
        return self.b.g.op(op, *inputs, name=self.name, **attrs)

    def aux(self, what: str, op: str, *inputs: Any, **attrs: Any) -> Tensor:
        return self.b.g.op(op, *inputs, name=f"{self.name}/{what}", **attrs)


class _Builder:
    def __init__(self, model: Any, shapes: dict[str, Sequence[int]]) -> None:
        self.model, self.shapes = model, shapes
        self.g = GraphBuilder(short(model.graph.name) or "mindir")
        self.values: dict[str, Any] = {}
        self.prims = {p.name: p for p in model.primitives}
        self.consts: dict[str, Tensor] = {}
        self.names: set[str] = set()

    def node_name(self, node: Any) -> str:
        return short(node.name) or (node.output[0] if len(node.output) else "(unnamed)")

    def const(self, p: _Param) -> Tensor:
        if p.name not in self.consts:
            self.consts[p.name] = self.g.const(p.array, name=p.name)
        return self.consts[p.name]

    def build(self) -> Graph:
        graph = self.model.graph
        for t in graph.parameter:
            self.values[t.name] = _Param(short(t.name), tensor_array(t, short(t.name)))
        for v in graph.input:
            self._input(v)
        for node in graph.node:
            self._node(node)
        for k, v in enumerate(graph.output):
            value = self.values.get(v.name)
            if not isinstance(value, Tensor):
                raise ModelError(f"output '{short(v.name)}' is not a computed tensor")
            self.g.output(value, name="output" if len(graph.output) == 1 else f"output{k}")
        return self.g.build()

    def _input(self, v: Any) -> None:
        name = short(v.name)
        if not len(v.tensor):
            raise ModelError("an input without a tensor type", tensor=name)
        t = v.tensor[0]
        dims: list[Any] = [int(d) for d in t.dims]
        given = self.shapes.get(name)
        if given is not None:
            dims = list(given)
        dims = ["batch" if d == -1 else d for d in dims]
        dtype = DTYPES.get(t.data_type)
        if dtype is None:
            raise ModelError(f"unsupported input data type {t.data_type}", tensor=name)
        self.values[v.name] = self.g.input(name, dims, np.dtype(dtype).name)

    def _node(self, node: Any) -> None:
        if not len(node.output):
            raise ModelError("a node without outputs", node=self.node_name(node))
        if node.op_type == "Constant":
            value = attr_value(node.attribute[0], short(node.name)) if len(
                node.attribute) else None
            self.values[node.output[0]] = value
            return
        prim = _primitive(node, self.prims)
        args = []
        for name in node.input:
            if name not in self.values:
                raise ModelError(f"input '{short(name)}' is not defined before it is used",
                                 node=self.node_name(node), op=prim.op_type)
            args.append(self.values[name])
        convert_op = CONVERTERS.get(prim.op_type)
        if convert_op is None:
            raise ModelError(f"MindSpore primitive '{prim.op_type}' is not supported",
                             node=self.node_name(node), op=prim.op_type)
        call = Call(self, node, prim, args)
        try:
            result = convert_op(call)
        except GeError as e:
            raise e.with_place(node=call.name, op=prim.op_type)
        if len(node.output) == 1:
            self.values[node.output[0]] = result
            return
        if not isinstance(result, tuple) or len(result) != len(node.output):
            raise ModelError(f"has {len(node.output)} outputs; {prim.op_type} makes one",
                             node=call.name, op=prim.op_type)
        self.values.update(zip(node.output, result, strict=True))


# ----------------------------------------------------------------------------- ops


def _pairs(values: Any, call: Call, what: str) -> list[int]:
    """MindSpore's 2-D sizes: an int, (h, w) or (1, 1, h, w) -> [h, w]."""
    if isinstance(values, int):
        return [values, values]
    values = list(values)
    if len(values) == 4:
        values = values[2:]
    if len(values) != 2 or not all(isinstance(v, int) for v in values):
        raise call.error(f"{what} {values} is not a 2-D size")
    return [int(v) for v in values]


def _format(call: Call, index: int | None) -> None:
    fmt = call.attr("format", None, "NCHW") if index is None else call.attr("data_format",
                                                                            index, 0)
    fmt = FORMATS.get(fmt, fmt) if isinstance(fmt, int) else fmt
    if fmt != "NCHW":
        raise call.error(f"data format {fmt} is not supported (NCHW only)")


def _window(call: Call, mode: Any, kernel: list[int], pads: Sequence[int] = (0, 0, 0, 0)
            ) -> dict[str, Any]:
    mode = PAD_MODES.get(mode, mode) if isinstance(mode, int) else str(mode).lower()
    if mode == "same":
        return {"auto_pad": "SAME_UPPER"}
    if mode == "valid":
        return {"pads": [0, 0, 0, 0]}
    if mode == "pad":
        top, bottom, left, right = (list(pads) + [0, 0, 0, 0])[:4]
        return {"pads": [top, left, bottom, right]}
    raise call.error(f"pad mode '{mode}' is not supported")


def conv2d(c: Call) -> Tensor:
    _format(c, None)
    kernel = _pairs(c.attr("kernel_size", kind=INTS), c, "kernel_size")
    attrs = _window(c, c.attr("pad_mode", kind=(str, int)), kernel,
                    c.attr("pad_list", None, (0, 0, 0, 0), kind=tuple))
    return c.op("Conv", c.tensor(0), c.tensor(1), kernel_shape=kernel,
                strides=_pairs(c.attr("stride", kind=INTS), c, "stride"),
                dilations=_pairs(c.attr("dilation", None, 1, kind=INTS), c, "dilation"),
                group=c.attr("group", None, 1, kind=int), **attrs)


def pool(op: str) -> Callable[[Call], Tensor]:
    def convert(c: Call) -> Tensor:
        old = any(a.name == "kernel_size" for a in c.prim.attribute)
        _format(c, None if old else 4)
        kernel = _pairs(c.attr("kernel_size", 1, kind=INTS), c, "kernel_size")
        attrs = _window(c, c.attr("pad_mode", 3, kind=(str, int)), kernel)
        extra = {"count_include_pad": 0} if op == "AveragePool" else {}
        return c.op(op, c.tensor(0), kernel_shape=kernel,
                    strides=_pairs(c.attr("strides", 2, kind=INTS), c, "strides"), **attrs,
                    **extra)
    return convert


def batch_norm(c: Call) -> tuple[Any, ...]:
    if c.attr("is_training", 5, False, kind=(bool, int)):
        raise c.error("BatchNorm in training mode (export the net with set_train(False))")
    _format(c, 8)
    y = c.op("BatchNormalization", *(c.tensor(k) for k in range(5)),
             epsilon=float(np.float32(c.attr("epsilon", 6, 1e-5, kind=(float, int)))))
    return (y, None, None, None, None)


def matmul(c: Call) -> Tensor:
    ta = bool(c.attr("transpose_a", 2, False, kind=(bool, int)))
    tb = bool(c.attr("transpose_b", 3, False, kind=(bool, int)))
    a, b = c.tensor(0), c.tensor(1)
    if ta:
        a = c.aux("transpose_a", "Transpose", a, perm=[1, 0])
    if tb:
        w = c.array(1)
        b = (c.b.g.const(np.ascontiguousarray(w.T), name=f"{c.name}.weight_t")
             if w is not None else c.aux("transpose_b", "Transpose", b, perm=[1, 0]))
    return c.op("MatMul", a, b)


def bias_add(c: Call) -> Tensor:
    _format(c, 2)
    x = c.tensor(0)
    bias = c.array(1)
    rank = x.rank or 2
    if bias is not None:
        b: Any = c.b.g.const(bias.reshape(-1, *(1,) * (rank - 2)), name=f"{c.name}.bias")
    else:
        b = c.aux("bias_shape", "Reshape", c.tensor(1),
                  np.array([-1, *(1,) * (rank - 2)], np.int64))
    return c.op("Add", x, b)


def binary(op: str) -> Callable[[Call], Tensor]:
    def convert(c: Call) -> Tensor:
        return c.op(op, c.tensor(0), c.tensor(1))
    return convert


def unary(op: str) -> Callable[[Call], Tensor]:
    def convert(c: Call) -> Tensor:
        return c.op(op, c.tensor(0))
    return convert


def _axes(value: Any) -> list[int]:
    return [int(v) for v in (value if isinstance(value, tuple) else (value,))]


def softmax(c: Call) -> Tensor:
    axes = _axes(c.attr("axis", 1, -1, kind=INTS))
    if len(axes) != 1:
        raise c.error(f"softmax over several axes {axes} is not supported")
    return c.op("Softmax", c.tensor(0), axis=axes[0])


def reduce_mean(c: Call) -> Tensor:
    axes = c.attr("axis", 1, (), kind=INTS)
    x = c.tensor(0)
    axes = _axes(axes) if axes != () else list(range(x.rank or 0))
    keep = int(bool(c.attr("keep_dims", 2, False, kind=(bool, int))))
    return c.op("ReduceMean", x, np.array(axes, np.int64), keepdims=keep)


def reshape(c: Call) -> Tensor:
    return c.op("Reshape", c.tensor(0), np.array(_axes(c.attr("shape", 1, kind=INTS)),
                                                 np.int64))


def transpose(c: Call) -> Tensor:
    return c.op("Transpose", c.tensor(0), perm=_axes(c.attr("perm", 1, kind=INTS)))


def flatten(c: Call) -> Tensor:
    return c.op("Flatten", c.tensor(0), axis=1)


def concat(c: Call) -> Tensor:
    items = c.arg(0)
    if not isinstance(items, tuple):
        raise c.error("Concat takes a tuple of tensors")
    inputs = [c.b.const(t) if isinstance(t, _Param) else t for t in items]
    if not all(isinstance(t, Tensor) for t in inputs):
        raise c.error("Concat takes a tuple of tensors")
    return c.op("Concat", *inputs, axis=c.attr("axis", 1, 0, kind=int))


def load(c: Call) -> Any:
    return c.arg(0)


def make_tuple(c: Call) -> tuple[Any, ...]:
    return tuple(c.args)


def tuple_get_item(c: Call) -> Any:
    items, index = c.arg(0), c.arg(1)
    if not isinstance(items, tuple) or not isinstance(index, int) or not (
            0 <= index < len(items)) or items[index] is None:
        raise c.error(f"takes output {index} of something that does not provide it")
    return items[index]


CONVERTERS: dict[str, Callable[[Call], Any]] = {
    "Conv2D": conv2d, "MaxPool": pool("MaxPool"), "AvgPool": pool("AveragePool"),
    "BatchNorm": batch_norm, "MatMul": matmul, "BiasAdd": bias_add,
    "Add": binary("Add"), "Sub": binary("Sub"), "Mul": binary("Mul"),
    "Div": binary("Div"), "RealDiv": binary("Div"),
    "ReLU": unary("Relu"), "Sigmoid": unary("Sigmoid"), "Tanh": unary("Tanh"),
    "Softmax": softmax, "ReduceMean": reduce_mean, "Reshape": reshape,
    "Transpose": transpose, "Flatten": flatten, "Concat": concat,
    "Load": load, "Depend": load, "MakeTuple": make_tuple,
    "UpdateState": lambda c: MONAD, "TupleGetItem": tuple_get_item,
}
"""MindSpore primitive -> converter (the plumbing ops return what they pass on)."""
