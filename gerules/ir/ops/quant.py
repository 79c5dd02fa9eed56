"""Linear quantization (ai.onnx): QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear.

Invariants:
- Scale and zero point are a scalar (per tensor), 1-D along ``axis`` (per axis) or, with
  ``block_size > 0``, ``x``'s shape with ``axis`` divided into blocks (``expand`` repeats
  them; a last short block is cut).
- Quantize: ``x / scale`` (in ``x``'s type, or ``precision``'s), then for integer targets
  round half to even, add the zero point and clip to the type's range; float8 targets
  saturate unless ``saturate=0`` (their zero point is 0); float4 adds the zero point and
  converts. The target type is the zero point's, else ``output_dtype``, else uint8.
- Dequantize: ``(x - zero_point) * scale`` in float32, in the scale's type (or
  ``output_dtype``).
- DynamicQuantizeLinear: uint8 with scale ``(max(x, 0) - min(x, 0)) / 255`` and zero point
  ``clip(round(-min / scale), 0, 255)``.
- QLinearMatMul / QLinearConv: the integer product of the zero-point-shifted operands, scaled
  by ``a_scale * b_scale / y_scale`` (per output channel for a 1-D ``w_scale``), rounded half
  to even, shifted by ``y_zero_point`` and clipped to its type. ConvInteger gives the int32
  convolution of the shifted operands.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from ...errors import ShapeError
from .. import dtypes
from ..graph import TensorType
from ..registry import Call, OpSchema
from ._cast import FLOAT8, cast
from ._common import Arrays, Types, at, attr, iattr, need, norm_axis, schema
from .conv import CONV_ATTRS, conv, conv_infer
from .linalg import matmul_shape

INT_RANGES = {"uint8": (0, 255), "int8": (-128, 127), "uint16": (0, 65535),
              "int16": (-32768, 32767), "uint4": (0, 15), "int4": (-8, 7), "uint2": (0, 3),
              "int2": (-2, 1)}
QUANT_TYPES = frozenset(INT_RANGES) | FLOAT8 | {"float4_e2m1fn"}


def expand(value: np.ndarray, shape: tuple[int, ...], axis: int, block: int) -> np.ndarray:
    """``value`` (scale or zero point) made broadcastable to ``shape``."""
    if value.ndim == 0 or value.size == 1:
        return value.reshape(())
    a = norm_axis(axis, len(shape))
    if not block:
        if value.ndim != 1 or value.shape[0] != shape[a]:
            raise ShapeError(f"a per-axis scale needs {shape[a]} values along axis {a}, got "
                             f"shape {list(value.shape)}")
        return value.reshape([-1 if i == a else 1 for i in range(len(shape))])
    if block < 0:
        raise ShapeError(f"block_size must be positive, got {block}")
    return np.repeat(value, block, axis=a).take(range(shape[a]), axis=a)


def _quant_dtype(zero: TensorType | None, call: Call) -> str:
    code = iattr(call, "output_dtype")
    dtype = zero.dtype if zero is not None else (dtypes.from_onnx(code) if code else "uint8")
    if code and dtypes.from_onnx(code) != dtype:
        raise ShapeError(f"QuantizeLinear: output_dtype {dtypes.from_onnx(code)} differs from "
                         f"the zero point's {dtype}")
    if dtype not in QUANT_TYPES:
        raise ShapeError(f"QuantizeLinear: {dtype} is not a quantized type")
    return dtype


def _q_infer(types: Types, _c: object, call: Call) -> list[TensorType]:
    x = need(at(types, 0), "QuantizeLinear")
    need(at(types, 1), "QuantizeLinear", "y_scale")
    return [TensorType(_quant_dtype(at(types, 2), call), x.shape)]


def _q_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    x, scale = need(at(inputs, 0), "QuantizeLinear"), need(at(inputs, 1), "QuantizeLinear")
    zero = at(inputs, 2)
    axis, block = iattr(call, "axis", 1), iattr(call, "block_size")
    dtype = _quant_dtype(None if zero is None else TensorType(zero.dtype.name, None), call)
    s = expand(scale, x.shape, axis, block)
    precision = iattr(call, "precision")
    if precision:
        work = dtypes.to_numpy(dtypes.from_onnx(precision))
        q = x.astype(work) / s.astype(work)
    else:
        q = x / s
    z = None if zero is None else expand(zero, x.shape, axis, block)
    if dtype in INT_RANGES:
        lo, hi = INT_RANGES[dtype]
        qi = np.rint(q.astype(np.float64)).astype(np.int64)
        if z is not None:
            qi = qi + z.astype(np.int64)
        return [cast(np.clip(qi, lo, hi), dtype)]
    if dtype in FLOAT8:
        return [cast(q, dtype, saturate=iattr(call, "saturate", 1))]
    if z is not None:
        q = q.astype(np.float32) + z.astype(np.float32)
    return [cast(q, dtype)]


def _dq_dtype(scale: TensorType, call: Call) -> str:
    code = iattr(call, "output_dtype")
    return dtypes.from_onnx(code) if code else scale.dtype


def _dq_infer(types: Types, _c: object, call: Call) -> list[TensorType]:
    x = need(at(types, 0), "DequantizeLinear")
    scale = need(at(types, 1), "DequantizeLinear", "x_scale")
    return [TensorType(_dq_dtype(scale, call), x.shape)]


def _dq_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    x, scale = need(at(inputs, 0), "DequantizeLinear"), need(at(inputs, 1), "DequantizeLinear")
    zero = at(inputs, 2)
    axis, block = iattr(call, "axis", 1), iattr(call, "block_size")
    dx = cast(x, "float32")
    if zero is not None and x.dtype.name not in FLOAT8:
        dx = dx - cast(expand(zero, x.shape, axis, block), "float32")
    y = dx * cast(expand(scale, x.shape, axis, block), "float32")
    return [cast(y, _dq_dtype(TensorType(scale.dtype.name, None), call))]


def _dyn_infer(types: Types, _c: object, call: Call) -> list[TensorType]:
    x = need(at(types, 0), "DynamicQuantizeLinear")
    return [TensorType("uint8", x.shape), TensorType("float32", ()),
            TensorType("uint8", ())][: max(1, call.num_outputs)]


def _dyn_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    x = need(at(inputs, 0), "DynamicQuantizeLinear").astype(np.float32)
    lo, hi = min(float(x.min(initial=0)), 0.0), max(float(x.max(initial=0)), 0.0)
    scale = np.float32((hi - lo) / 255) if hi > lo else np.float32(1)
    zero = np.clip(np.rint(-lo / scale), 0, 255)
    y = np.clip(np.rint(x / scale) + zero, 0, 255).astype(np.uint8)
    return [y, np.asarray(scale, np.float32), np.asarray(zero, np.uint8)][: call.num_outputs]


def _shifted(x: np.ndarray, zero: np.ndarray | None, axis: int = 0) -> np.ndarray:
    """``x - zero`` in float64 (exact for 8- and 16-bit values); a 1-D zero point runs along
    ``axis``."""
    out = x.astype(np.float64)
    if zero is None:
        return out
    z = zero.astype(np.float64)
    if z.ndim == 1 and z.size > 1:
        z = z.reshape([-1 if i == axis else 1 for i in range(x.ndim)])
    return out - z


def _requantize(acc: np.ndarray, factor: np.ndarray, zero: np.ndarray | None,
                like: np.dtype) -> np.ndarray:
    dtype = zero.dtype if zero is not None else like
    shift = 0 if zero is None else zero.astype(np.float64)
    q: NDArray[np.float64] = np.rint(acc * factor) + shift
    info = np.iinfo(dtype)
    return np.clip(q, info.min, info.max).astype(dtype)


def _qmm_infer(types: Types, _c: object, call: Call) -> list[TensorType]:
    a, b = need(at(types, 0), "QLinearMatMul"), need(at(types, 3), "QLinearMatMul", "b")
    zero = at(types, 7)
    return [TensorType(zero.dtype if zero else a.dtype, matmul_shape(a.shape, b.shape))]


def _qmm_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    a, sa, za, b, sb, zb, sy, zy = (at(inputs, i) for i in range(8))
    a, b = need(a, "QLinearMatMul"), need(b, "QLinearMatMul", "b")
    acc = np.matmul(_shifted(a, za), _shifted(b, zb))
    factor = (need(sa, "QLinearMatMul").astype(np.float64)
              * need(sb, "QLinearMatMul").astype(np.float64)
              / need(sy, "QLinearMatMul").astype(np.float64))
    return [_requantize(acc, factor, zy, a.dtype)]


def _qconv_infer(types: Types, _c: object, call: Call) -> list[TensorType]:
    x, w = need(at(types, 0), "QLinearConv"), need(at(types, 3), "QLinearConv", "w")
    out = conv_infer(TensorType("float32", x.shape), TensorType("float32", w.shape),
                     call.attrs, "QLinearConv")
    zero = at(types, 7)
    return [TensorType(zero.dtype if zero else x.dtype, out.shape)]


def _qconv_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    x, sx, zx, w, sw, zw, sy, zy, bias = (at(inputs, i) for i in range(9))
    x, w = need(x, "QLinearConv"), need(w, "QLinearConv", "w")
    acc = conv(_shifted(x, zx), _shifted(w, zw), None, call.attrs)
    if bias is not None:
        acc = acc + bias.astype(np.float64).reshape((1, -1) + (1,) * (acc.ndim - 2))
    ws = need(sw, "QLinearConv").astype(np.float64)
    if ws.ndim == 1 and ws.size > 1:
        ws = ws.reshape((1, -1) + (1,) * (acc.ndim - 2))
    factor = need(sx, "QLinearConv").astype(np.float64) * ws / need(sy, "QLinearConv")
    return [_requantize(acc, factor, zy, x.dtype)]


def _convint_infer(types: Types, _c: object, call: Call) -> list[TensorType]:
    x, w = need(at(types, 0), "ConvInteger"), need(at(types, 1), "ConvInteger", "w")
    out = conv_infer(TensorType("float32", x.shape), TensorType("float32", w.shape),
                     call.attrs, "ConvInteger")
    return [TensorType("int32", out.shape)]


def _convint_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    x, w = need(at(inputs, 0), "ConvInteger"), need(at(inputs, 1), "ConvInteger", "w")
    acc = conv(_shifted(x, at(inputs, 2)), _shifted(w, at(inputs, 3)), None, call.attrs)
    return [np.rint(acc).astype(np.int32)]


Q_ATTRS = [attr("axis", "int", 1), attr("saturate", "int", 1), attr("block_size", "int", 0),
           attr("output_dtype", "int", 0)]
DQ_ATTRS = [attr("axis", "int", 1), attr("block_size", "int", 0),
            attr("output_dtype", "int", 0)]


def _versions() -> list[OpSchema]:
    out = []
    for since in (10, 13, 19, 21, 23, 24, 25):
        q_attrs = Q_ATTRS + ([attr("precision", "int", 0)] if since >= 25 else [])
        out.append(schema("QuantizeLinear", since, "x y_scale y_zero_point?", "y", _q_infer,
                          _q_kernel, attrs=q_attrs, widen_low=False,
                          doc="saturating linear quantization: x / scale + zero_point"))
        out.append(schema("DequantizeLinear", since, "x x_scale x_zero_point?", "y", _dq_infer,
                          _dq_kernel, attrs=DQ_ATTRS, widen_low=False,
                          doc="(x - zero_point) * scale"))
    return out


SCHEMAS = [
    *_versions(),
    *(schema("QLinearMatMul", since, "a a_scale a_zero_point? b b_scale b_zero_point? "
             "y_scale y_zero_point?", "y", _qmm_infer, _qmm_kernel, unit="cube",
             widen_low=False, doc="quantized matmul: requantized (a - za) @ (b - zb)")
      for since in (10, 21)),
    schema("QLinearConv", 10, "x x_scale x_zero_point? w w_scale w_zero_point? y_scale "
           "y_zero_point? B?", "y", _qconv_infer, _qconv_kernel, attrs=CONV_ATTRS,
           unit="cube", widen_low=False, doc="quantized convolution, requantized"),
    schema("ConvInteger", 10, "x w x_zero_point? w_zero_point?", "y", _convint_infer,
           _convint_kernel, attrs=CONV_ATTRS, unit="cube", widen_low=False,
           doc="int32 convolution of zero-point-shifted integers"),
    schema("DynamicQuantizeLinear", 11, "x", "y y_scale y_zero_point", _dyn_infer,
           _dyn_kernel, doc="uint8 quantization with scale and zero point from x's range"),
]
