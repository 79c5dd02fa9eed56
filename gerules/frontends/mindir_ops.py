"""MindSpore primitives as ONNX ops: one converter per primitive (see ``mindir``).

A converter gets a ``Call`` (the node, its primitive, its inputs as values: graph tensors,
weights (``Param``), Python values of ``Constant`` nodes, tuples, ``MONAD``) and returns the
node's value. Old-style primitives carry their attributes, new-style ones take them as
inputs: ``Call.attr(name, index)`` reads either and checks the kind of value.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from ..api.builder import GraphBuilder
from ..api.handles import Tensor
from ..errors import ModelError
from .mindir_values import MONAD, Param, attr_value

PAD_MODES = {0: "pad", 1: "same", 2: "valid"}  # MindSpore's PadMode enum
INTS = (int, tuple)  # a size given as one int or a tuple
FORMATS = {0: "NCHW", 1: "NHWC"}


class Builder(Protocol):
    """What a converter needs of the model being built."""

    g: GraphBuilder

    def node_name(self, node: Any) -> str: ...

    def const(self, p: Param) -> Tensor: ...


@dataclass
class Call:
    """One MindIR node being converted."""

    b: Builder
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
        if isinstance(value, Param):
            return self.b.const(value)
        if isinstance(value, Tensor):
            return value
        if isinstance(value, np.ndarray | int | float):
            return self.b.g.const(np.asarray(value, np.float32 if isinstance(value, float)
                                             else None), name=f"{self.name}.in{k}")
        raise self.error(f"input {k} is not a tensor ({type(value).__name__})")

    def array(self, k: int) -> np.ndarray | None:
        value = self.arg(k)
        return value.array if isinstance(value, Param) else None

    def op(self, op: str, *inputs: Any, **attrs: Any) -> Tensor:
        out: Tensor = self.b.g.op(op, *inputs, name=self.name, **attrs)
        return out

    def aux(self, what: str, op: str, *inputs: Any, **attrs: Any) -> Tensor:
        out: Tensor = self.b.g.op(op, *inputs, name=f"{self.name}/{what}", **attrs)
        return out


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
    inputs = [c.b.const(t) if isinstance(t, Param) else t for t in items]
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
