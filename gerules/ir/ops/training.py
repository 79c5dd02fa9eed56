"""Training optimizers (domain ai.onnx.preview.training): Adagrad, Momentum, Adam.

Invariants (ONNX's update equations; ``R`` the learning rate, ``T`` the step count, both
scalars; the tensors come as ``X1..Xn, G1..Gn`` then one or two state groups):
- the gradient is regularised first: ``G' = norm_coefficient * X + G``;
- Adagrad: ``H' = H + G'^2``; ``X' = X - R / (1 + T * decay_factor) * G' / (sqrt(H') + eps)``;
  outputs ``X'..., H'...``;
- Momentum: ``V' = alpha * V + (T > 0 ? beta : 1) * G'``; ``X' = X - R * V'`` (standard) or
  ``X - R * (G' + alpha * V')`` (nesterov); outputs ``X'..., V'...``;
- Adam: ``V' = alpha V + (1 - alpha) G'``, ``H' = beta H + (1 - beta) G'^2``, the rate
  bias-corrected by ``sqrt(1 - beta^T) / (1 - alpha^T)`` when ``T > 0``, ``X' = (1 -
  norm_coefficient_post) (X - R' V' / (sqrt(H') + eps))``; outputs ``X'..., V'..., H'...``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

import numpy as np

from ...errors import ShapeError
from ..graph import TensorType
from ..registry import Call
from ._common import Arrays, Types, at, attr, fattr, need, sattr, schema

DOMAIN = "ai.onnx.preview.training"
T = TypeVar("T")


def _groups(items: Sequence[T], count: int, op: str) -> list[list[T]]:
    rest = list(items[2:])
    if len(rest) % count:
        raise ShapeError(f"{op}: {len(rest)} tensor inputs do not form {count} groups")
    n = len(rest) // count
    return [rest[i * n:(i + 1) * n] for i in range(count)]


def _tensors(inputs: Arrays, count: int, op: str) -> list[list[np.ndarray]]:
    """The tensor groups of ``inputs`` (after ``R`` and ``T``), each tensor present."""
    return [[need(x, op) for x in group] for group in _groups(inputs, count, op)]


def _infer(count: int, op: str) -> Callable[[Types, object, Call], list[TensorType]]:
    def infer(types: Types, _c: object, call: Call) -> list[TensorType]:
        groups = _groups(types, count, op)
        outs = [groups[0], *groups[2:]]  # X and the states; G has no output
        return [need(t, op) for g in outs for t in g][: call.num_outputs]

    return infer


def _scalars(inputs: Arrays, op: str) -> tuple[float, int]:
    return (float(need(at(inputs, 0), op, "R").reshape(-1)[0]),
            int(need(at(inputs, 1), op, "T").reshape(-1)[0]))


def _adagrad(inputs: Arrays, call: Call) -> list[np.ndarray]:
    r, t = _scalars(inputs, "Adagrad")
    xs, gs, hs = _tensors(inputs, 3, "Adagrad")
    rate = r / (1 + t * fattr(call, "decay_factor", 0.0))
    eps, norm = fattr(call, "epsilon", 1e-6), fattr(call, "norm_coefficient", 0.0)
    new_x, new_h = [], []
    for x, g, h in zip(xs, gs, hs, strict=True):
        g2 = norm * x + g
        h2 = h + g2 * g2
        new_x.append((x - rate * g2 / (np.sqrt(h2) + eps)).astype(x.dtype))
        new_h.append(h2.astype(h.dtype))
    return new_x + new_h


def _momentum(inputs: Arrays, call: Call) -> list[np.ndarray]:
    r, t = _scalars(inputs, "Momentum")
    xs, gs, vs = _tensors(inputs, 3, "Momentum")
    alpha, beta = fattr(call, "alpha"), fattr(call, "beta")
    norm, mode = fattr(call, "norm_coefficient"), sattr(call, "mode", "standard")
    if mode not in ("standard", "nesterov"):
        raise ShapeError(f"Momentum: mode '{mode}' is not standard or nesterov")
    new_x, new_v = [], []
    for x, g, v in zip(xs, gs, vs, strict=True):
        g2 = norm * x + g
        v2 = alpha * v + (beta if t > 0 else 1.0) * g2
        step = v2 if mode == "standard" else g2 + alpha * v2
        new_x.append((x - r * step).astype(x.dtype))
        new_v.append(v2.astype(v.dtype))
    return new_x + new_v


def _adam(inputs: Arrays, call: Call) -> list[np.ndarray]:
    r, t = _scalars(inputs, "Adam")
    xs, gs, vs, hs = _tensors(inputs, 4, "Adam")
    alpha, beta = fattr(call, "alpha", 0.9), fattr(call, "beta", 0.999)
    eps, norm = fattr(call, "epsilon", 1e-6), fattr(call, "norm_coefficient")
    post = fattr(call, "norm_coefficient_post")
    rate = r * np.sqrt(1 - beta ** t) / (1 - alpha ** t) if t > 0 else r
    new_x, new_v, new_h = [], [], []
    for x, g, v, h in zip(xs, gs, vs, hs, strict=True):
        g2 = norm * x + g
        v2 = alpha * v + (1 - alpha) * g2
        h2 = beta * h + (1 - beta) * g2 * g2
        x2 = (1 - post) * (x - rate * v2 / (np.sqrt(h2) + eps))
        new_x.append(x2.astype(x.dtype))
        new_v.append(v2.astype(v.dtype))
        new_h.append(h2.astype(h.dtype))
    return new_x + new_v + new_h


SCHEMAS = [
    schema("Adagrad", 1, "R T inputs*", "outputs*", _infer(3, "Adagrad"), _adagrad,
           domain=DOMAIN, attrs=[attr("decay_factor", "float", 0.0),
                                 attr("epsilon", "float", 1e-6),
                                 attr("norm_coefficient", "float", 0.0)],
           doc="one Adagrad step: new tensors and accumulated squared gradients"),
    schema("Momentum", 1, "R T inputs*", "outputs*", _infer(3, "Momentum"), _momentum,
           domain=DOMAIN, attrs=[attr("alpha", "float", required=True),
                                 attr("beta", "float", required=True),
                                 attr("mode", "string", required=True),
                                 attr("norm_coefficient", "float", required=True)],
           doc="one momentum (standard or Nesterov) step: new tensors and velocities"),
    schema("Adam", 1, "R T inputs*", "outputs*", _infer(4, "Adam"), _adam,
           domain=DOMAIN, attrs=[attr("alpha", "float", 0.9), attr("beta", "float", 0.999),
                                 attr("epsilon", "float", 1e-6),
                                 attr("norm_coefficient", "float", 0.0),
                                 attr("norm_coefficient_post", "float", 0.0)],
           doc="one Adam step: new tensors, first and second moments"),
]
