"""Data movement (ai.onnx): Concat, Split, Slice, Pad, Trilu, DepthToSpace, SpaceToDepth.

Invariants:
- Concat needs equal ranks and equal dims off the axis; the axis dim is the sum.
- Split sizes come from the ``split`` attribute (opset 2-12), the ``split`` input (13+) or,
  when absent, equal parts (the last one smaller with opset 18's ``num_outputs``).
- Slice clamps starts and ends into range the way the spec says (``[0, dim]`` for positive
  steps, ``[-1, dim - 1]`` for negative ones); a slice that takes a symbolic dim whole keeps
  the symbol.
- Pad accepts negative pads (they crop) and modes constant, reflect, edge and wrap.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...errors import ShapeError
from ..graph import Dim, Shape, TensorType
from ..registry import SHAPE_OP, AttrSpec, Call, InferFn, KernelFn, OpSchema
from ._common import (
    UNKNOWN,
    Arrays,
    Types,
    at,
    attr,
    floats,
    fmt,
    iattr,
    ints,
    lattr,
    need,
    norm_axes,
    norm_axis,
    same_dtype,
    sattr,
    schema,
    shape_math_unit,
)

MOVE = {SHAPE_OP}


# ----------------------------------------------------------------------------- Concat


def _concat_infer(types: Types, _c: object, call: Call) -> list[TensorType]:
    present = [t for t in types if t is not None]
    dtype = same_dtype(present, "Concat")
    shapes = [t.shape for t in present]
    if any(s is None for s in shapes):
        return [TensorType(dtype, None)]
    rank = len(shapes[0])  # type: ignore[arg-type]
    if any(len(s) != rank for s in shapes):  # type: ignore[arg-type]
        raise ShapeError(f"Concat: ranks differ: {', '.join(fmt(s) for s in shapes)}")
    axis = norm_axis(iattr(call, "axis"), rank)
    out: list[Dim] = []
    for i in range(rank):
        dims = [s[i] for s in shapes]  # type: ignore[index]
        out.append(_sum_dims(dims) if i == axis else _same_dim(dims, i, shapes))
    return [TensorType(dtype, tuple(out))]


def _sum_dims(dims: Sequence[Dim]) -> Dim:
    return sum(dims) if all(isinstance(d, int) for d in dims) else UNKNOWN  # type: ignore


def _same_dim(dims: Sequence[Dim], i: int, shapes: Sequence[Shape | None]) -> Dim:
    known = {d for d in dims if isinstance(d, int)}
    if len(known) > 1:
        raise ShapeError(f"Concat: dim {i} differs: {', '.join(fmt(s) for s in shapes)}")
    return known.pop() if known else dims[0]


def _concat_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    xs = [x for x in inputs if x is not None]
    axis = norm_axis(iattr(call, "axis"), xs[0].ndim)
    return [np.concatenate(xs, axis=axis)]


# ----------------------------------------------------------------------------- Split


def _split_sizes(dim: Dim, given: list[int] | None, call: Call) -> list[Dim]:
    n = call.num_outputs
    if given is not None:
        if len(given) != n:
            raise ShapeError(f"Split: {len(given)} sizes for {n} outputs")
        if isinstance(dim, int) and sum(given) != dim:
            raise ShapeError(f"Split: sizes {given} do not add up to {dim}")
        return list(given)
    if not isinstance(dim, int):
        return [UNKNOWN] * n
    parts = call.attrs.get("num_outputs")
    if parts is not None:
        if int(parts) != n:  # type: ignore[arg-type]
            raise ShapeError(f"Split: num_outputs={parts} but the node has {n} outputs")
        chunk = -(-dim // n)
        return [max(0, min(chunk, dim - chunk * i)) for i in range(n)]
    if dim % n:
        raise ShapeError(f"Split: dim {dim} does not split into {n} equal parts")
    return [dim // n] * n


def _split(from_input: bool) -> tuple[InferFn, KernelFn]:
    def given_of(values: Sequence[object], call: Call) -> list[int] | None:
        if not from_input:
            return lattr(call, "split") or None
        v = at(values, 1)
        return ints(v) if isinstance(v, np.ndarray) else None

    def infer(types: Types, consts: Arrays, call: Call) -> list[TensorType]:
        x = need(at(types, 0), "Split")
        if x.shape is None:
            return [TensorType(x.dtype, None)] * call.num_outputs
        axis = norm_axis(iattr(call, "axis"), len(x.shape))
        if from_input and at(types, 1) is not None and at(consts, 1) is None:
            sizes: list[Dim] = [UNKNOWN] * call.num_outputs
        else:
            sizes = _split_sizes(x.shape[axis], given_of(consts, call), call)
        return [TensorType(x.dtype, x.shape[:axis] + (s,) + x.shape[axis + 1:]) for s in sizes]

    def kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
        x = need(at(inputs, 0), "Split")
        axis = norm_axis(iattr(call, "axis"), x.ndim)
        sizes = _split_sizes(x.shape[axis], given_of(inputs, call), call)
        cuts = np.cumsum([int(s) for s in sizes])[:-1]
        return list(np.split(x, cuts, axis=axis))

    return infer, kernel


# ----------------------------------------------------------------------------- Slice


def _clamp(start: int, end: int, step: int, dim: int) -> tuple[int, int]:
    start = start + dim if start < 0 else start
    end = end + dim if end < 0 else end
    if step > 0:
        return min(max(start, 0), dim), min(max(end, 0), dim)
    return min(max(start, 0), dim - 1), min(max(end, -1), dim - 1)


def _slice_len(start: int, end: int, step: int) -> int:
    return max(0, -(-(end - start) // step)) if step > 0 else max(0, -(-(start - end) // -step))


def _slice_params(rank: int, starts: list[int], ends: list[int], axes: list[int] | None,
                  steps: list[int] | None) -> list[tuple[int, int, int, int]]:
    """``(axis, start, end, step)`` per sliced axis, unclamped."""
    axes = list(range(len(starts))) if axes is None else axes
    steps = [1] * len(starts) if steps is None else steps
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise ShapeError(f"Slice: starts, ends, axes and steps have different lengths "
                         f"({len(starts)}, {len(ends)}, {len(axes)}, {len(steps)})")
    if any(s == 0 for s in steps):
        raise ShapeError("Slice: steps must not be 0")
    axes = norm_axes(axes, rank)
    return list(zip(axes, starts, ends, steps, strict=True))


def _slice_dim(dim: Dim, start: int, end: int, step: int) -> Dim:
    if isinstance(dim, int):
        lo, hi = _clamp(start, end, step, dim)
        return _slice_len(lo, hi, step)
    if step == 1 and start == 0 and end >= 2**31 - 1:
        return dim
    return UNKNOWN


SliceArgs = tuple[list[int] | None, list[int] | None, list[int] | None, list[int] | None]


def _slice_args(values: Sequence[object], call: Call, from_input: bool) -> SliceArgs | None:
    if not from_input:
        return (lattr(call, "starts"), lattr(call, "ends"), lattr(call, "axes"), None)
    got = [None if at(values, i) is None else ints(at(values, i)) for i in range(1, 5)]
    if got[0] is None or got[1] is None:
        return None
    return got[0], got[1], got[2], got[3]


def _slice(from_input: bool) -> tuple[InferFn, KernelFn]:
    def infer(types: Types, consts: Arrays, call: Call) -> list[TensorType]:
        x = need(at(types, 0), "Slice")
        args = _slice_args(consts, call, from_input)
        known = args is not None and all(at(consts, i) is not None or at(types, i) is None
                                          for i in range(1, 5))
        if x.shape is None:
            return [x]
        if from_input and not known:
            return [TensorType(x.dtype, (UNKNOWN,) * len(x.shape))]
        dims = list(x.shape)
        for axis, s, e, st in _slice_params(len(dims), *args):  # type: ignore[misc]
            dims[axis] = _slice_dim(dims[axis], s, e, st)
        return [TensorType(x.dtype, tuple(dims))]

    def kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
        x = need(at(inputs, 0), "Slice")
        args = need(_slice_args(inputs, call, from_input), "Slice", "starts and ends")
        index = [slice(None)] * x.ndim
        for axis, s, e, st in _slice_params(x.ndim, *args):  # type: ignore[arg-type]
            lo, hi = _clamp(s, e, st, x.shape[axis])
            index[axis] = slice(lo, hi if hi >= 0 else None, st)
        return [x[tuple(index)]]

    return infer, kernel


# ----------------------------------------------------------------------------- Pad


PAD_MODES = {"constant": "constant", "reflect": "reflect", "edge": "edge", "wrap": "wrap"}


def _pads_full(pads: list[int], rank: int, axes: list[int] | None) -> list[tuple[int, int]]:
    axes = list(range(rank)) if axes is None else norm_axes(axes, rank)
    if len(pads) != 2 * len(axes):
        raise ShapeError(f"Pad: {len(pads)} pads for {len(axes)} axes (needs {2 * len(axes)})")
    full = [(0, 0)] * rank
    for k, a in enumerate(axes):
        full[a] = (pads[k], pads[len(axes) + k])
    return full


def _pad_args(values: Sequence[object], call: Call,
              from_input: bool) -> tuple[list[int] | None, float, list[int] | None]:
    if not from_input:
        return lattr(call, "pads"), float(call.attrs.get("value", 0.0)), None  # type: ignore
    pads, value, axes = at(values, 1), at(values, 2), at(values, 3)
    fill = floats(value)[0] if isinstance(value, np.ndarray) and value.size else 0.0
    return (ints(pads) if isinstance(pads, np.ndarray) else None, fill,
            ints(axes) if isinstance(axes, np.ndarray) else None)


def _pad(from_input: bool) -> tuple[InferFn, KernelFn]:
    def infer(types: Types, consts: Arrays, call: Call) -> list[TensorType]:
        x = need(at(types, 0), "Pad")
        pads, _, axes = _pad_args(consts, call, from_input)
        if x.shape is None:
            return [x]
        if pads is None or (at(types, 3) is not None and axes is None):
            return [TensorType(x.dtype, (UNKNOWN,) * len(x.shape))]
        full = _pads_full(pads, len(x.shape), axes)
        return [TensorType(x.dtype, tuple(d + a + b if isinstance(d, int) else
                                          (d if a == b == 0 else UNKNOWN)
                                          for d, (a, b) in zip(x.shape, full, strict=True)))]

    def kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
        x = need(at(inputs, 0), "Pad")
        pads, fill, axes = _pad_args(inputs, call, from_input)
        full = _pads_full(need(pads, "Pad", "pads"), x.ndim, axes)
        mode = sattr(call, "mode", "constant")
        if mode not in PAD_MODES:
            raise ShapeError(f"Pad: mode must be one of {', '.join(PAD_MODES)}, got {mode!r}")
        crop = tuple(slice(max(0, -a), x.shape[i] - max(0, -b)) for i, (a, b) in
                     enumerate(full))
        x = x[crop]
        widths = [(max(0, a), max(0, b)) for a, b in full]
        if mode == "constant":
            return [np.pad(x, widths, mode="constant", constant_values=np.asarray(fill).astype(
                x.dtype))]
        return [np.pad(x, widths, mode=PAD_MODES[mode])]  # type: ignore[call-overload]

    return infer, kernel


# ----------------------------------------------------------------------------- Trilu, D2S, S2D


def _trilu_infer(types: Types, _c: object, call: Call) -> list[TensorType]:
    x = need(at(types, 0), "Trilu")
    if x.shape is not None and len(x.shape) < 2:
        raise ShapeError(f"Trilu: input must have rank >= 2, got {len(x.shape)}")
    return [x]


def _trilu_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    x = need(at(inputs, 0), "Trilu")
    k_t = at(inputs, 1)
    k = ints(k_t)[0] if k_t is not None else 0
    return [np.triu(x, k) if iattr(call, "upper", 1) else np.tril(x, k)]


def _d2s_infer(types: Types, _c: object, call: Call) -> list[TensorType]:
    x = need(at(types, 0), "DepthToSpace")
    b = iattr(call, "blocksize")
    if x.shape is None:
        return [x]
    if len(x.shape) != 4:
        raise ShapeError(f"DepthToSpace: input must be 4-D, got {fmt(x.shape)}")
    n, c, h, w = x.shape
    if isinstance(c, int) and c % (b * b):
        raise ShapeError(f"DepthToSpace: {c} channels do not divide by blocksize^2 = {b * b}")
    return [TensorType(x.dtype, (n, _div(c, b * b), _mul(h, b), _mul(w, b)))]


def _mul(d: Dim, k: int) -> Dim:
    return d * k if isinstance(d, int) else UNKNOWN


def _div(d: Dim, k: int) -> Dim:
    return d // k if isinstance(d, int) else UNKNOWN


def _d2s_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    x = need(at(inputs, 0), "DepthToSpace")
    b = iattr(call, "blocksize")
    n, c, h, w = x.shape
    if sattr(call, "mode", "DCR") == "CRD":
        y = x.reshape(n, c // (b * b), b, b, h, w).transpose(0, 1, 4, 2, 5, 3)
    else:
        y = x.reshape(n, b, b, c // (b * b), h, w).transpose(0, 3, 4, 1, 5, 2)
    return [y.reshape(n, c // (b * b), h * b, w * b)]


def _s2d_infer(types: Types, _c: object, call: Call) -> list[TensorType]:
    x = need(at(types, 0), "SpaceToDepth")
    b = iattr(call, "blocksize")
    if x.shape is None:
        return [x]
    if len(x.shape) != 4:
        raise ShapeError(f"SpaceToDepth: input must be 4-D, got {fmt(x.shape)}")
    n, c, h, w = x.shape
    for d in (h, w):
        if isinstance(d, int) and d % b:
            raise ShapeError(f"SpaceToDepth: spatial dim {d} does not divide by blocksize {b}")
    return [TensorType(x.dtype, (n, _mul(c, b * b), _div(h, b), _div(w, b)))]


def _s2d_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    x = need(at(inputs, 0), "SpaceToDepth")
    b = iattr(call, "blocksize")
    n, c, h, w = x.shape
    order = (0, 1, 3, 5, 2, 4) if sattr(call, "mode", "DCR") == "CRD" else (0, 3, 5, 1, 2, 4)
    y = x.reshape(n, c, h // b, b, w // b, b).transpose(order)
    return [y.reshape(n, c * b * b, h // b, w // b)]


def _variants(op: str, since: int, ins: str, outs: str, fns: tuple[InferFn, KernelFn],
              attrs: list[AttrSpec], doc: str) -> OpSchema:
    return schema(op, since, ins, outs, *fns, attrs=attrs, traits=MOVE, doc=doc)


SCHEMAS = [
    schema("Concat", 4, "inputs*", "concat_result", _concat_infer, _concat_kernel,
           attrs=[attr("axis", "int", required=True)], traits=MOVE,
           unit_of=shape_math_unit,
           doc="join the inputs along axis"),
    _variants("Split", 2, "input", "outputs*", _split(False),
              [attr("axis", "int", 0), attr("split", "ints")],
              "cut along axis into the 'split' sizes or equal parts (split attribute)"),
    _variants("Split", 13, "input split:i64?", "outputs*", _split(True), [attr("axis", "int", 0)],
              "cut along axis into the 'split' input's sizes or equal parts"),
    _variants("Split", 18, "input split:i64?", "outputs*", _split(True),
              [attr("axis", "int", 0), attr("num_outputs", "int")],
              "cut along axis by the split input or into num_outputs parts"),
    _variants("Slice", 1, "data", "output", _slice(False),
              [attr("axes", "ints"), attr("ends", "ints", required=True),
               attr("starts", "ints", required=True)],
              "strided sub-tensor from starts/ends/axes attributes"),
    _variants("Slice", 10, "data starts:i64 ends:i64 axes:i64? steps:i64?", "output",
              _slice(True), [],
              "strided sub-tensor; negative steps and out-of-range bounds clamp"),
    _variants("Pad", 2, "data", "output", _pad(False),
              [attr("mode", "string", "constant"), attr("pads", "ints", required=True),
               attr("value", "float", 0.0)],
              "pad (constant/reflect/edge) with pads as an attribute"),
    _variants("Pad", 11, "data pads:i64 constant_value? axes:i64?", "output", _pad(True),
              [attr("mode", "string", "constant")],
              "pad (constant/reflect/edge/wrap) by the pads input, optionally on some axes"),
    schema("Trilu", 14, "input k:i64?", "output", _trilu_infer, _trilu_kernel,
           attrs=[attr("upper", "int", 1)], doc="keep the upper (or lower) triangle from "
           "diagonal k of the last two dims"),
    schema("DepthToSpace", 1, "input", "output", _d2s_infer, _d2s_kernel, traits=MOVE,
           attrs=[attr("blocksize", "int", required=True), attr("mode", "string", "DCR")],
           doc="move channel blocks into spatial blocks (DCR or CRD order)"),
    schema("SpaceToDepth", 1, "input", "output", _s2d_infer, _s2d_kernel, traits=MOVE,
           attrs=[attr("blocksize", "int", required=True)],
           doc="move spatial blocks into channels (DCR order)"),
    schema("SpaceToDepth", 28, "input", "output", _s2d_infer, _s2d_kernel, traits=MOVE,
           attrs=[attr("blocksize", "int", required=True), attr("mode", "string", "DCR")],
           doc="move spatial blocks into channels (DCR or CRD order)"),
]
