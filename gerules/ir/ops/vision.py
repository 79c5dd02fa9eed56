"""Sampling and detection ops (ai.onnx): GridSample, AffineGrid, RoiAlign, NonMaxSuppression,
Col2Im, MaxUnpool, DeformConv.

Invariants:
- GridSample maps each grid point (last axis ``x, y[, z]``, in [-1, 1]) to input coordinates
  (``align_corners``: -1 and 1 are the centres of the corner pixels, else their outer edges),
  rounds half to even for ``nearest``, brings coordinates outside the image back for
  ``border`` (clamp) and ``reflection`` (mirror at the image's edges), then interpolates
  (``linear``: 2 taps per axis; ``cubic``: 4 taps, Keys' kernel with A = -0.75), each tap
  outside the image being 0 (``zeros``), clamped or mirrored.
- AffineGrid gives the sampling grid of ``theta`` for an output ``size`` (2-D and 3-D).
- RoiAlign averages (or takes the max of) bilinear samples on a ``sampling_ratio`` grid per
  output bin of each region (``half_pixel`` shifts by half a pixel; ``output_half_pixel``
  forces regions to at least 1 x 1).
- NonMaxSuppression keeps, per batch and class, boxes in descending score order whose IoU with
  every kept box is at most ``iou_threshold`` and whose score is above ``score_threshold``,
  at most ``max_output_boxes_per_class``; rows ``[batch, class, box]`` (int64).
- Col2Im sums sliding blocks back into an image; MaxUnpool scatters values to the flat
  indices MaxPool gave (positions in the natural unpooled shape, also when a larger
  ``output_shape`` is given); DeformConv samples each kernel tap at its learned offset
  (bilinear, zero outside), scales it by the optional mask, then convolves.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from ...errors import ShapeError
from ..graph import Dim, TensorType
from ..registry import Call
from ._common import (
    UNKNOWN,
    Arrays,
    Types,
    at,
    attr,
    fattr,
    iattr,
    ints,
    lattr,
    need,
    sattr,
    schema,
)

# ----------------------------------------------------------------------------- GridSample


def _reflect(x: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Mirror ``x`` into ``[lo, hi]``, repeatedly, as a reflection pad does."""
    span = hi - lo
    if span <= 0:
        return np.full_like(x, lo)
    below, above = x < lo, x > hi
    d = np.where(below, lo - x, x - hi)
    n = np.floor(d / span)
    r = d - n * span
    even = n % 2 == 0
    low_side = np.where(even, lo + r, hi - r)
    high_side = np.where(even, hi - r, lo + r)
    return np.where(below, low_side, np.where(above, high_side, x))


def _cubic(t: NDArray[np.float64]) -> list[NDArray[np.float64]]:
    """Keys' cubic weights (A = -0.75) of the taps at -1, 0, 1, 2 for fraction ``t``."""
    a = -0.75

    def near(x: NDArray[np.float64]) -> NDArray[np.float64]:
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x: NDArray[np.float64]) -> NDArray[np.float64]:
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


def _taps(x: np.ndarray, mode: str) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Tap positions and weights along one axis."""
    if mode == "nearest":
        return [x.astype(np.int64)], [np.ones_like(x)]
    base = np.floor(x)
    t = x - base
    if mode == "linear":
        return [base.astype(np.int64), base.astype(np.int64) + 1], [1 - t, t]
    return [base.astype(np.int64) + k for k in (-1, 0, 1, 2)], _cubic(t)


def _fetch(idx: np.ndarray, size: int, padding: str, lo: float, hi: float
           ) -> tuple[np.ndarray, np.ndarray]:
    """Index into an axis of ``size`` and whether the tap reads real data."""
    if padding == "zeros":
        ok = (idx >= 0) & (idx < size)
        return np.clip(idx, 0, size - 1), ok
    if padding == "border":
        return np.clip(idx, 0, size - 1), np.ones(idx.shape, bool)
    mirrored = np.trunc(_reflect(idx.astype(np.float64), lo, hi)).astype(np.int64)
    return np.clip(mirrored, 0, size - 1), np.ones(idx.shape, bool)


def _gs_infer(types: Types, _c: object, call: Call) -> list[TensorType]:
    x, grid = need(at(types, 0), "GridSample"), need(at(types, 1), "GridSample", "grid")
    if x.shape is None or grid.shape is None:
        return [TensorType(x.dtype, None)]
    return [TensorType(x.dtype, (x.shape[0], x.shape[1], *grid.shape[1:-1]))]


def _gs_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    x, grid = need(at(inputs, 0), "GridSample"), need(at(inputs, 1), "GridSample")
    mode = {"bilinear": "linear", "bicubic": "cubic"}.get(sattr(call, "mode", "linear"),
                                                         sattr(call, "mode", "linear"))
    padding, align = sattr(call, "padding_mode", "zeros"), bool(iattr(call, "align_corners"))
    if mode not in ("nearest", "linear", "cubic"):
        raise ShapeError(f"GridSample: unknown mode '{mode}'")
    dims = x.shape[2:]
    coords = grid.astype(np.float64)[..., ::-1]  # grid's last axis is x, y[, z]: reversed
    per_axis = []
    for i, size in enumerate(dims):
        g = coords[..., i]
        c = (g + 1) / 2 * (size - 1) if align else ((g + 1) * size - 1) / 2
        lo, hi = (0.0, size - 1.0) if align else (-0.5, size - 0.5)
        if mode == "nearest":
            c = np.rint(c)
        if padding == "border":
            c = np.where((c < lo) | (c > hi), np.clip(c, 0, size - 1), c)
        elif padding == "reflection":
            c = _reflect(c, lo, hi)
        idx, weights = _taps(c, mode)
        per_axis.append([(*_fetch(k, size, padding, lo, hi), w)
                         for k, w in zip(idx, weights, strict=True)])
    xs = x.astype(np.float64)
    n = np.arange(x.shape[0]).reshape((-1,) + (1,) * (grid.ndim - 2))
    out = np.zeros((x.shape[0], *grid.shape[1:-1], x.shape[1]))
    for combo in itertools.product(*per_axis):
        weight = np.prod([w for _, _, w in combo], axis=0)
        ok = np.logical_and.reduce([v for _, v, _ in combo])
        split: tuple[np.ndarray | slice, ...] = (n, slice(None), *(k for k, _, _ in combo))
        vals = xs[split]  # [N, *out, C]: split index
        out += (weight * ok)[..., None] * vals
    return [np.moveaxis(out, -1, 1).astype(x.dtype)]


# ----------------------------------------------------------------------------- AffineGrid


def _ag_infer(types: Types, consts: Arrays, call: Call) -> list[TensorType]:
    theta = need(at(types, 0), "AffineGrid")
    size = at(consts, 1)
    if size is None:
        s = need(at(types, 1), "AffineGrid", "size")
        rank = s.shape[0] if s.shape and isinstance(s.shape[0], int) else 4
        return [TensorType(theta.dtype, (UNKNOWN,) * (rank - 1) + (rank - 2,))]
    n, _, *spatial = ints(size)
    return [TensorType(theta.dtype, (n, *spatial, len(spatial)))]


def _ag_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    theta, size = need(at(inputs, 0), "AffineGrid"), ints(need(at(inputs, 1), "AffineGrid"))
    spatial = size[2:]
    align = bool(iattr(call, "align_corners"))
    axes = []
    for d in spatial:
        step = np.linspace(-1, 1, d) if d > 1 else np.zeros(1)
        axes.append(step if align else step * (d - 1) / d)
    mesh = np.meshgrid(*axes, indexing="ij")  # per spatial axis, in D, H, W order
    base = np.stack([*mesh[::-1], np.ones_like(mesh[0])], axis=-1)  # x, y[, z], 1
    grid = base.reshape(-1, len(spatial) + 1) @ np.swapaxes(theta.astype(np.float64), 1, 2)
    return [grid.reshape(size[0], *spatial, len(spatial)).astype(theta.dtype)]


# ----------------------------------------------------------------------------- RoiAlign


def _ra_infer(types: Types, _c: object, call: Call) -> list[TensorType]:
    x, rois = need(at(types, 0), "RoiAlign"), need(at(types, 1), "RoiAlign", "rois")
    c = x.shape[1] if x.shape else UNKNOWN
    r = rois.shape[0] if rois.shape else UNKNOWN
    return [TensorType(x.dtype, (r, c, iattr(call, "output_height", 1),
                                 iattr(call, "output_width", 1)))]


def _bilinear_sample(img: np.ndarray, y: float, x: float) -> tuple[list[int], list[float]]:
    """Corner indices and weights of one RoiAlign sample (zero weights outside)."""
    h, w = img.shape[-2:]
    if y < -1.0 or y > h or x < -1.0 or x > w:
        return [0, 0, 0, 0], [0.0, 0.0, 0.0, 0.0]
    y, x = max(y, 0.0), max(x, 0.0)
    y0, x0 = int(y), int(x)
    if y0 >= h - 1:
        y0 = y1 = h - 1
        y = float(y0)
    else:
        y1 = y0 + 1
    if x0 >= w - 1:
        x0 = x1 = w - 1
        x = float(x0)
    else:
        x1 = x0 + 1
    ly, lx = y - y0, x - x0
    hy, hx = 1 - ly, 1 - lx
    return [y0 * w + x0, y0 * w + x1, y1 * w + x0, y1 * w + x1], [hy * hx, hy * lx, ly * hx,
                                                                  ly * lx]


def _ra_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    x, rois, batch = (need(at(inputs, i), "RoiAlign") for i in range(3))
    oh, ow = iattr(call, "output_height", 1), iattr(call, "output_width", 1)
    ratio, scale = iattr(call, "sampling_ratio"), fattr(call, "spatial_scale", 1.0)
    half = sattr(call, "coordinate_transformation_mode", "half_pixel") == "half_pixel"
    use_max = sattr(call, "mode", "avg") == "max"
    out = np.zeros((rois.shape[0], x.shape[1], oh, ow), np.float64)
    for r, box in enumerate(rois.astype(np.float64)):
        flat = x[int(batch[r])].reshape(x.shape[1], -1).astype(np.float64)
        x1, y1, x2, y2 = (v * scale - (0.5 if half else 0.0) for v in box)
        rw, rh = x2 - x1, y2 - y1
        if not half:
            rw, rh = max(rw, 1.0), max(rh, 1.0)
        bh, bw = rh / oh, rw / ow
        gh = ratio if ratio > 0 else int(np.ceil(rh / oh))
        gw = ratio if ratio > 0 else int(np.ceil(rw / ow))
        count = max(gh * gw, 1)
        for ph, pw in itertools.product(range(oh), range(ow)):
            acc = None
            for iy, ix in itertools.product(range(gh), range(gw)):
                yy = y1 + ph * bh + (iy + 0.5) * bh / gh
                xx = x1 + pw * bw + (ix + 0.5) * bw / gw
                pos, wts = _bilinear_sample(x[0], yy, xx)
                terms = [w * flat[:, p] for p, w in zip(pos, wts, strict=True)]
                if use_max:
                    v = np.max(terms, axis=0)
                    acc = v if acc is None else np.maximum(acc, v)
                else:
                    acc = sum(terms) if acc is None else acc + sum(terms)
            if acc is not None:
                out[r, :, ph, pw] = acc if use_max else acc / count
    return [out.astype(x.dtype)]


# ----------------------------------------------------------------------------- NMS


def _nms_infer(types: Types, _c: object, call: Call) -> list[TensorType]:
    return [TensorType("int64", (UNKNOWN, 3))]


def _iou(a: np.ndarray, b: np.ndarray) -> float:
    ya, yb = sorted((a[0], a[2])), sorted((b[0], b[2]))
    xa, xb = sorted((a[1], a[3])), sorted((b[1], b[3]))
    inter = max(0.0, min(ya[1], yb[1]) - max(ya[0], yb[0])) * \
        max(0.0, min(xa[1], xb[1]) - max(xa[0], xb[0]))
    union = (ya[1] - ya[0]) * (xa[1] - xa[0]) + (yb[1] - yb[0]) * (xb[1] - xb[0]) - inter
    return 0.0 if union <= 0 else inter / union


def _nms_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    boxes, scores = need(at(inputs, 0), "NMS"), need(at(inputs, 1), "NMS")
    limit_in, iou_in, score_in = (at(inputs, i) for i in (2, 3, 4))
    limit = 0 if limit_in is None else int(limit_in.reshape(-1)[0])
    iou_max = 0.0 if iou_in is None else float(iou_in.reshape(-1)[0])
    floor = None if score_in is None else float(score_in.reshape(-1)[0])
    b = boxes.astype(np.float64)
    if iattr(call, "center_point_box"):
        xc, yc, w, h = (b[..., i] for i in range(4))
        b = np.stack([yc - h / 2, xc - w / 2, yc + h / 2, xc + w / 2], axis=-1)
    rows = []
    for n, c in itertools.product(range(scores.shape[0]), range(scores.shape[1])):
        s = scores[n, c].astype(np.float64)
        order = [i for i in np.argsort(-s, kind="stable") if floor is None or s[i] > floor]
        kept: list[int] = []
        for i in order:
            if len(kept) >= limit:
                break
            if all(_iou(b[n, i], b[n, k]) <= iou_max for k in kept):
                kept.append(int(i))
        rows += [(n, c, k) for k in kept]
    return [np.asarray(rows, dtype=np.int64).reshape(-1, 3)]


# ----------------------------------------------------------------------------- Col2Im


def _window_attrs(call: Call, n: int) -> tuple[list[int], list[int], list[int]]:
    strides = lattr(call, "strides") or [1] * n
    dil = lattr(call, "dilations") or [1] * n
    pads = lattr(call, "pads") or [0] * (2 * n)
    return strides, dil, pads


def _c2i_infer(types: Types, consts: Arrays, call: Call) -> list[TensorType]:
    x = need(at(types, 0), "Col2Im")
    image, block = at(consts, 1), at(consts, 2)
    if x.shape is None or image is None or block is None:
        return [TensorType(x.dtype, None)]
    c = x.shape[1] // int(np.prod(ints(block))) if isinstance(x.shape[1], int) else UNKNOWN
    return [TensorType(x.dtype, (x.shape[0], c, *ints(image)))]


def _c2i_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    x = need(at(inputs, 0), "Col2Im")
    image, block = ints(need(at(inputs, 1), "Col2Im")), ints(need(at(inputs, 2), "Col2Im"))
    nd = len(image)
    strides, dil, pads = _window_attrs(call, nd)
    padded = [image[i] + pads[i] + pads[i + nd] for i in range(nd)]
    counts = [(padded[i] - dil[i] * (block[i] - 1) - 1) // strides[i] + 1 for i in range(nd)]
    c = x.shape[1] // int(np.prod(block))
    cols = x.reshape(x.shape[0], c, *block, *counts)
    out = np.zeros((x.shape[0], c, *padded), dtype=np.float64)
    for tap in itertools.product(*(range(k) for k in block)):
        dst = tuple(slice(tap[i] * dil[i], tap[i] * dil[i] + (counts[i] - 1) * strides[i] + 1,
                          strides[i]) for i in range(nd))
        block_at: tuple[int | slice, ...] = (slice(None), slice(None), *tap)
        out[(slice(None), slice(None), *dst)] += cols[block_at]
    crop = tuple(slice(pads[i], pads[i] + image[i]) for i in range(nd))
    return [out[(slice(None), slice(None), *crop)].astype(x.dtype)]


# ----------------------------------------------------------------------------- MaxUnpool


def _unpool_shape(x_shape: Sequence[Dim], call: Call) -> tuple[Dim, ...]:
    kernel = lattr(call, "kernel_shape") or []
    n = len(kernel)
    strides = lattr(call, "strides") or [1] * n
    pads = lattr(call, "pads") or [0] * (2 * n)
    spatial = [((d - 1) * strides[i] - pads[i] - pads[i + n] + kernel[i])
               if isinstance(d, int) else UNKNOWN for i, d in enumerate(x_shape[2:])]
    return (*x_shape[:2], *spatial)


def _mu_infer(types: Types, consts: Arrays, call: Call) -> list[TensorType]:
    x = need(at(types, 0), "MaxUnpool")
    given = at(consts, 2)
    if given is not None:
        return [TensorType(x.dtype, tuple(ints(given)))]
    if at(types, 2) is not None:
        return [TensorType(x.dtype, None if x.shape is None else (UNKNOWN,) * len(x.shape))]
    return [TensorType(x.dtype, None if x.shape is None else _unpool_shape(x.shape, call))]


def _mu_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    x, idx = need(at(inputs, 0), "MaxUnpool"), need(at(inputs, 1), "MaxUnpool", "I")
    given = at(inputs, 2)
    natural = tuple(int(d) for d in _unpool_shape(x.shape, call))
    shape = tuple(ints(given)) if given is not None else natural
    out = np.zeros(shape, dtype=x.dtype)
    # indices address the natural unpooled shape; a given output_shape only adds room
    out[np.unravel_index(idx.reshape(-1), natural)] = x.reshape(-1)
    return [out]


# ----------------------------------------------------------------------------- DeformConv


def _dc_infer(types: Types, _c: object, call: Call) -> list[TensorType]:
    x, w = need(at(types, 0), "DeformConv"), need(at(types, 1), "DeformConv", "W")
    off = need(at(types, 2), "DeformConv", "offset")
    if x.shape is None or w.shape is None or off.shape is None:
        return [TensorType(x.dtype, None)]
    return [TensorType(x.dtype, (x.shape[0], w.shape[0], *off.shape[2:]))]


def _dc_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    x, w, offset = (need(at(inputs, i), "DeformConv") for i in range(3))
    bias, mask = at(inputs, 3), at(inputs, 4)
    n, c, h, wd = x.shape
    m, cg, kh, kw = w.shape
    strides, dil, pads = _window_attrs(call, 2)
    group, og = iattr(call, "group", 1), iattr(call, "offset_group", 1)
    oh, ow = offset.shape[2:]
    off = offset.astype(np.float64).reshape(n, og, kh * kw, 2, oh, ow)
    msk = (np.ones((n, og, kh * kw, oh, ow)) if mask is None
           else mask.astype(np.float64).reshape(n, og, kh * kw, oh, ow))
    xs = x.astype(np.float64)
    cols = np.zeros((n, c, kh * kw, oh, ow))
    base_y = np.arange(oh)[:, None] * strides[0] - pads[0]
    base_x = np.arange(ow)[None, :] * strides[1] - pads[1]
    per_og = c // og
    for b, g, t in itertools.product(range(n), range(og), range(kh * kw)):
        i, j = divmod(t, kw)
        y = base_y + i * dil[0] + off[b, g, t, 0]
        xx = base_x + j * dil[1] + off[b, g, t, 1]
        y0, x0 = np.floor(y).astype(np.int64), np.floor(xx).astype(np.int64)
        val = np.zeros((per_og, oh, ow))
        for dy, dx in itertools.product((0, 1), (0, 1)):
            yi, xi = y0 + dy, x0 + dx
            wgt = (1 - np.abs(y - yi)) * (1 - np.abs(xx - xi))
            ok = (yi >= 0) & (yi < h) & (xi >= 0) & (xi < wd)
            src = xs[b, g * per_og:(g + 1) * per_og][:, np.clip(yi, 0, h - 1),
                                                    np.clip(xi, 0, wd - 1)]
            val += src * (wgt * ok)
        cols[b, g * per_og:(g + 1) * per_og, t] = val * msk[b, g, t]
    out = np.zeros((n, m, oh, ow))
    mg = m // group
    for g in range(group):
        wg = w[g * mg:(g + 1) * mg].reshape(mg, cg * kh * kw).astype(np.float64)
        cg_cols = cols[:, g * cg:(g + 1) * cg].reshape(n, cg * kh * kw, oh * ow)
        out[:, g * mg:(g + 1) * mg] = (wg @ cg_cols).reshape(n, mg, oh, ow)
    if bias is not None:
        out += bias.astype(np.float64)[None, :, None, None]
    return [out.astype(x.dtype)]


WINDOW = [attr("dilations", "ints"), attr("pads", "ints"), attr("strides", "ints")]
SCHEMAS = [
    schema("GridSample", 16, "X grid", "Y", _gs_infer, _gs_kernel,
           attrs=[attr("align_corners", "int", 0), attr("mode", "string", "linear"),
                  attr("padding_mode", "string", "zeros")],
           doc="sample X at the grid's normalised coordinates (nearest, linear, cubic)"),
    schema("AffineGrid", 20, "theta size:i64", "grid", _ag_infer, _ag_kernel,
           attrs=[attr("align_corners", "int", 0)],
           doc="the sampling grid of affine matrices theta for an output size"),
    schema("RoiAlign", 16, "X rois batch_indices:i64", "Y", _ra_infer, _ra_kernel,
           attrs=[attr("coordinate_transformation_mode", "string", "half_pixel"),
                  attr("mode", "string", "avg"), attr("output_height", "int", 1),
                  attr("output_width", "int", 1), attr("sampling_ratio", "int", 0),
                  attr("spatial_scale", "float", 1.0)],
           doc="bilinearly sampled average (or max) per bin of each region"),
    schema("NonMaxSuppression", 11, "boxes scores max_output_boxes_per_class:i64? "
           "iou_threshold? score_threshold?", "selected_indices", _nms_infer, _nms_kernel,
           attrs=[attr("center_point_box", "int", 0)], unit="scalar",
           doc="greedy per-class box selection by score and IoU"),
    schema("Col2Im", 18, "input image_shape:i64 block_shape:i64", "output", _c2i_infer,
           _c2i_kernel, attrs=WINDOW, doc="sum sliding blocks back into an image"),
    schema("MaxUnpool", 11, "X I:i64 output_shape:i64?", "output", _mu_infer, _mu_kernel,
           attrs=[attr("kernel_shape", "ints", required=True), attr("pads", "ints"),
                  attr("strides", "ints")],
           doc="scatter pooled values back to the positions MaxPool took them from"),
    schema("DeformConv", 19, "X W offset B? mask?", "Y", _dc_infer, _dc_kernel, unit="cube",
           attrs=[*WINDOW, attr("group", "int", 1), attr("kernel_shape", "ints"),
                  attr("offset_group", "int", 1)],
           doc="convolution whose taps sample at learned offsets (optionally masked)"),
]
