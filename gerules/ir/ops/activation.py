"""Activation functions (ai.onnx) and the activation table the fused ``ge`` ops share.

Invariants:
- ``ACTIVATIONS[name](x, attrs)`` computes exactly what the ai.onnx op ``name`` computes with
  the given attributes (absent ones take the ONNX defaults), so a fused op and its unfused
  graph agree; the unary schemas here call the same functions.
- float16 operands are computed in float32 and rounded once to float16.
- Clip-6 reads its bounds from attributes, Clip-11+ from optional inputs; ``min > max``
  gives ``max`` everywhere (the spec's rule).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ...errors import KernelError, ShapeError
from ..dtypes import OP_FLOATS
from ..graph import TensorType
from ..registry import ELEMENTWISE, INPLACE, Call
from . import _jit, _special
from ._common import (
    Arrays,
    Types,
    at,
    attr,
    binary,
    broadcast,
    need,
    out_elems,
    same_dtype,
    schema,
    scratch,
    unary,
    widen,
    with_step,
)

FLOAT = OP_FLOATS
SQRT_2_OVER_PI = float(np.sqrt(2.0 / np.pi))


RELU_BLOCK = 1 << 17  # elements per np.maximum call against a block of zeros
_ZEROS: dict[np.dtype, np.ndarray] = {}


def relu(x: np.ndarray, out: np.ndarray | None = None, step: object = None) -> np.ndarray:
    """max(x, 0), into ``out`` when given (which may be ``x``).

    A contiguous float array is taken in blocks against a read-only block of zeros: NumPy's
    ``maximum`` is vectorised for two arrays but not for an array and a scalar (3x slower
    on a ResNet activation). From a runtime ``step``'s second call with the ``jit`` extra,
    float32/64 runs as one compiled loop (``_jit.relu``: the same values, without reading
    the zeros)."""
    if x.dtype.kind != "f" or not x.flags.c_contiguous or x.size < 1024:
        return np.asarray(np.maximum(x, x.dtype.type(0), out=out))
    y = np.empty_like(x) if out is None else out
    if not y.flags.c_contiguous or y.shape != x.shape:
        return np.asarray(np.maximum(x, x.dtype.type(0), out=out))
    if (step is not None and x.size >= _jit.MIN_ELEMENTS and x.dtype == y.dtype
            and x.dtype != np.float16 and _jit.fits(x, y)):
        loop = _jit.loop("relu", step)
        if loop is not None and loop(x.reshape(-1), y.reshape(-1), x.dtype.type(0)):
            return y
    zeros = _ZEROS.get(x.dtype)
    if zeros is None:
        zeros = _ZEROS[x.dtype] = np.zeros(RELU_BLOCK, x.dtype)
        zeros.flags.writeable = False
    xf, yf = x.reshape(-1), y.reshape(-1)
    for start in range(0, xf.size, RELU_BLOCK):
        stop = min(xf.size, start + RELU_BLOCK)
        np.maximum(xf[start:stop], zeros[:stop - start], out=yf[start:stop])
    return y


def leaky_relu(x: np.ndarray, alpha: float = 0.01) -> np.ndarray:
    return np.where(x >= 0, x, x * x.dtype.type(alpha))


def sigmoid(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    return _special.sigmoid(x, out)


def hard_sigmoid(x: np.ndarray, alpha: float = 0.2, beta: float = 0.5) -> np.ndarray:
    return np.asarray(np.clip(x * x.dtype.type(alpha) + x.dtype.type(beta), 0, 1))


def hard_swish(x: np.ndarray) -> np.ndarray:
    return np.asarray(x * hard_sigmoid(x, 1.0 / 6.0, 0.5))


def gelu(x: np.ndarray, approximate: str = "none", out: np.ndarray | None = None,
         step: object = None) -> np.ndarray:
    """x * (1 + erf(x / sqrt 2)) / 2 (or the tanh form), into ``out`` (may be ``x``);
    ``step``: what a runtime step keeps across runs, for ``_jit``'s loops (float32)."""
    f = x.dtype.type
    if approximate == "tanh":
        inner = f(SQRT_2_OVER_PI) * (x + f(0.044715) * x * x * x)
        y: np.ndarray = np.multiply(f(0.5) * x, 1 + np.tanh(inner), out=out)
        return y
    if approximate != "none":
        raise ShapeError(f"Gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    if x.dtype == np.float32 and (out is None or out.dtype == np.float32):
        return _special.gelu32(x, out, step)
    t = scratch(x.shape, x.dtype)  # (1 + erf(x / sqrt 2)) / 2, then times x
    np.divide(x, f(np.sqrt(2.0)), out=t)
    _special.erf(t, out=t)
    t += f(1)
    t *= f(0.5)
    y = np.multiply(x, t, out=out)
    return y


def softplus(x: np.ndarray) -> np.ndarray:
    return np.asarray(np.logaddexp(x, x.dtype.type(0)))


def elu(x: np.ndarray, alpha: float = 1.0) -> np.ndarray:
    return np.where(x > 0, x, x.dtype.type(alpha) * np.expm1(np.minimum(x, 0)))


def selu(x: np.ndarray, alpha: float = 1.67326319217681884765625,
         gamma: float = 1.05070102214813232421875) -> np.ndarray:
    return np.asarray(x.dtype.type(gamma) * elu(x, alpha))


def celu(x: np.ndarray, alpha: float = 1.0) -> np.ndarray:
    a = x.dtype.type(alpha)
    return np.asarray(np.maximum(x, 0) + np.minimum(0, a * np.expm1(x / a)))


def mish(x: np.ndarray) -> np.ndarray:
    return np.asarray(x * np.tanh(softplus(x)))


def thresholded_relu(x: np.ndarray, alpha: float = 1.0) -> np.ndarray:
    return np.where(x > alpha, x, x.dtype.type(0))


def shrink(x: np.ndarray, bias: float = 0.0, lambd: float = 0.5) -> np.ndarray:
    out = np.where(x < -lambd, x + bias, np.where(x > lambd, x - bias, 0))
    return out.astype(x.dtype)


def swish(x: np.ndarray, alpha: float = 1.0) -> np.ndarray:
    return np.asarray(x * sigmoid(x * x.dtype.type(alpha)))


def swiglu(a: np.ndarray, b: np.ndarray, alpha: float = 1.0) -> np.ndarray:
    return np.asarray(swish(widen(a), alpha) * widen(b))


def clip(x: np.ndarray, lo: Any = None, hi: Any = None, out: np.ndarray | None = None
         ) -> np.ndarray:
    """``min(max(x, lo), hi)`` (a missing bound does not clamp), into ``out`` when given
    (which may be ``x``). Scalar bounds go to ``np.clip`` as scalars of x's dtype, the
    missing one as the dtype's extreme: its one SIMD pass, where ``maximum`` / ``minimum``
    against a scalar take several times as long."""
    lo_s, hi_s = scalar_bound(lo, x.dtype, False), scalar_bound(hi, x.dtype, True)
    if lo_s is None or hi_s is None:  # a bound that is no scalar: broadcast it
        y = x if lo is None else np.maximum(x, np.asarray(lo, dtype=x.dtype))
        y = y if hi is None else np.minimum(y, np.asarray(hi, dtype=x.dtype))
        if out is None:
            return np.asarray(y)
        np.copyto(out, y)
        return out
    return np.asarray(np.clip(x, lo_s, hi_s, out=out))


def scalar_bound(bound: Any, dtype: np.dtype, upper: bool) -> Any:
    """A Clip bound as a scalar of ``dtype`` (the dtype's extreme when absent), or ``None``
    when it holds more than one value."""
    if bound is None:
        if dtype.kind == "f":
            return dtype.type(np.inf if upper else -np.inf)
        info = np.iinfo(dtype) if dtype.kind in "iu" else None
        return None if info is None else dtype.type(info.max if upper else info.min)
    value = np.asarray(bound, dtype=dtype)
    return value.reshape(()).item() if value.size == 1 else None


def _fused_clip(x: np.ndarray, a: Mapping[str, Any]) -> np.ndarray:
    return clip(x, a.get("clip_min"), a.get("clip_max"))


def _opt(a: Mapping[str, Any], key: str, default: float) -> float:
    value = a.get(key)
    return default if value is None else float(value)


# name -> fn(x, fused-op attributes); the fused ops' "activation" attribute picks one.
ACTIVATIONS: dict[str, Callable[[np.ndarray, Mapping[str, Any]], np.ndarray]] = {
    "": lambda x, a: x,
    "Relu": lambda x, a: relu(x),
    "Clip": _fused_clip,
    "LeakyRelu": lambda x, a: leaky_relu(x, _opt(a, "alpha", 0.01)),
    "Sigmoid": lambda x, a: sigmoid(x),
    "HardSigmoid": lambda x, a: hard_sigmoid(x, _opt(a, "alpha", 0.2), _opt(a, "beta", 0.5)),
    "HardSwish": lambda x, a: hard_swish(x),
    "Tanh": lambda x, a: np.tanh(x),
    "Gelu": lambda x, a: gelu(x, str(a.get("gelu_approximate") or "none")),
}
# Rough vector-unit operations per element for the cost model.
ACTIVATION_FLOPS = {"": 0, "Relu": 1, "Clip": 2, "LeakyRelu": 2, "Sigmoid": 4,
                    "HardSigmoid": 3, "HardSwish": 4, "Tanh": 4, "Gelu": 8}
# GELU's exact form evaluates erf (a longer polynomial than tanh): the fast form is cheaper.
GELU_FLOPS = {"none": 12, "tanh": 8}


def gelu_flops(approximate: object) -> int:
    return GELU_FLOPS.get(str(approximate), GELU_FLOPS["none"])


def activate(y: np.ndarray, attrs: Mapping[str, Any]) -> np.ndarray:
    """Apply a fused op's ``activation`` in float32 (for float16) and keep ``y``'s dtype."""
    name = str(attrs.get("activation", ""))
    if name not in ACTIVATIONS:
        known = ", ".join(repr(k) for k in ACTIVATIONS)
        raise ShapeError(f"unknown activation {name!r} (known: {known})")
    if not name:
        return y
    with np.errstate(all="ignore"):
        return np.asarray(ACTIVATIONS[name](widen(y), attrs)).astype(y.dtype, copy=False)


def activate_into(y: np.ndarray, attrs: Mapping[str, Any]) -> np.ndarray:
    """``activate`` written back into ``y`` (Relu, Clip without any temporary); returns
    ``y``."""
    name = check_activation(attrs)
    if name == "Relu":  # a step's Call keeps its attrs
        relu(y, out=y, step=attrs)
    elif name == "Gelu" and y.dtype != np.float16:  # a step's Call keeps its attrs
        gelu(y, str(attrs.get("gelu_approximate") or "none"), out=y, step=attrs)
    elif name == "Clip" and y.dtype != np.float16:  # one pass in place
        clip(y, attrs.get("clip_min"), attrs.get("clip_max"), out=y)
    elif name:
        y[...] = activate(y, attrs)
    return y


def check_activation(attrs: Mapping[str, Any]) -> str:
    name = str(attrs.get("activation", ""))
    if name not in ACTIVATIONS:
        raise ShapeError(f"unknown activation {name!r} (known: {', '.join(ACTIVATIONS)})")
    return name


# ----------------------------------------------------------------------------- Clip, PRelu


def _clip6_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    x = need(at(inputs, 0), "Clip")
    return [clip(x, call.attrs.get("min"), call.attrs.get("max"))]


def _clip11_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    x = need(at(inputs, 0), "Clip")
    return [clip(x, at(inputs, 1), at(inputs, 2))]


def _clip6_out(inputs: Arrays, call: Call, outs: Sequence[np.ndarray]) -> None:
    x = need(at(inputs, 0), "Clip")
    _check_out(x, outs[0])
    clip(x, call.attrs.get("min"), call.attrs.get("max"), out=outs[0])


def _clip11_out(inputs: Arrays, call: Call, outs: Sequence[np.ndarray]) -> None:
    x = need(at(inputs, 0), "Clip")
    _check_out(x, outs[0])
    clip(x, at(inputs, 1), at(inputs, 2), out=outs[0])


def _check_out(x: np.ndarray, out: np.ndarray) -> None:
    if out.shape != x.shape or out.dtype != x.dtype:
        raise KernelError(f"Clip: the output is {out.dtype.name}{list(out.shape)}, the input "
                          f"{x.dtype.name}{list(x.shape)}")


def _same_as_x(types: Types, _c: object, call: Call) -> list[TensorType]:
    x = need(at(types, 0), "Clip")
    for i in (1, 2):
        bound = at(types, i)
        if bound is not None and bound.dtype != x.dtype:
            raise ShapeError(f"Clip: bound dtype {bound.dtype} differs from input {x.dtype}")
    return [x]


def _prelu_infer(types: Types, _c: object, call: Call) -> list[TensorType]:
    x, slope = need(at(types, 0), "PRelu"), need(at(types, 1), "PRelu", "slope")
    return [TensorType(same_dtype([x, slope], "PRelu"), broadcast(x.shape, slope.shape))]


def _prelu_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    x, slope = need(at(inputs, 0), "PRelu"), need(at(inputs, 1), "PRelu", "slope")
    return [np.where(x >= 0, x, x * slope).astype(x.dtype)]


CLIP_ATTRS = [attr("min", "float", -3.4028234663852886e38),
              attr("max", "float", 3.4028234663852886e38)]

SCHEMAS = [
    with_step(unary("Relu", 6, relu, into=relu, doc="rectified linear unit, Y = max(X, 0)"),
              relu, frozenset({"float32", "float64"})),
    unary("LeakyRelu", 6, leaky_relu, attrs=[attr("alpha", "float", 0.01)], flops_per_elem=2,
          doc="Y = X if X >= 0 else alpha * X"),
    schema("PRelu", 7, "X slope", "Y", _prelu_infer, _prelu_kernel,
           traits={ELEMENTWISE, INPLACE}, flops=out_elems(2),
           doc="Y = X if X >= 0 else slope * X (slope broadcasts to X)"),
    unary("Sigmoid", 6, sigmoid, into=sigmoid, dtypes=FLOAT, flops_per_elem=4,
          doc="Y = 1 / (1 + e^-X)"),
    unary("HardSigmoid", 6, hard_sigmoid, dtypes=FLOAT, flops_per_elem=3,
          attrs=[attr("alpha", "float", 0.2), attr("beta", "float", 0.5)],
          doc="Y = clip(alpha * X + beta, 0, 1)"),
    unary("HardSwish", 14, hard_swish, dtypes=FLOAT, flops_per_elem=4,
          doc="Y = X * HardSigmoid(X; 1/6, 1/2)"),
    unary("Tanh", 6, np.tanh, dtypes=FLOAT, flops_per_elem=4, doc="hyperbolic tangent"),
    unary("Gelu", 20, gelu, dtypes=FLOAT, flops_per_elem=8,
          attrs=[attr("approximate", "string", "none")],
          doc="Gaussian error linear unit, exact (erf) or tanh approximation"),
    unary("Softplus", 1, softplus, dtypes=FLOAT, flops_per_elem=6, doc="Y = log(1 + e^X)"),
    unary("Softsign", 1, lambda x: x / (1 + np.abs(x)), dtypes=FLOAT, flops_per_elem=3,
          doc="Y = X / (1 + |X|)"),
    unary("Elu", 6, elu, dtypes=FLOAT, flops_per_elem=4, attrs=[attr("alpha", "float", 1.0)],
          doc="Y = X if X > 0 else alpha * (e^X - 1)"),
    unary("Selu", 6, selu, dtypes=FLOAT, flops_per_elem=5,
          attrs=[attr("alpha", "float", 1.67326319217681884765625),
                 attr("gamma", "float", 1.05070102214813232421875)],
          doc="scaled exponential linear unit"),
    unary("Celu", 12, celu, dtypes=FLOAT, flops_per_elem=5, attrs=[attr("alpha", "float", 1.0)],
          doc="continuously differentiable exponential linear unit"),
    unary("Mish", 18, mish, dtypes=FLOAT, flops_per_elem=10, doc="Y = X * tanh(softplus(X))"),
    unary("ThresholdedRelu", 10, thresholded_relu, dtypes=FLOAT,
          attrs=[attr("alpha", "float", 1.0)], doc="Y = X if X > alpha else 0"),
    unary("Shrink", 9, shrink, attrs=[attr("bias", "float", 0.0), attr("lambd", "float", 0.5)],
          doc="soft shrinkage around [-lambd, lambd]"),
    binary("SwiGLU", 28, swiglu,
           dtypes=FLOAT, attrs=[attr("alpha", "float", 1.0)],
           doc="Y = A * sigmoid(alpha * A) * B (A and B of one shape)"),
    unary("Swish", 24, swish, dtypes=FLOAT, flops_per_elem=5,
          attrs=[attr("alpha", "float", 1.0)], doc="Y = X * sigmoid(alpha * X)"),
    schema("Clip", 6, "input", "output", _same_as_x, _clip6_kernel, attrs=CLIP_ATTRS,
           traits={ELEMENTWISE, INPLACE}, flops=out_elems(2), kernel_out=_clip6_out,
           doc="clamp to [min, max] given as attributes (opset 6-10)"),
    schema("Clip", 11, "input min? max?", "output", _same_as_x, _clip11_kernel,
           traits={ELEMENTWISE, INPLACE}, flops=out_elems(2), kernel_out=_clip11_out,
           doc="clamp to [min, max] given as optional scalar inputs (opset 11+)"),
]
