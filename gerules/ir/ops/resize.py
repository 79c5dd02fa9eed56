"""Resize (ai.onnx): nearest, linear and cubic interpolation, one axis at a time.

Invariants:
- Interpolation is separable: each resized axis maps output coordinates to input ones with
  ``coordinate_transformation_mode`` and mixes a few input taps with weights; axes whose
  size and scale do not change are skipped.
- Output size along an axis is ``floor(in * scale)`` for scales, or the given size (with
  ``keep_aspect_ratio_policy``); the scale used for coordinates is the given one, or
  ``out / in`` for sizes.
- Nearest rounds by ``nearest_mode``; taps beyond the border clamp to the edge (or get zero
  weight with ``exclude_outside=1``); ``tf_crop_and_resize`` writes
  ``extrapolation_value`` where the source lies outside the input.
- ``antialias=1`` widens the linear/cubic kernels by ``1 / scale`` when downscaling.
- Integer inputs are rounded and saturated back into their type; float16 runs in float32.
- Opset 10 is the scales-only form with ``asymmetric`` coordinates and ``floor`` rounding.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...errors import ShapeError
from ..graph import Dim, TensorType
from ..registry import Call, InferFn
from ._common import (
    UNKNOWN,
    Arrays,
    Types,
    at,
    attr,
    fattr,
    floats,
    iattr,
    ints,
    lattr,
    need,
    norm_axes,
    numel_of,
    sattr,
    schema,
)

MODES = ("nearest", "linear", "cubic")
COORDS = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
          "asymmetric", "tf_crop_and_resize")


def _present(value: Any) -> np.ndarray | None:
    return value if isinstance(value, np.ndarray) and value.size else None


def _plan(shape: Sequence[int], scales: np.ndarray | None, sizes: np.ndarray | None,
          call: Call) -> tuple[list[float], list[int]]:
    """Per-axis (scale, output size) for a static input shape."""
    rank = len(shape)
    axes = norm_axes(lattr(call, "axes") or range(rank), rank)
    scale = [1.0] * rank
    out = list(shape)
    if sizes is not None:
        given = ints(sizes)
        if len(given) != len(axes):
            raise ShapeError(f"Resize: {len(given)} sizes for {len(axes)} axes")
        ratios = [given[k] / shape[a] if shape[a] else 1.0 for k, a in enumerate(axes)]
        policy = sattr(call, "keep_aspect_ratio_policy", "stretch")
        if policy != "stretch":
            if policy not in ("not_larger", "not_smaller"):
                raise ShapeError(f"Resize: unknown keep_aspect_ratio_policy {policy!r}")
            s = min(ratios) if policy == "not_larger" else max(ratios)
            ratios = [s] * len(axes)
            given = [int(s * shape[a] + 0.5) for a in axes]
        for k, a in enumerate(axes):
            scale[a], out[a] = ratios[k], given[k]
    elif scales is not None:
        given_s = floats(scales)
        if len(given_s) != len(axes):
            raise ShapeError(f"Resize: {len(given_s)} scales for {len(axes)} axes")
        for k, a in enumerate(axes):
            if given_s[k] <= 0:
                raise ShapeError(f"Resize: scales must be positive, got {given_s}")
            scale[a], out[a] = given_s[k], int(np.floor(shape[a] * given_s[k]))
    else:
        raise ShapeError("Resize: needs scales or sizes")
    return scale, out


# ----------------------------------------------------------------------------- coordinates


def _source(y: np.ndarray, n_in: int, n_out: int, scale: float, mode: str,
            roi: tuple[float, float]) -> np.ndarray:
    """Input coordinate of each output index ``y``."""
    length = scale * n_in
    if mode == "align_corners":
        return np.zeros_like(y) if length == 1 else y * (n_in - 1) / (length - 1)
    if mode == "asymmetric":
        return y / scale
    if mode == "tf_crop_and_resize":
        lo, hi = roi
        if length == 1:
            return np.full_like(y, (hi - lo) * (n_in - 1) / 2 + lo * (n_in - 1))
        return y * (hi - lo) * (n_in - 1) / (length - 1) + lo * (n_in - 1)
    if mode == "pytorch_half_pixel":
        return np.full_like(y, -0.5) if length == 1 else (y + 0.5) / scale - 0.5
    if mode == "half_pixel":
        return (y + 0.5) / scale - 0.5
    if mode == "half_pixel_symmetric":
        offset = n_in / 2 * (1 - n_out / length)
        return offset + (y + 0.5) / scale - 0.5
    raise ShapeError(f"Resize: unknown coordinate_transformation_mode {mode!r}")


def _nearest(x: np.ndarray, mode: str) -> np.ndarray:
    if mode == "round_prefer_floor":
        return np.ceil(x - 0.5)
    if mode == "round_prefer_ceil":
        return np.floor(x + 0.5)
    if mode == "floor":
        return np.asarray(np.floor(x))
    if mode == "ceil":
        return np.asarray(np.ceil(x))
    raise ShapeError(f"Resize: unknown nearest_mode {mode!r}")


def _cubic(d: np.ndarray, a: float) -> np.ndarray:
    d = np.abs(d)
    near = ((a + 2) * d - (a + 3)) * d * d + 1
    far = ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
    return np.where(d <= 1, near, np.where(d < 2, far, 0.0))


def _weights(xo: np.ndarray, scale: float, call: Call) -> tuple[np.ndarray, np.ndarray]:
    """(tap offsets from ``p = ceil(x) - 1``, weights per output position)."""
    r = xo - (np.ceil(xo) - 1)  # in (0, 1]
    mode = sattr(call, "mode", "nearest")
    s = min(scale, 1.0) if iattr(call, "antialias") else 1.0
    if mode == "linear":
        start = int(np.floor(-1 / s)) + 1
        offs = np.arange(start, 2 - start)
        w = np.clip(1 - np.abs((offs[None, :] - r[:, None]) * s), 0, 1)
    elif mode == "cubic":
        start = int(np.floor(-2 / s)) + 1
        offs = np.arange(start, 2 - start)
        w = _cubic((offs[None, :] - r[:, None]) * s, fattr(call, "cubic_coeff_a", -0.75))
    else:
        raise ShapeError(f"Resize: mode must be one of {', '.join(MODES)}, got {mode!r}")
    if s < 1.0:
        w = w / w.sum(axis=1, keepdims=True)
    return offs, w


def _taps(n_in: int, n_out: int, scale: float, roi: tuple[float, float],
          call: Call) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """(indices [out, taps], weights [out, taps], extrapolated mask or None)."""
    ctm = sattr(call, "coordinate_transformation_mode", "half_pixel")
    xo = _source(np.arange(n_out, dtype=np.float64), n_in, n_out, scale, ctm, roi)
    outside = (xo < 0) | (xo > n_in - 1) if ctm == "tf_crop_and_resize" else None
    if sattr(call, "mode", "nearest") == "nearest":
        idx = _nearest(xo, sattr(call, "nearest_mode", "round_prefer_floor"))[:, None]
        w = np.ones_like(idx)
    else:
        offs, w = _weights(xo, scale, call)
        idx = (np.ceil(xo) - 1)[:, None] + offs[None, :]
        if iattr(call, "exclude_outside"):
            w = np.where((idx < 0) | (idx >= n_in), 0.0, w)
            total = w.sum(axis=1, keepdims=True)
            w = w / np.where(total == 0, 1.0, total)
    return np.clip(idx, 0, n_in - 1).astype(np.intp), w, outside


def _resize_axis(x: np.ndarray, axis: int, n_out: int, scale: float,
                 roi: tuple[float, float], call: Call) -> np.ndarray:
    idx, w, outside = _taps(x.shape[axis], n_out, scale, roi, call)
    bshape = [1] * x.ndim
    bshape[axis] = n_out
    out = None
    for t in range(idx.shape[1]):
        part = np.take(x, idx[:, t], axis=axis)
        if idx.shape[1] > 1:
            part = part * w[:, t].astype(x.dtype).reshape(bshape)
        out = part if out is None else out + part
    assert out is not None
    if outside is not None and outside.any():
        out = np.where(outside.reshape(bshape), x.dtype.type(fattr(call, "extrapolation_value")),
                       out)
    return out


def _roi_of(roi: np.ndarray | None, rank: int, call: Call) -> list[tuple[float, float]]:
    if roi is None:
        return [(0.0, 1.0)] * rank
    values = floats(roi)
    axes = norm_axes(lattr(call, "axes") or range(rank), rank)
    if len(values) != 2 * len(axes):
        raise ShapeError(f"Resize: roi has {len(values)} values for {len(axes)} axes")
    out = [(0.0, 1.0)] * rank
    for k, a in enumerate(axes):
        out[a] = (values[k], values[len(axes) + k])
    return out


def resize(x: np.ndarray, roi: np.ndarray | None, scales: np.ndarray | None,
           sizes: np.ndarray | None, call: Call) -> np.ndarray:
    scale, out = _plan(x.shape, scales, sizes, call)
    rois = _roi_of(roi, x.ndim, call)
    work = x.astype(np.float64 if x.dtype == np.float64 else np.float32)
    crop = sattr(call, "coordinate_transformation_mode") == "tf_crop_and_resize"
    for axis in range(x.ndim):
        if out[axis] == work.shape[axis] and scale[axis] == 1.0 and not crop:
            continue
        work = _resize_axis(work, axis, out[axis], scale[axis], rois[axis], call)
    if x.dtype.kind in "iu":
        info = np.iinfo(x.dtype)
        work = np.minimum(np.maximum(np.rint(work), info.min), info.max)
    return work.astype(x.dtype)


# ----------------------------------------------------------------------------- schemas


def _out_dims(shape: Sequence[Dim], scales: np.ndarray | None, sizes: np.ndarray | None,
              call: Call) -> tuple[Dim, ...]:
    """Output dims; with symbolic input dims each axis is decided on its own."""
    if all(isinstance(d, int) for d in shape):
        return tuple(_plan([int(d) for d in shape], scales, sizes, call)[1])
    axes = norm_axes(lattr(call, "axes") or range(len(shape)), len(shape))
    out = list(shape)
    if sizes is not None:
        if sattr(call, "keep_aspect_ratio_policy", "stretch") != "stretch":
            return (UNKNOWN,) * len(shape)
        for a, size in zip(axes, ints(sizes), strict=True):
            out[a] = size
        return tuple(out)
    for a, s in zip(axes, floats(scales), strict=True):
        d = shape[a]
        out[a] = int(np.floor(d * s)) if isinstance(d, int) else (d if s == 1.0 else UNKNOWN)
    return tuple(out)


def _infer(v10: bool) -> InferFn:
    def infer(types: Types, consts: Arrays, call: Call) -> list[TensorType]:
        x = need(at(types, 0), "Resize")
        if x.shape is None:
            return [x]
        if v10:
            scales, sizes = _present(at(consts, 1)), None
            known = scales is not None
        else:
            scales, sizes = _present(at(consts, 2)), _present(at(consts, 3))
            known = (sizes is not None or (scales is not None and at(types, 3) is None))
        if not known:
            return [TensorType(x.dtype, (UNKNOWN,) * len(x.shape))]
        return [TensorType(x.dtype, _out_dims(x.shape, scales, sizes, call))]

    return infer


def _kernel_v10(inputs: Arrays, call: Call) -> list[np.ndarray]:
    x = need(at(inputs, 0), "Resize")
    v10 = Call({**call.attrs, "coordinate_transformation_mode": "asymmetric",
                "nearest_mode": "floor"}, call.num_outputs, call.node)
    return [resize(x, None, need(_present(at(inputs, 1)), "Resize", "scales"), None, v10)]


def _kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    x = need(at(inputs, 0), "Resize")
    roi = _present(at(inputs, 1))
    sizes = _present(at(inputs, 3))
    scales = None if sizes is not None else _present(at(inputs, 2))
    crop = sattr(call, "coordinate_transformation_mode") == "tf_crop_and_resize"
    return [resize(x, roi if crop else None, scales, sizes, call)]


def _flops(ins: Types, outs: Sequence[TensorType], call: Call) -> int:
    per = {"nearest": 1, "linear": 4, "cubic": 8}.get(sattr(call, "mode", "nearest"), 4)
    return per * numel_of(outs[0]) * max(1, len(outs[0].shape or ()) - 2)


RESIZE_ATTRS = [
    attr("antialias", "int", 0), attr("axes", "ints"),
    attr("coordinate_transformation_mode", "string", "half_pixel"),
    attr("cubic_coeff_a", "float", -0.75), attr("exclude_outside", "int", 0),
    attr("extrapolation_value", "float", 0.0),
    attr("keep_aspect_ratio_policy", "string", "stretch"), attr("mode", "string", "nearest"),
    attr("nearest_mode", "string", "round_prefer_floor"),
]

SCHEMAS = [
    schema("Resize", 10, "X scales", "Y", _infer(True), _kernel_v10,
           attrs=[attr("mode", "string", "nearest")], flops=_flops,
           doc="resize by scales (opset 10: asymmetric coordinates, floor for nearest)"),
    schema("Upsample", 9, "X scales", "Y", _infer(True), _kernel_v10,
           attrs=[attr("mode", "string", "nearest")], flops=_flops,
           doc="deprecated Resize: by scales, asymmetric coordinates, floor for nearest"),
    schema("Resize", 11, "X roi? scales? sizes:i64?", "Y", _infer(False), _kernel,
           attrs=RESIZE_ATTRS, flops=_flops,
           doc="resize by scales or sizes: nearest/linear/cubic, all coordinate modes"),
]
