"""Shape and metadata ops (ai.onnx): Shape, Size, Reshape, Flatten, Squeeze, Unsqueeze,
Transpose, Expand, Tile, Identity, Dropout (inference).

Invariants:
- Ops whose output shape comes from a tensor (Reshape, Expand, Tile, Squeeze/Unsqueeze
  axes) give static shapes when that tensor is a known constant
  (``consts[i]``), and otherwise the most that is known (the rank, ``"?"`` dims).
- Shape and Size fold from the input *type* (``fold_types``) whenever the dims they report
  are static, even if other dims are symbolic.
- Reshape: ``0`` copies the input dim (unless ``allowzero=1``), one ``-1`` is inferred; with
  symbolic dims ``-1`` is still found when the symbols cancel (``[N,12,64] -> [0,-1]``).
- Dropout runs only as inference: the output is the input and the mask is all true; a
  training-mode call with a non-zero ratio raises.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...errors import ShapeError
from ..graph import Dim, Shape, TensorType
from ..registry import SHAPE_OP, Call, InferFn, KernelFn, OpSchema
from ._common import (
    UNKNOWN,
    Arrays,
    PerOwner,
    Types,
    at,
    attr,
    broadcast,
    fmt,
    iattr,
    ints,
    lattr,
    need,
    norm_axes,
    numel,
    prod,
    schema,
)

MOVE = {SHAPE_OP}


def dim_prod(dims: Sequence[Dim]) -> Dim:
    """Product of dims: an int, the lone symbol among 1s, or ``"?"``."""
    symbols = [d for d in dims if not isinstance(d, int)]
    n = 1
    for d in dims:
        if isinstance(d, int):
            n *= d
    if not symbols:
        return n
    return symbols[0] if len(symbols) == 1 and n == 1 else UNKNOWN


# ----------------------------------------------------------------------------- Shape, Size


def _shape_range(rank: int, call: Call) -> tuple[int, int]:
    start = iattr(call, "start", 0)
    end = call.attrs.get("end")
    lo = min(max(start + rank if start < 0 else start, 0), rank)
    hi = rank if end is None else int(end)  # type: ignore[arg-type]
    hi = min(max(hi + rank if hi < 0 else hi, 0), rank)
    return lo, max(lo, hi)


def _shape_infer(types: Types, _c: object, call: Call) -> list[TensorType]:
    x = need(at(types, 0), "Shape")
    if x.shape is None:
        return [TensorType("int64", (UNKNOWN,))]
    lo, hi = _shape_range(len(x.shape), call)
    return [TensorType("int64", (hi - lo,))]


def _shape_fold(types: Types, call: Call) -> list[np.ndarray] | None:
    x = at(types, 0)
    if x is None or x.shape is None:
        return None
    lo, hi = _shape_range(len(x.shape), call)
    dims = x.shape[lo:hi]
    if not all(isinstance(d, int) for d in dims):
        return None
    return [np.array(dims, dtype=np.int64)]


def _shape_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    x = need(at(inputs, 0), "Shape")
    lo, hi = _shape_range(x.ndim, call)
    return [np.array(x.shape[lo:hi], dtype=np.int64)]


def _size_fold(types: Types, call: Call) -> list[np.ndarray] | None:
    x = at(types, 0)
    n = None if x is None else x.numel()
    return None if n is None else [np.array(n, dtype=np.int64)]


# ----------------------------------------------------------------------------- Reshape


def reshape_dims(shape: Shape, target: Sequence[int], allowzero: bool = False) -> Shape:
    """The output shape of Reshape(``shape`` -> ``target``) with 0 and -1 resolved."""
    if sum(1 for t in target if t == -1) > 1:
        raise ShapeError(f"Reshape: target {list(target)} has more than one -1")
    if allowzero and 0 in target and -1 in target:
        raise ShapeError("Reshape: allowzero=1 forbids 0 and -1 together")
    out: list[Dim] = []
    for i, t in enumerate(target):
        if t == 0 and not allowzero:
            if i >= len(shape):
                raise ShapeError(f"Reshape: 0 at position {i} has no input dim to copy")
            out.append(shape[i])
        elif t < -1:
            raise ShapeError(f"Reshape: invalid target dim {t}")
        else:
            out.append(t)
    if -1 in out:
        out[out.index(-1)] = _infer_minus_one(shape, out)
    elif numel(shape) is not None and numel(out) is not None and numel(shape) != numel(out):
        raise ShapeError(f"Reshape: cannot reshape {fmt(shape)} ({numel(shape)} elements) "
                         f"to {fmt(tuple(out))} ({numel(out)} elements)")
    return tuple(out)


def _infer_minus_one(shape: Shape, out: list[Dim]) -> Dim:
    num = [d for d in shape]
    den = [d for d in out if d != -1]
    for d in list(den):
        if isinstance(d, str) and d in num:
            num.remove(d)
            den.remove(d)
    symbols = [d for d in num + den if not isinstance(d, int)]
    if symbols:
        ints_ratio = (numel([d for d in num if isinstance(d, int)]),
                      numel([d for d in den if isinstance(d, int)]))
        lone = len(symbols) == 1 and symbols[0] in num
        return symbols[0] if lone and ints_ratio[0] == ints_ratio[1] else UNKNOWN
    top, bottom = numel(num) or 0, numel(den)
    if bottom == 0:
        if top == 0:
            return 0
        raise ShapeError(f"Reshape: cannot infer -1 for {fmt(shape)} -> {fmt(tuple(out))}")
    if top % bottom:  # type: ignore[operator]
        raise ShapeError(f"Reshape: {fmt(shape)} does not divide into {fmt(tuple(out))}")
    return top // bottom  # type: ignore[operator]


def _reshape_infer(types: Types, consts: Arrays, call: Call) -> list[TensorType]:
    x, s = need(at(types, 0), "Reshape"), need(at(types, 1), "Reshape", "shape")
    target = at(consts, 1)
    if target is None:
        rank = s.shape[0] if s.shape and isinstance(s.shape[0], int) else None
        return [TensorType(x.dtype, None if rank is None else (UNKNOWN,) * rank)]
    if x.shape is None:
        dims = tuple(UNKNOWN if t in (0, -1) else t for t in ints(target))
        return [TensorType(x.dtype, dims)]
    return [TensorType(x.dtype, reshape_dims(x.shape, ints(target),
                                             bool(iattr(call, "allowzero"))))]


# per runtime step, its output dims by (input shape, the target's bytes and dtype)
_RESHAPES: PerOwner[tuple[int, ...]] = PerOwner()


def _reshape_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    x, s = need(at(inputs, 0), "Reshape"), need(at(inputs, 1), "Reshape", "shape")
    dims = _RESHAPES.get(call, (x.shape, s.tobytes(), s.dtype.char), lambda: tuple(
        int(d) for d in reshape_dims(x.shape, ints(s), bool(iattr(call, "allowzero")))))
    return [x.reshape(dims)]


# ----------------------------------------------------------------------------- Flatten


def _flatten_infer(types: Types, _c: object, call: Call) -> list[TensorType]:
    x = need(at(types, 0), "Flatten")
    if x.shape is None:
        return [TensorType(x.dtype, (UNKNOWN, UNKNOWN))]
    axis = iattr(call, "axis", 1)
    a = axis + len(x.shape) if axis < 0 else axis
    if not 0 <= a <= len(x.shape):
        raise ShapeError(f"Flatten: axis {axis} is out of range for rank {len(x.shape)}")
    return [TensorType(x.dtype, (dim_prod(x.shape[:a]), dim_prod(x.shape[a:])))]


def _flatten_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    x = need(at(inputs, 0), "Flatten")
    axis = iattr(call, "axis", 1)
    a = axis + x.ndim if axis < 0 else axis
    if not 0 <= a <= x.ndim:
        raise ShapeError(f"Flatten: axis {axis} is out of range for rank {x.ndim}")
    return [x.reshape(prod(x.shape[:a]), prod(x.shape[a:]))]


# ----------------------------------------------------------------------------- Squeeze/Unsqueeze


def _axes_of(consts: Sequence[object], call: Call, from_input: bool) -> list[int] | None:
    """Axes from the attribute or the constant second input (``None``: not given/unknown)."""
    if not from_input:
        return lattr(call, "axes")
    value = at(consts, 1)
    return None if value is None else ints(value)


def _squeeze_dims(shape: Shape, axes: list[int] | None) -> Shape | None:
    if axes is None:
        if not all(isinstance(d, int) for d in shape):
            return None
        return tuple(d for d in shape if d != 1)
    keep = norm_axes(axes, len(shape))
    for a in keep:
        if isinstance(shape[a], int) and shape[a] != 1:
            raise ShapeError(f"Squeeze: dim {a} of {fmt(shape)} is {shape[a]}, not 1")
    return tuple(d for i, d in enumerate(shape) if i not in keep)


def _squeeze(from_input: bool) -> tuple[InferFn, KernelFn]:
    def infer(types: Types, consts: Arrays, call: Call) -> list[TensorType]:
        x = need(at(types, 0), "Squeeze")
        if from_input and at(types, 1) is not None and at(consts, 1) is None:
            return [TensorType(x.dtype, None)]
        shape = None if x.shape is None else _squeeze_dims(x.shape, _axes_of(consts, call,
                                                                               from_input))
        return [TensorType(x.dtype, shape)]

    def kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
        x = need(at(inputs, 0), "Squeeze")
        dims = _squeeze_dims(x.shape, _axes_of(inputs, call, from_input))
        return [x.reshape(dims)]  # type: ignore[arg-type]

    return infer, kernel


def _unsqueeze_dims(shape: Shape, axes: list[int]) -> Shape:
    rank = len(shape) + len(axes)
    where = set(norm_axes(axes, rank))
    it = iter(shape)
    return tuple(1 if i in where else next(it) for i in range(rank))


def _unsqueeze(from_input: bool) -> tuple[InferFn, KernelFn]:
    def infer(types: Types, consts: Arrays, call: Call) -> list[TensorType]:
        x = need(at(types, 0), "Unsqueeze")
        axes = _axes_of(consts, call, from_input)
        if axes is None:
            if not from_input:
                raise ShapeError("Unsqueeze: axes attribute is required")
            return [TensorType(x.dtype, None)]
        return [TensorType(x.dtype, None if x.shape is None else _unsqueeze_dims(x.shape,
                                                                                 axes))]

    def kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
        x = need(at(inputs, 0), "Unsqueeze")
        axes = need(_axes_of(inputs, call, from_input), "Unsqueeze", "axes")
        return [x.reshape(_unsqueeze_dims(x.shape, axes))]  # type: ignore[arg-type]

    return infer, kernel


# ----------------------------------------------------------------------------- Transpose


def _perm(call: Call, rank: int) -> list[int]:
    perm = lattr(call, "perm")
    if perm is None:
        return list(range(rank))[::-1]
    if sorted(norm_axes(perm, rank, "perm")) != list(range(rank)) or len(perm) != rank:
        raise ShapeError(f"Transpose: perm {perm} is not a permutation of {rank} axes")
    return [p % rank for p in perm]


def _transpose_infer(types: Types, _c: object, call: Call) -> list[TensorType]:
    x = need(at(types, 0), "Transpose")
    if x.shape is None:
        return [x]
    return [TensorType(x.dtype, tuple(x.shape[p] for p in _perm(call, len(x.shape))))]


_PERMS: PerOwner[list[int]] = PerOwner()  # per runtime step and input rank


def _transpose_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    x = need(at(inputs, 0), "Transpose")
    return [x.transpose(_PERMS.get(call, x.ndim, lambda: _perm(call, x.ndim)))]


# ----------------------------------------------------------------------------- Expand, Tile


def _expand_infer(types: Types, consts: Arrays, call: Call) -> list[TensorType]:
    x, s = need(at(types, 0), "Expand"), need(at(types, 1), "Expand", "shape")
    target = at(consts, 1)
    if target is not None:
        return [TensorType(x.dtype, broadcast(x.shape, tuple(ints(target))))]
    if s.shape and isinstance(s.shape[0], int):
        return [TensorType(x.dtype, broadcast(x.shape, (UNKNOWN,) * s.shape[0]))]
    return [TensorType(x.dtype, None)]


def _expand_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    x, s = need(at(inputs, 0), "Expand"), need(at(inputs, 1), "Expand", "shape")
    shape = np.broadcast_shapes(x.shape, tuple(ints(s)))
    return [np.broadcast_to(x, shape)]


def _tile_infer(types: Types, consts: Arrays, call: Call) -> list[TensorType]:
    x = need(at(types, 0), "Tile")
    reps = at(consts, 1)
    if x.shape is None:
        return [x]
    if reps is None:
        return [TensorType(x.dtype, (UNKNOWN,) * len(x.shape))]
    r = ints(reps)
    if len(r) != len(x.shape):
        raise ShapeError(f"Tile: {len(r)} repeats for rank {len(x.shape)}")
    return [TensorType(x.dtype, tuple(d * k if isinstance(d, int) else (d if k == 1 else
                                                                         UNKNOWN)
                                      for d, k in zip(x.shape, r, strict=True)))]


def _tile_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    x, reps = need(at(inputs, 0), "Tile"), need(at(inputs, 1), "Tile", "repeats")
    r = ints(reps)
    if len(r) != x.ndim or any(k < 0 for k in r):
        raise ShapeError(f"Tile: repeats {r} do not fit rank {x.ndim}")
    return [np.tile(x, r)]


# ----------------------------------------------------------------------------- Identity, Dropout


def _identity_infer(types: Types, _c: object, call: Call) -> list[TensorType]:
    return [need(at(types, 0), "Identity")]


def _identity_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    return [need(at(inputs, 0), "Identity")]


def _dropout(mask_dtype: str | None, from_input: bool) -> tuple[InferFn, KernelFn]:
    def infer(types: Types, consts: Arrays, call: Call) -> list[TensorType]:
        x = need(at(types, 0), "Dropout")
        _check_inference(consts, call, from_input)
        return [x, TensorType(mask_dtype or x.dtype, x.shape)][: max(1, call.num_outputs)]

    def kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
        x = need(at(inputs, 0), "Dropout")
        _check_inference(inputs, call, from_input)
        mask = np.ones(x.shape, dtype=mask_dtype or x.dtype)
        return [x, mask][: max(1, call.num_outputs)]

    return infer, kernel


def _check_inference(values: Sequence[object], call: Call, from_input: bool) -> None:
    if not from_input:
        return
    training, ratio = at(values, 2), at(values, 1)
    if isinstance(training, np.ndarray) and bool(training.reshape(-1)[0]):
        r = 0.5 if not isinstance(ratio, np.ndarray) else float(ratio.reshape(-1)[0])
        if r != 0.0:
            raise ShapeError("Dropout: training mode not supported (random masks); "
                             "export the model in eval mode")


def _squeeze_schema(op: str, since: int, from_input: bool, fns: tuple[InferFn, KernelFn],
                    doc: str) -> OpSchema:
    return schema(op, since, "data axes:i64?" if from_input else "data", "squeezed" if op ==
                  "Squeeze" else "expanded", *fns,
                  attrs=[] if from_input else [attr("axes", "ints")], unit="scalar",
                  traits=MOVE, doc=doc)


SCHEMAS = [
    schema("Shape", 1, "data", "shape", _shape_infer, _shape_kernel, unit="scalar",
           attrs=[attr("start", "int", 0), attr("end", "int")], fold_types=_shape_fold,
           doc="the input's dims as int64 (start/end slice them)"),
    schema("Size", 1, "data", "size", lambda t, c, call: [TensorType("int64", ())],
           lambda ins, call: [np.array(need(at(ins, 0), "Size").size, dtype=np.int64)],
           unit="scalar", fold_types=_size_fold, doc="the input's element count (int64)"),
    schema("Reshape", 5, "data shape:i64", "reshaped", _reshape_infer, _reshape_kernel,
           attrs=[attr("allowzero", "int", 0)], unit="scalar", traits=MOVE,
           doc="reinterpret the dims (0 copies a dim, -1 is inferred)"),
    schema("Flatten", 1, "input", "output", _flatten_infer, _flatten_kernel,
           attrs=[attr("axis", "int", 1)], unit="scalar", traits=MOVE,
           doc="2-D view: dims before axis times dims from axis"),
    _squeeze_schema("Squeeze", 1, False, _squeeze(False), "remove size-1 dims (axes attr)"),
    _squeeze_schema("Squeeze", 13, True, _squeeze(True), "remove size-1 dims (axes input)"),
    _squeeze_schema("Unsqueeze", 1, False, _unsqueeze(False), "insert size-1 dims (axes attr)"),
    _squeeze_schema("Unsqueeze", 13, True, _unsqueeze(True),
                    "insert size-1 dims (axes input)"),
    schema("Transpose", 1, "data", "transposed", _transpose_infer, _transpose_kernel,
           attrs=[attr("perm", "ints")], traits=MOVE, doc="permute the axes (default: reverse)"),
    schema("Expand", 8, "input shape:i64", "output", _expand_infer, _expand_kernel, traits=MOVE,
           doc="broadcast the input to a shape (bidirectionally)"),
    schema("Tile", 6, "input repeats:i64", "output", _tile_infer, _tile_kernel, traits=MOVE,
           doc="repeat the input along each axis"),
    schema("Identity", 1, "input", "output", _identity_infer, _identity_kernel, unit="scalar",
           traits=MOVE, doc="the input itself"),
    schema("Dropout", 6, "data", "output mask?", *_dropout(None, False),
           attrs=[attr("ratio", "float", 0.5), attr("is_test", "int", 0)], unit="scalar",
           traits=MOVE, doc="inference dropout: identity (mask of ones in the input's dtype)"),
    schema("Dropout", 7, "data", "output mask?", *_dropout(None, False),
           attrs=[attr("ratio", "float", 0.5)], unit="scalar", traits=MOVE,
           doc="inference dropout: identity (mask of ones in the input's dtype)"),
    schema("Dropout", 10, "data", "output mask?", *_dropout("bool", False),
           attrs=[attr("ratio", "float", 0.5)], unit="scalar", traits=MOVE,
           doc="inference dropout: identity (boolean mask of ones)"),
    schema("Dropout", 12, "data ratio? training_mode?", "output mask?",
           *_dropout("bool", True), attrs=[attr("seed", "int")],
           unit="scalar", traits=MOVE,
           doc="inference dropout: identity; training mode with ratio > 0 is refused"),

]

