"""A NumPy reference of Caffe's forward pass (TEST phase), written from Caffe's own loops.

Independent of the frontend's ONNX mapping and of the op registry's kernels: convolution is
im2col, pooling follows Caffe's ``PoolingLayer`` (output size rounded up, the last window
dropped when it starts in the end padding, AVE divided by the window clipped to input + pad),
BatchNorm divides the stored statistics by the moving-average factor. Blobs are updated in
place as Caffe does (a layer whose top is its bottom overwrites it).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

F64 = np.float64


def _geometry(p: Any, n: int = 2) -> tuple[list[int], list[int], list[int], list[int]]:
    def per_axis(name: str, default: int) -> list[int]:
        h, w = f"{name.split('_')[0]}_h", f"{name.split('_')[0]}_w"
        if p.HasField(h) or p.HasField(w):
            return [getattr(p, h), getattr(p, w)]
        raw = getattr(p, name)
        values = ([raw] if p.HasField(name) else []) if isinstance(raw, int) else list(raw)
        return (values * n if len(values) == 1 else values) or [default] * n

    dil = list(getattr(p, "dilation", [])) or [1]
    return (per_axis("kernel_size", 0), per_axis("pad", 0), per_axis("stride", 1),
            dil * n if len(dil) == 1 else dil)


def conv(x: np.ndarray, w: np.ndarray, b: np.ndarray | None, p: Any) -> np.ndarray:
    k, pad, stride, dil = _geometry(p)
    g = p.group
    n, c, h, wd = x.shape
    xp = np.pad(x.astype(F64), ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])))
    oh = (h + 2 * pad[0] - (dil[0] * (k[0] - 1) + 1)) // stride[0] + 1
    ow = (wd + 2 * pad[1] - (dil[1] * (k[1] - 1) + 1)) // stride[1] + 1
    out = np.zeros((n, w.shape[0], oh, ow))
    cg, og = c // g, w.shape[0] // g
    for gi in range(g):
        cols = np.zeros((n, cg, k[0], k[1], oh, ow))
        for i in range(k[0]):
            for j in range(k[1]):
                hi, wj = i * dil[0], j * dil[1]
                cols[:, :, i, j] = xp[:, gi * cg:(gi + 1) * cg,
                                      hi:hi + stride[0] * oh:stride[0],
                                      wj:wj + stride[1] * ow:stride[1]]
        wg = w[gi * og:(gi + 1) * og].reshape(og, -1).astype(F64)
        out[:, gi * og:(gi + 1) * og] = np.einsum("ok,nkhw->nohw", wg,
                                                  cols.reshape(n, -1, oh, ow))
    return out + (0 if b is None else b.reshape(1, -1, 1, 1))


def deconv(x: np.ndarray, w: np.ndarray, b: np.ndarray | None, p: Any) -> np.ndarray:
    k, pad, stride, dil = _geometry(p)
    g = p.group
    n, c, h, wd = x.shape
    og = w.shape[1]
    full_h = stride[0] * (h - 1) + dil[0] * (k[0] - 1) + 1
    full_w = stride[1] * (wd - 1) + dil[1] * (k[1] - 1) + 1
    out = np.zeros((n, og * g, full_h, full_w))
    cg = c // g
    for gi in range(g):
        for i in range(k[0]):
            for j in range(k[1]):
                contrib = np.einsum("nchw,co->nohw", x[:, gi * cg:(gi + 1) * cg].astype(F64),
                                    w[gi * cg:(gi + 1) * cg, :, i, j].astype(F64))
                out[:, gi * og:(gi + 1) * og, i * dil[0]:i * dil[0] + stride[0] * h:stride[0],
                    j * dil[1]:j * dil[1] + stride[1] * wd:stride[1]] += contrib
    out = out[:, :, pad[0]:full_h - pad[0], pad[1]:full_w - pad[1]]
    return out + (0 if b is None else b.reshape(1, -1, 1, 1))


def pool(x: np.ndarray, p: Any) -> np.ndarray:
    n, c, h, w = x.shape
    if p.global_pooling:
        k, pad, stride = [h, w], [0, 0], [1, 1]
    else:
        k, pad, stride, _ = _geometry(p)
    rnd = math.floor if p.round_mode == 1 else math.ceil
    ph = int(rnd((h + 2 * pad[0] - k[0]) / stride[0])) + 1
    pw = int(rnd((w + 2 * pad[1] - k[1]) / stride[1])) + 1
    if pad[0] and (ph - 1) * stride[0] >= h + pad[0]:
        ph -= 1
    if pad[1] and (pw - 1) * stride[1] >= w + pad[1]:
        pw -= 1
    out = np.zeros((n, c, ph, pw))
    for i in range(ph):
        for j in range(pw):
            hs, ws = i * stride[0] - pad[0], j * stride[1] - pad[1]
            he, we = min(hs + k[0], h + pad[0]), min(ws + k[1], w + pad[1])
            size = (he - hs) * (we - ws)
            hs, ws, he, we = max(hs, 0), max(ws, 0), min(he, h), min(we, w)
            window = x[:, :, hs:he, ws:we].astype(F64)
            if p.pool == 0:
                out[:, :, i, j] = window.max(axis=(2, 3))
            else:
                out[:, :, i, j] = window.sum(axis=(2, 3)) / size
    return out


def _channel(v: np.ndarray, rank: int) -> np.ndarray:
    return v.reshape(1, -1, *(1,) * (rank - 2))


def batch_norm(x: np.ndarray, blobs: Sequence[np.ndarray], p: Any) -> np.ndarray:
    x = x.astype(F64)
    if p.HasField("use_global_stats") and not p.use_global_stats:
        axes = (0, *range(2, x.ndim))
        mean = x.mean(axis=axes, keepdims=True)
        var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
        return (x - mean) / np.sqrt(var + F64(np.float32(p.eps)))
    f = float(blobs[2].ravel()[0])
    factor = 0.0 if f == 0 else 1.0 / f
    mean, var = blobs[0].astype(F64) * factor, blobs[1].astype(F64) * factor
    return (x - _channel(mean, x.ndim)) / np.sqrt(_channel(var, x.ndim) + F64(np.float32(p.eps)))


def _affine_shape(x: np.ndarray, axis: int, v: np.ndarray) -> np.ndarray:
    axis = axis % x.ndim
    return v.reshape((1,) * axis + v.shape + (1,) * (x.ndim - axis - v.ndim))


def forward(net: Any, weights: Mapping[str, Sequence[np.ndarray]],
            feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every blob after Caffe's forward pass over the net's layers (inputs from ``feeds``)."""
    blobs: dict[str, np.ndarray] = {k: v.astype(F64) for k, v in feeds.items()}
    for layer in net.layer:
        t = layer.type
        if t == "Input":
            continue
        xs = [blobs[b] for b in layer.bottom]
        w = [np.asarray(a, F64) for a in weights.get(layer.name, [])]
        x = xs[0] if xs else None
        if t in ("Convolution", "Deconvolution"):
            p = layer.convolution_param
            b = w[1] if p.bias_term else None
            y = (conv if t == "Convolution" else deconv)(x, w[0], b, p)
        elif t == "Pooling":
            y = pool(x, layer.pooling_param)
        elif t == "BatchNorm":
            y = batch_norm(x, w, layer.batch_norm_param)
        elif t == "Scale":
            p = layer.scale_param
            s = xs[1] if len(xs) > 1 else w[0]
            y = x * _affine_shape(x, p.axis, s)
            if p.bias_term:
                y = y + _affine_shape(x, p.axis, w[1 if len(xs) == 1 else 0])
        elif t == "InnerProduct":
            p = layer.inner_product_param
            lead = x.shape[:p.axis]
            flat = x.reshape(*lead, -1)
            wt = w[0].reshape(flat.shape[-1], -1) if p.transpose else w[0].reshape(-1,
                                                                                  flat.shape[-1]).T
            y = flat @ wt + (w[1].ravel() if p.bias_term else 0)
        elif t == "ReLU":
            y = np.where(x > 0, x, x * F64(np.float32(layer.relu_param.negative_slope)))
        elif t == "PReLU":
            a = w[0].ravel()
            slope = a[0] if layer.prelu_param.channel_shared else _channel(a, x.ndim)
            y = np.where(x > 0, x, x * slope)
        elif t == "Sigmoid":
            y = 1 / (1 + np.exp(-x))
        elif t == "TanH":
            y = np.tanh(x)
        elif t == "Softmax":
            e = np.exp(x - x.max(axis=layer.softmax_param.axis, keepdims=True))
            y = e / e.sum(axis=layer.softmax_param.axis, keepdims=True)
        elif t == "Dropout":
            y = x
        elif t == "Eltwise":
            p = layer.eltwise_param
            if p.operation == 0:
                y = np.prod(xs, axis=0)
            elif p.operation == 2:
                y = np.max(xs, axis=0)
            else:
                coeff = list(p.coeff) or [1.0] * len(xs)
                y = sum(F64(np.float32(c)) * v for c, v in zip(coeff, xs, strict=True))
        elif t == "Concat":
            y = np.concatenate(xs, axis=layer.concat_param.axis)
        elif t == "Slice":
            p = layer.slice_param
            parts = np.split(x, list(p.slice_point) or len(layer.top), axis=p.axis)
            for top, part in zip(layer.top, parts, strict=True):
                blobs[top] = part
            continue
        elif t == "Flatten":
            p = layer.flatten_param
            end = p.end_axis % x.ndim
            y = x.reshape(*x.shape[:p.axis], -1, *x.shape[end + 1:])
        elif t == "Reshape":
            p = layer.reshape_param
            count = x.ndim - p.axis if p.num_axes == -1 else p.num_axes
            shape = [x.shape[p.axis + i] if d == 0 else d for i, d in enumerate(p.shape.dim)]
            y = x.reshape(*x.shape[:p.axis], *shape, *x.shape[p.axis + count:])
        else:
            raise NotImplementedError(t)
        blobs[layer.top[0]] = y
    return blobs
