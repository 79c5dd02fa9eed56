"""Loss ops (ai.onnx): NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss.

Invariants:
- ``input`` is ``[N, C]`` or ``[N, C, d1, ...]`` and ``target`` the class index per sample
  ``[N]`` / ``[N, d1, ...]``; the per-element loss is ``-input[n, target, ...] *
  weight[target]`` (weight 1 without ``weight``), 0 where ``target == ignore_index``.
- ``reduction``: "none" keeps the target's shape, "sum" sums, "mean" divides the sum by the
  summed weights of the elements not ignored (their count without ``weight``); the result is a
  scalar for "sum" and "mean".
- SoftmaxCrossEntropyLoss is that loss over ``log_softmax(scores, axis=1)``; its optional
  second output is the log-probabilities. Both compute in float32 (float64 in float64).
"""

from __future__ import annotations

import numpy as np

from ...errors import ShapeError
from ..graph import TensorType
from ..registry import Call
from ._common import Arrays, Types, at, attr, need, sattr, schema

REDUCTIONS = ("none", "sum", "mean")
LOSS_ATTRS = [attr("ignore_index", "int"), attr("reduction", "string", "mean")]


def _loss_type(x: TensorType, target: TensorType, call: Call, op: str) -> TensorType:
    reduction = sattr(call, "reduction", "mean")
    if reduction not in REDUCTIONS:
        raise ShapeError(f"{op}: reduction '{reduction}' is not one of {REDUCTIONS}")
    if x.shape is not None and len(x.shape) < 2:
        raise ShapeError(f"{op}: input must have rank 2 or more, got {len(x.shape)}")
    if target.dtype not in ("int32", "int64"):
        raise ShapeError(f"{op}: target must be int32 or int64, got {target.dtype}")
    return TensorType(x.dtype, target.shape if reduction == "none" else ())


def nll(logp: np.ndarray, target: np.ndarray, weight: np.ndarray | None, call: Call
        ) -> np.ndarray:
    """The negative log-likelihood loss of ``logp`` (computed in its own dtype)."""
    ignore = call.attrs.get("ignore_index")
    c = logp.shape[1]
    t = target.astype(np.int64)
    keep = np.ones(t.shape, dtype=bool) if ignore is None else t != ignore
    safe = np.where(keep, t, 0)
    if (safe < 0).any() or (safe >= c).any():
        raise ShapeError(f"target holds a class outside [0, {c})")
    picked = np.take_along_axis(logp, np.expand_dims(safe, 1), axis=1).squeeze(1)
    w = np.ones(t.shape, logp.dtype) if weight is None else weight.astype(logp.dtype)[safe]
    w = np.where(keep, w, 0).astype(logp.dtype)
    loss: np.ndarray = -picked * w
    reduction = sattr(call, "reduction", "mean")
    if reduction == "sum":
        return np.asarray(loss.sum(), dtype=logp.dtype)
    if reduction == "mean":
        return np.asarray(loss.sum() / w.sum(), dtype=logp.dtype)
    return loss


def _work(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float64 if x.dtype == np.float64 else np.float32)


def _nll_infer(types: Types, _c: object, call: Call) -> list[TensorType]:
    x, target = need(at(types, 0), "NLLLoss"), need(at(types, 1), "NLLLoss", "target")
    return [_loss_type(x, target, call, "NegativeLogLikelihoodLoss")]


def _nll_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    x, target = need(at(inputs, 0), "NLLLoss"), need(at(inputs, 1), "NLLLoss")
    w = at(inputs, 2)
    with np.errstate(all="ignore"):
        loss = nll(_work(x), target, None if w is None else _work(w), call)
    return [loss.astype(x.dtype)]


def _sce_infer(types: Types, _c: object, call: Call) -> list[TensorType]:
    x, labels = need(at(types, 0), "SCELoss"), need(at(types, 1), "SCELoss", "labels")
    return [_loss_type(x, labels, call, "SoftmaxCrossEntropyLoss"), x][: max(1,
                                                                            call.num_outputs)]


def _sce_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    x, labels = need(at(inputs, 0), "SCELoss"), need(at(inputs, 1), "SCELoss")
    w = at(inputs, 2)
    xs = _work(x)
    with np.errstate(all="ignore"):
        z = xs - xs.max(axis=1, keepdims=True)
        logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
        loss = nll(logp, labels, None if w is None else _work(w), call)
    return [loss.astype(x.dtype), logp.astype(x.dtype)][: max(1, call.num_outputs)]


SCHEMAS = [
    schema("NegativeLogLikelihoodLoss", 12, "input target weight?", "loss", _nll_infer,
           _nll_kernel, attrs=LOSS_ATTRS,
           doc="-input[n, target[n]] * weight[target[n]], reduced by 'reduction'"),
    schema("SoftmaxCrossEntropyLoss", 12, "scores labels weights?", "output log_prob?",
           _sce_infer, _sce_kernel, attrs=LOSS_ATTRS,
           doc="NegativeLogLikelihoodLoss of log_softmax(scores, axis=1)"),
]
