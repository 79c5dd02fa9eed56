"""Caffe layers as ONNX ops: one converter per layer type, each exact to Caffe's inference.

A converter gets a ``Layer`` (the layer's parameters, its weight blobs, the tensors of its
bottoms, the SSA names of its tops, the graph builder) and returns one tensor per top. The
op that computes a top is named after the layer (so ``--out_nodes`` and errors use Caffe's
layer names); helper ops are ``<layer>/<what>``; weights are ``<layer>.<what>``.

Caffe semantics kept exactly:
- Convolution / Deconvolution: ``pad``/``kernel_size``/``stride``/``dilation`` as repeated
  values (one for all axes, or one per axis) or as ``*_h``/``*_w``; ``group``; ``bias_term``.
  Caffe's output sizes are ONNX Conv's and ConvTranspose's with symmetric pads.
- Pooling: Caffe rounds up (``round_mode: CEIL``, the default) and drops a last window that
  would start in the end padding, which is ONNX's ``ceil_mode=1``; AVE divides by the window
  clipped to input + pad, which is ``count_include_pad=1``; ``global_pooling`` is the Global
  op; STOCHASTIC pooling (random at train time) is refused.
- BatchNorm: blobs ``mean * f``, ``var * f``, ``f`` (the moving-average scale factor); the
  statistics are ``blob / f`` (0 when ``f == 0``), ``y = (x - mean) / sqrt(var + eps)``,
  no affine part. With ``use_global_stats: false`` Caffe normalizes by the batch's own
  statistics (biased variance), built here from ReduceMean.
- Scale (and Bias): ``x * s (+ b)`` broadcast from ``axis`` over ``num_axes`` axes; the usual
  per-channel form after BatchNorm is a BatchNormalization with mean 0, var 1, eps 0 (exact:
  ``x / sqrt(1) * s + b``), so the rule library folds both into the convolution before them.
- InnerProduct: flatten from ``axis``, ``x @ W^T + b`` (``transpose: true``: ``x @ W + b``).
- Eltwise SUM with coefficients ``sum(c_i * x_i)``; PROD; MAX. Slice at ``slice_point``s (or
  equal parts). Flatten ``axis..end_axis``; Reshape with Caffe's ``0``/``-1`` and
  ``axis``/``num_axes``. Softmax along ``axis``. ReLU's ``negative_slope`` is LeakyRelu.
- Dropout is the identity at inference (Caffe scales at training time); it is kept as a
  Dropout node, which the rule library removes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..api.builder import GraphBuilder
from ..api.handles import Tensor
from ..errors import ModelError


@dataclass
class Layer:
    """One layer being converted (see the module docstring)."""

    g: GraphBuilder
    param: Any  # caffe.LayerParameter
    blobs: Sequence[np.ndarray]
    bottoms: Sequence[Tensor]
    tops: Sequence[str]

    @property
    def name(self) -> str:
        return str(self.param.name)

    @property
    def type(self) -> str:
        return str(self.param.type)

    def error(self, message: str) -> ModelError:
        return ModelError(message, node=self.name, op=self.type)

    def op(self, op: str, *inputs: Any, top: int = 0, **attrs: Any) -> Tensor:
        """The op that computes top ``top``: named after the layer (``layer#k`` past the 1st)."""
        node = self.name if top == 0 else f"{self.name}#{top}"
        out: Tensor = self.g.op(op, *inputs, name=node, outputs=[self.tops[top]], **attrs)[0]
        return out

    def aux(self, what: str, op: str, *inputs: Any, **attrs: Any) -> Tensor:
        """A helper op, ``<layer>/<what>``."""
        out: Tensor = self.g.op(op, *inputs, name=f"{self.name}/{what}", **attrs)
        return out

    def const(self, what: str, value: np.ndarray) -> Tensor:
        return self.g.const(np.ascontiguousarray(value), name=f"{self.name}.{what}")

    def blob(self, k: int, what: str, shape: Sequence[int] | None = None) -> np.ndarray:
        """Weight blob ``k`` as float32, reshaped to ``shape`` (its element count checked)."""
        if k >= len(self.blobs):
            raise self.error(f"weight blob {k} ({what}) is missing: give the .caffemodel "
                             "that holds this layer's weights (--weight)")
        array = self.blobs[k]
        if shape is None:
            return array
        if array.size != int(np.prod(shape)):
            raise self.error(f"weight blob {k} ({what}) has {array.size} values "
                             f"{list(array.shape)}; the layer needs {list(shape)}")
        return array.reshape(tuple(shape))

    def x(self, k: int = 0) -> Tensor:
        if k >= len(self.bottoms):
            raise self.error(f"needs {k + 1} bottom(s), has {len(self.bottoms)}")
        return self.bottoms[k]

    def dims(self, k: int = 0) -> tuple[Any, ...]:
        shape = self.x(k).shape
        if shape is None:
            raise self.error(f"the rank of bottom '{self.x(k).name}' is unknown")
        return tuple(shape)

    def axis(self, value: int, rank: int, what: str = "axis") -> int:
        out = value + rank if value < 0 else value
        if not 0 <= out < rank + (what == "end"):
            raise self.error(f"{what} {value} is out of range for a {rank}-D bottom")
        return out


Converter = Callable[[Layer], list[Tensor]]


def _static(layer: Layer, dims: Sequence[Any], what: str) -> list[int]:
    if not all(isinstance(d, int) for d in dims):
        raise layer.error(f"needs static {what} dims, got {list(dims)} (fix them with "
                          "--input_shape)")
    return [int(d) for d in dims]


# ----------------------------------------------------------------------------- geometry


def _spatial(layer: Layer, p: Any, name: str, default: int, n: int) -> list[int]:
    """``pad``/``stride``/``kernel_size``/``dilation`` in every Caffe spelling, per axis."""
    h, w = f"{name.split('_')[0]}_h", f"{name.split('_')[0]}_w"
    if p.HasField(h) or p.HasField(w):
        if n != 2:
            raise layer.error(f"{h}/{w} are for 2-D {layer.type} only")
        if name == "kernel_size" and not (p.HasField(h) and p.HasField(w)):
            raise layer.error("kernel_h and kernel_w must be given together")
        return [int(getattr(p, h)), int(getattr(p, w))]
    raw = getattr(p, name)
    if isinstance(raw, int):  # Pooling's fields are single values
        values = [int(raw)] if p.HasField(name) else []
    else:
        values = [int(v) for v in raw]
    if not values:
        if name == "kernel_size":
            raise layer.error("kernel_size (or kernel_h and kernel_w) is required")
        return [default] * n
    if len(values) == 1:
        return values * n
    if len(values) != n:
        raise layer.error(f"{name} has {len(values)} values for {n} spatial axes")
    return values


def convolution(layer: Layer) -> list[Tensor]:
    p = layer.param.convolution_param
    dims = layer.dims()
    if p.axis != 1 or len(dims) < 3:
        raise layer.error("only channel axis 1 of an N-D (N >= 3) bottom is supported")
    n = len(dims) - 2
    kernel = _spatial(layer, p, "kernel_size", 0, n)
    pads = _spatial(layer, p, "pad", 0, n)
    strides = _spatial(layer, p, "stride", 1, n)
    dilations = [int(d) for d in p.dilation] or [1]
    dilations = dilations * n if len(dilations) == 1 else dilations
    if len(dilations) != n:
        raise layer.error(f"dilation has {len(dilations)} values for {n} spatial axes")
    channels, group, out = dims[1], int(p.group), int(p.num_output)
    if not isinstance(channels, int) or group < 1 or channels % group or out % group:
        raise layer.error(f"group {group} does not divide the {channels} input and {out} "
                          "output channels")
    deconv = layer.type == "Deconvolution"
    shape = [channels, out // group, *kernel] if deconv else [out, channels // group, *kernel]
    w = layer.const("weight", layer.blob(0, "weights", shape))
    b = layer.const("bias", layer.blob(1, "bias", [out])) if p.bias_term else None
    attrs: dict[str, Any] = dict(kernel_shape=kernel, pads=pads + pads, strides=strides,
                                 dilations=dilations, group=group)
    return [layer.op("ConvTranspose" if deconv else "Conv", layer.x(), w, b, **attrs)]


def pooling(layer: Layer) -> list[Tensor]:
    p = layer.param.pooling_param
    enum = type(p).DESCRIPTOR.enum_types_by_name["PoolMethod"]
    method = enum.values_by_number[p.pool].name
    if method == "STOCHASTIC":
        raise layer.error("STOCHASTIC pooling is random (training only); not supported")
    dims = layer.dims()
    if p.global_pooling:
        if p.HasField("kernel_size") or p.HasField("kernel_h"):
            raise layer.error("global_pooling takes no kernel size")
        return [layer.op("GlobalMaxPool" if method == "MAX" else "GlobalAveragePool",
                         layer.x())]
    n = len(dims) - 2
    if n != 2:
        raise layer.error(f"Caffe pools 4-D blobs; this bottom is {len(dims)}-D")
    kernel = _spatial(layer, p, "kernel_size", 0, n)
    pads = _spatial(layer, p, "pad", 0, n)
    strides = _spatial(layer, p, "stride", 1, n)
    if any(pd >= k for pd, k in zip(pads, kernel, strict=True)):
        raise layer.error(f"pad {pads} must be smaller than the kernel {kernel}")
    attrs: dict[str, Any] = dict(kernel_shape=kernel, pads=pads + pads, strides=strides,
                                 ceil_mode=0 if p.round_mode == 1 else 1)
    if method == "MAX":
        return [layer.op("MaxPool", layer.x(), **attrs)]
    return [layer.op("AveragePool", layer.x(), count_include_pad=1, **attrs)]


# ----------------------------------------------------------------------------- normalization


def batch_norm(layer: Layer) -> list[Tensor]:
    p = layer.param.batch_norm_param
    dims = layer.dims()
    if len(dims) < 2 or not isinstance(dims[1], int):
        raise layer.error(f"needs a bottom with a static channel axis, got {list(dims)}")
    c = dims[1]
    eps = float(np.float32(p.eps))
    global_stats = p.use_global_stats if p.HasField("use_global_stats") else True
    if not global_stats:
        return [_batch_stats_norm(layer, len(dims), eps)]
    mean = layer.blob(0, "mean", [c]).astype(np.float64)
    var = layer.blob(1, "variance", [c]).astype(np.float64)
    f = float(layer.blob(2, "moving-average factor", [1])[0]) if len(layer.blobs) > 2 else 1.0
    scale = 0.0 if f == 0 else 1.0 / f
    ones = np.ones(c, np.float32)
    return [layer.op("BatchNormalization", layer.x(), layer.const("scale", ones),
                     layer.const("bias", np.zeros(c, np.float32)),
                     layer.const("mean", (mean * scale).astype(np.float32)),
                     layer.const("var", (var * scale).astype(np.float32)), epsilon=eps)]


def _batch_stats_norm(layer: Layer, rank: int, eps: float) -> Tensor:
    """``use_global_stats: false``: normalize by the batch's mean and biased variance."""
    axes = np.array([0, *range(2, rank)], np.int64)
    mean = layer.aux("mean", "ReduceMean", layer.x(), axes, keepdims=1)
    centered = layer.aux("center", "Sub", layer.x(), mean)
    var = layer.aux("var", "ReduceMean", layer.aux("square", "Mul", centered, centered), axes,
                    keepdims=1)
    std = layer.aux("std", "Sqrt", layer.aux("var_eps", "Add", var, np.float32(eps)))
    return layer.op("Div", centered, std)


def scale(layer: Layer) -> list[Tensor]:
    """Scale (``x * s (+ b)``) and Bias (``x + b``); ``s`` is blob 0 or the second bottom."""
    is_bias = layer.type == "Bias"
    p = layer.param.bias_param if is_bias else layer.param.scale_param
    dims = layer.dims()
    axis = layer.axis(int(p.axis), len(dims))
    two = len(layer.bottoms) > 1
    if two:
        count = layer.x(1).rank or 0
    else:
        count = len(dims) - axis if p.num_axes == -1 else int(p.num_axes)
    if count < 0 or axis + count > len(dims):
        raise layer.error(f"the {'bias' if is_bias else 'scale'} covers {count} axes, which "
                          f"do not fit a {len(dims)}-D bottom from axis {axis}")
    pad = (1,) * (len(dims) - axis - count)
    has_bias = is_bias or p.bias_term
    if not two and axis == 1 and count == 1:  # Caffe's per-channel affine after BatchNorm
        c = _static(layer, dims[1:2], "channel")[0]
        s = np.ones(c, np.float32) if is_bias else layer.blob(0, "scale", [c])
        b = layer.blob(0 if is_bias else 1, "bias", [c]) if has_bias else np.zeros(c,
                                                                                 np.float32)
        return [layer.op("BatchNormalization", layer.x(), layer.const("scale", s),
                         layer.const("bias", b), layer.const("mean", np.zeros(c, np.float32)),
                         layer.const("var", np.ones(c, np.float32)), epsilon=0.0)]

    def learned(k: int, what: str) -> Tensor:
        shape = _static(layer, dims[axis:axis + count], what)
        return layer.const(what, layer.blob(k, what, shape).reshape(*shape, *pad))

    def operand(what: str) -> Tensor:
        if not two:
            return learned(0, what)
        if not pad:
            return layer.x(1)
        return layer.aux(f"{what}_shape", "Reshape", layer.x(1),
                         np.array([0] * count + list(pad), np.int64))

    if is_bias:
        return [layer.op("Add", layer.x(), operand("bias"))]
    y = layer.x()
    if not has_bias:
        return [layer.op("Mul", y, operand("scale"))]
    y = layer.aux("mul", "Mul", y, operand("scale"))
    return [layer.op("Add", y, learned(0 if two else 1, "bias"))]


# ----------------------------------------------------------------------------- dense, activations


def inner_product(layer: Layer) -> list[Tensor]:
    p = layer.param.inner_product_param
    dims = layer.dims()
    axis = layer.axis(int(p.axis), len(dims))
    k = int(np.prod(_static(layer, dims[axis:], "flattened")))
    n = int(p.num_output)
    w = layer.blob(0, "weights", [k, n] if p.transpose else [n, k])
    b = layer.const("bias", layer.blob(1, "bias", [n])) if p.bias_term else None
    if axis == 1:
        x = layer.x() if len(dims) == 2 else layer.aux("flatten", "Flatten", layer.x(), axis=1)
        return [layer.op("Gemm", x, layer.const("weight", w), b, transB=0 if p.transpose else 1)]
    x = layer.aux("flatten", "Reshape", layer.x(), np.array([0] * axis + [k], np.int64))
    wt = layer.const("weight", w if p.transpose else w.T)
    if b is None:
        return [layer.op("MatMul", x, wt)]
    return [layer.op("Add", layer.aux("matmul", "MatMul", x, wt), b)]


def relu(layer: Layer) -> list[Tensor]:
    slope = float(np.float32(layer.param.relu_param.negative_slope))
    if slope:
        return [layer.op("LeakyRelu", layer.x(), alpha=slope)]
    return [layer.op("Relu", layer.x())]


def prelu(layer: Layer) -> list[Tensor]:
    dims = layer.dims()
    shared = layer.param.prelu_param.channel_shared
    if shared:
        slope = layer.blob(0, "slope", [1]).reshape(())
    else:
        if len(dims) < 2 or not isinstance(dims[1], int):
            raise layer.error("needs a static channel axis")
        slope = layer.blob(0, "slope", [dims[1]]).reshape(dims[1], *(1,) * (len(dims) - 2))
    return [layer.op("PRelu", layer.x(), layer.const("slope", slope))]


def unary(op: str) -> Converter:
    def convert(layer: Layer) -> list[Tensor]:
        return [layer.op(op, layer.x())]
    return convert


def softmax(layer: Layer) -> list[Tensor]:
    axis = layer.axis(int(layer.param.softmax_param.axis), len(layer.dims()))
    return [layer.op("Softmax", layer.x(), axis=axis)]


def dropout(layer: Layer) -> list[Tensor]:
    ratio = float(np.float32(layer.param.dropout_param.dropout_ratio))
    return [layer.op("Dropout", layer.x(), np.float32(ratio))]


# ----------------------------------------------------------------------------- shapes, joins


def eltwise(layer: Layer) -> list[Tensor]:
    p = layer.param.eltwise_param
    xs = list(layer.bottoms)
    if len(xs) < 2:
        raise layer.error(f"needs at least 2 bottoms, has {len(xs)}")
    coeffs = [float(np.float32(c)) for c in p.coeff]
    op = {0: "Mul", 1: "Add", 2: "Max"}[int(p.operation)]
    if coeffs:
        if op != "Add" or len(coeffs) != len(xs):
            raise layer.error("coeff needs operation SUM and one value per bottom")
        xs = [x if c == 1.0 else layer.aux(f"coeff{k}", "Mul", x, np.float32(c))
              for k, (x, c) in enumerate(zip(xs, coeffs, strict=True))]
    if op == "Max":
        return [layer.op("Max", *xs)]
    acc = xs[0]
    for k, x in enumerate(xs[1:], 1):
        acc = layer.op(op, acc, x) if k == len(xs) - 1 else layer.aux(f"{op.lower()}{k}", op,
                                                                       acc, x)
    return [acc]


def concat(layer: Layer) -> list[Tensor]:
    p = layer.param.concat_param
    rank = len(layer.dims())
    axis = layer.axis(int(p.axis) if p.HasField("axis") or not p.HasField("concat_dim")
                      else int(p.concat_dim), rank)
    if len(layer.bottoms) == 1:
        return [layer.op("Identity", layer.x())]
    return [layer.op("Concat", *layer.bottoms, axis=axis)]


def slice_(layer: Layer) -> list[Tensor]:
    p = layer.param.slice_param
    dims = layer.dims()
    axis = layer.axis(int(p.axis) if p.HasField("axis") or not p.HasField("slice_dim")
                      else int(p.slice_dim), len(dims))
    size = _static(layer, [dims[axis]], "sliced")[0]
    points = [int(v) for v in p.slice_point]
    count = len(layer.tops)
    if points:
        if len(points) != count - 1 or points != sorted(set(points)) or not (
                0 < points[0] and points[-1] < size):
            raise layer.error(f"slice_point {points} must be {count - 1} increasing points "
                              f"inside the axis of size {size}")
        bounds = [0, *points, size]
    else:
        if size % count:
            raise layer.error(f"axis of size {size} does not split into {count} equal parts")
        bounds = [size // count * k for k in range(count + 1)]
    sizes = np.array([b - a for a, b in zip(bounds, bounds[1:], strict=False)], np.int64)
    outs = layer.g.op("Split", layer.x(), sizes, name=layer.name, outputs=list(layer.tops),
                      axis=axis)
    return list(outs)


def flatten(layer: Layer) -> list[Tensor]:
    p = layer.param.flatten_param
    dims = layer.dims()
    axis = layer.axis(int(p.axis), len(dims))
    end = layer.axis(int(p.end_axis), len(dims))
    if end < axis:
        raise layer.error(f"end_axis {p.end_axis} comes before axis {p.axis}")
    tail = _static(layer, dims[end + 1:], "trailing")
    target = [0] * axis + [-1] + tail
    return [layer.op("Reshape", layer.x(), np.array(target, np.int64))]


def reshape(layer: Layer) -> list[Tensor]:
    p = layer.param.reshape_param
    dims = layer.dims()
    axis = layer.axis(int(p.axis), len(dims), "end")
    count = len(dims) - axis if p.num_axes == -1 else int(p.num_axes)
    if count < 0 or axis + count > len(dims):
        raise layer.error(f"num_axes {p.num_axes} does not fit a {len(dims)}-D bottom")
    shape = [int(d) for d in p.shape.dim]
    if sum(d == -1 for d in shape) > 1 or any(d < -1 for d in shape):
        raise layer.error(f"shape {shape}: at most one -1, no other negative dims")
    rest = dims[axis + count:]
    tail = [0] * len(rest) if len(shape) == count else _static(layer, rest, "trailing")
    target = [0] * axis + shape + tail
    return [layer.op("Reshape", layer.x(), np.array(target, np.int64))]


CONVERTERS: dict[str, Converter] = {
    "Convolution": convolution, "Deconvolution": convolution, "Pooling": pooling,
    "BatchNorm": batch_norm, "Scale": scale, "Bias": scale, "InnerProduct": inner_product,
    "ReLU": relu, "PReLU": prelu, "Sigmoid": unary("Sigmoid"), "TanH": unary("Tanh"),
    "Softmax": softmax, "Dropout": dropout, "Eltwise": eltwise, "Concat": concat,
    "Slice": slice_, "Flatten": flatten, "Reshape": reshape,
}
"""Layer type -> converter. Input layers are read by ``gerules.frontends.caffe``."""
