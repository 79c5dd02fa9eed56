"""Recurrent and stateful sequence ops (ai.onnx): RNN, GRU, LSTM, LinearAttention,
CausalConvWithState.

Invariants:
- RNN/GRU/LSTM follow the ONNX equations: ``X`` is ``[seq, batch, input]`` (``layout=1``:
  ``[batch, seq, input]``), weights are per direction (``forward``, ``reverse`` or
  ``bidirectional``), gates in ONNX order (GRU z, r, h; LSTM i, o, f, c), bias ``[Wb, Rb]``,
  optional peepholes (LSTM), ``clip`` on the gate pre-activations, ``activations`` with
  ``activation_alpha``/``activation_beta`` (defaults: RNN Tanh; GRU Sigmoid, Tanh; LSTM
  Sigmoid, Tanh, Tanh). Past ``sequence_lens[b]`` a batch entry's state stays and its ``Y``
  rows are zero. Outputs: ``Y [seq, dirs, batch, hidden]`` (``layout=1``: ``[batch, seq,
  dirs, hidden]``), the last state ``Y_h`` (and ``Y_c``). Computed in float32 (float64 kept).
- LinearAttention (opset 27) runs the recurrent state ``S [batch, kv_heads, d_k, d_v]`` step by
  step: ``linear`` adds ``k v^T``; ``gated`` first decays ``S`` by ``exp(decay)``; ``delta``
  replaces ``v`` by ``beta * (v - S^T k)``; ``gated_delta`` does both; each query reads
  ``scale * q S`` (``scale`` 0 or absent: ``1 / sqrt(d_k)``; KV heads repeat for grouped
  queries). ``chunk_size`` is a tuning hint without effect on the result.
- CausalConvWithState: a depthwise 1-D convolution over ``past_state ++ input`` (zeros
  without a past state), optionally followed by SiLU; ``present_state`` is the last
  ``k - 1`` steps of that concatenation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ...errors import ShapeError
from ..graph import Dim, TensorType
from ..registry import Call
from ._common import Arrays, Types, at, attr, fattr, iattr, need, sattr, schema

Act = Callable[[np.ndarray], np.ndarray]


def _act(name: str, alpha: float | None, beta: float | None) -> Act:
    a, b = alpha, beta
    table: dict[str, Act] = {
        "tanh": np.tanh,
        "relu": lambda x: np.maximum(x, 0),
        "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
        "affine": lambda x: (1.0 if a is None else a) * x + (0.0 if b is None else b),
        "leakyrelu": lambda x: np.where(x >= 0, x, (0.01 if a is None else a) * x),
        "thresholdedrelu": lambda x: np.where(x > (1.0 if a is None else a), x, 0),
        "scaledtanh": lambda x: (1.0 if a is None else a) * np.tanh((1.0 if b is None else b)
                                                                    * x),
        "hardsigmoid": lambda x: np.clip((0.2 if a is None else a) * x
                                         + (0.5 if b is None else b), 0, 1),
        "elu": lambda x: np.where(x >= 0, x, (1.0 if a is None else a) * (np.exp(x) - 1)),
        "softsign": lambda x: x / (1 + np.abs(x)),
        "softplus": lambda x: np.log1p(np.exp(x)),
    }
    fn = table.get(name.lower())
    if fn is None:
        raise ShapeError(f"unknown recurrent activation '{name}'")
    return fn


def _activations(call: Call, defaults: Sequence[str], dirs: int) -> list[list[Act]]:
    """Per direction, the activation functions (``len(defaults)`` of them)."""
    names = list(call.attrs.get("activations") or ()) or list(defaults) * dirs  # type: ignore
    alphas = list(call.attrs.get("activation_alpha") or ())  # type: ignore[arg-type]
    betas = list(call.attrs.get("activation_beta") or ())  # type: ignore[arg-type]
    if len(names) == len(defaults) and dirs == 2:
        names = names * 2
    fns = [_act(str(n), alphas[i] if i < len(alphas) else None,
                betas[i] if i < len(betas) else None) for i, n in enumerate(names)]
    k = len(defaults)
    return [fns[d * k:(d + 1) * k] for d in range(dirs)]


def _dirs(call: Call) -> int:
    d = sattr(call, "direction", "forward")
    if d not in ("forward", "reverse", "bidirectional"):
        raise ShapeError(f"direction '{d}' is not forward, reverse or bidirectional")
    return 2 if d == "bidirectional" else 1


def _rnn_infer(outputs: int) -> Callable[[Types, object, Call], list[TensorType]]:
    def infer(types: Types, _c: object, call: Call) -> list[TensorType]:
        x = need(at(types, 0), "RNN")
        hidden = iattr(call, "hidden_size")
        dirs = _dirs(call)
        if x.shape is None or len(x.shape) != 3:
            return [TensorType(x.dtype, None)] * max(1, call.num_outputs)
        batch_first = iattr(call, "layout") == 1
        seq, batch = (x.shape[1], x.shape[0]) if batch_first else (x.shape[0], x.shape[1])
        y: tuple[Dim, ...] = ((batch, seq, dirs, hidden) if batch_first
                              else (seq, dirs, batch, hidden))
        state: tuple[Dim, ...] = (batch, dirs, hidden) if batch_first else (dirs, batch, hidden)
        outs = [TensorType(x.dtype, y)] + [TensorType(x.dtype, state)] * (outputs - 1)
        return outs[: max(1, call.num_outputs)]

    return infer


Cell = Callable[[np.ndarray, list[np.ndarray], int], list[np.ndarray]]


def _run_recurrent(inputs: Arrays, call: Call, gates: int, defaults: Sequence[str],
                   states: int, cell: Callable[..., list[np.ndarray]]) -> list[np.ndarray]:
    x = need(at(inputs, 0), "RNN")
    work = np.float64 if x.dtype == np.float64 else np.float32
    w, r = need(at(inputs, 1), "RNN", "W").astype(work), need(at(inputs, 2), "RNN", "R")
    r = r.astype(work)
    batch_first = iattr(call, "layout") == 1
    xs = (x.transpose(1, 0, 2) if batch_first else x).astype(work)
    seq, batch, _ = xs.shape
    hidden, dirs = iattr(call, "hidden_size") or r.shape[-1], _dirs(call)
    b = at(inputs, 3)
    bias = np.zeros((dirs, 2 * gates * hidden), work) if b is None else b.astype(work)
    lens_in = at(inputs, 4)
    lens = np.full(batch, seq, np.int64) if lens_in is None else lens_in.astype(np.int64)
    init = [at(inputs, 5 + i) for i in range(states)]
    extra = at(inputs, 7) if states == 2 else None  # LSTM peepholes
    if batch_first:
        init = [None if s is None else s.transpose(1, 0, 2) for s in init]
    acts = _activations(call, defaults, dirs)
    clip = call.attrs.get("clip")
    reverse = sattr(call, "direction", "forward") == "reverse"
    y = np.zeros((seq, dirs, batch, hidden), work)
    finals = [np.zeros((dirs, batch, hidden), work) for _ in range(states)]
    for d in range(dirs):
        backward = reverse or d == 1
        st = [np.zeros((batch, hidden), work) if s is None else s[d].astype(work)
              for s in init]
        for step in range(seq):
            alive = np.zeros(batch, bool)
            t_idx = np.empty(batch, np.int64)
            for bi in range(batch):  # reverse runs over each entry's own valid steps
                t_idx[bi] = (lens[bi] - 1 - step) if backward else step
                alive[bi] = step < lens[bi]
            xt = xs[np.clip(t_idx, 0, seq - 1), np.arange(batch)]
            gx = xt @ w[d].T + bias[d][: gates * hidden]
            gx = gx if clip is None else gx  # clip applies to the sum below
            new = cell(gx, st, r[d], bias[d][gates * hidden:], acts[d], hidden,
                       None if clip is None else float(clip),  # type: ignore[arg-type]
                       None if extra is None else extra[d].astype(work), call)
            keep = alive[:, None]
            st = [np.where(keep, n, o) for n, o in zip(new, st, strict=True)]
            for bi in range(batch):
                if alive[bi]:
                    y[t_idx[bi], d, bi] = st[0][bi]
        for i in range(states):
            finals[i][d] = st[i]
    if batch_first:
        return [o.astype(x.dtype) for o in (y.transpose(2, 0, 1, 3),
                                            *(f.transpose(1, 0, 2) for f in finals))]
    return [o.astype(x.dtype) for o in (y, *finals)]


def _clip(v: np.ndarray, clip: float | None) -> np.ndarray:
    return v if clip is None else np.clip(v, -clip, clip)


def _rnn_cell(gx: np.ndarray, st: list[np.ndarray], r: np.ndarray, rb: np.ndarray,
              acts: list[Act], hidden: int, clip: float | None, _p: object,
              _call: Call) -> list[np.ndarray]:
    return [acts[0](_clip(gx + st[0] @ r.T + rb, clip))]


def _gru_cell(gx: np.ndarray, st: list[np.ndarray], r: np.ndarray, rb: np.ndarray,
              acts: list[Act], hidden: int, clip: float | None, _p: object,
              call: Call) -> list[np.ndarray]:
    h = st[0]
    f, g = acts
    xz, xr, xh = (gx[:, i * hidden:(i + 1) * hidden] for i in range(3))
    rz, rr, rh = (r[i * hidden:(i + 1) * hidden] for i in range(3))
    bz, br, bh = (rb[i * hidden:(i + 1) * hidden] for i in range(3))
    z = f(_clip(xz + h @ rz.T + bz, clip))
    rt = f(_clip(xr + h @ rr.T + br, clip))
    if iattr(call, "linear_before_reset"):
        ht = g(_clip(xh + rt * (h @ rh.T + bh), clip))
    else:
        ht = g(_clip(xh + (rt * h) @ rh.T + bh, clip))
    return [(1 - z) * ht + z * h]


def _lstm_cell(gx: np.ndarray, st: list[np.ndarray], r: np.ndarray, rb: np.ndarray,
               acts: list[Act], hidden: int, clip: float | None, p: np.ndarray | None,
               call: Call) -> list[np.ndarray]:
    h, c = st
    f, g, act_h = acts
    pre = gx + h @ r.T + rb
    i_, o_, f_, c_ = (pre[:, k * hidden:(k + 1) * hidden] for k in range(4))
    pi, po, pf = ((p[k * hidden:(k + 1) * hidden] for k in range(3)) if p is not None
                  else (0, 0, 0))
    it = f(_clip(i_ + pi * c, clip))
    ft = f(_clip(f_ + pf * c, clip))
    if iattr(call, "input_forget"):
        ft = 1 - it
    ct = g(_clip(c_, clip))
    c_new = ft * c + it * ct
    ot = f(_clip(o_ + po * c_new, clip))
    return [ot * act_h(c_new), c_new]


RNN_ATTRS = [attr("activation_alpha", "floats"), attr("activation_beta", "floats"),
             attr("activations", "strings"), attr("clip", "float"),
             attr("direction", "string", "forward"), attr("hidden_size", "int"),
             attr("layout", "int", 0)]


def _rnn_kernel(gates: int, defaults: Sequence[str], states: int,
                cell: Callable[..., list[np.ndarray]]) -> Callable[[Arrays, Call],
                                                                   list[np.ndarray]]:
    def kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
        with np.errstate(all="ignore"):
            out = _run_recurrent(inputs, call, gates, defaults, states, cell)
        return out[: max(1, call.num_outputs)]

    return kernel


# ----------------------------------------------------------------------------- LinearAttention


def _heads(x: np.ndarray, heads: int) -> np.ndarray:
    b, t, hd = x.shape
    if hd % heads:
        raise ShapeError(f"LinearAttention: last dim {hd} does not split into {heads} heads")
    return x.reshape(b, t, heads, hd // heads).transpose(0, 2, 1, 3).astype(np.float32)


def _la_infer(types: Types, _c: object, call: Call) -> list[TensorType]:
    q, k, v = (need(at(types, i), "LinearAttention") for i in range(3))
    qh, kvh = iattr(call, "q_num_heads"), iattr(call, "kv_num_heads")
    if q.shape is None or k.shape is None or v.shape is None or not qh or not kvh:
        return [TensorType(q.dtype, None), TensorType(q.dtype, None)][: call.num_outputs]
    dk, dv = q.shape[2] // qh, v.shape[2] // kvh  # type: ignore[operator]
    past = at(types, 3)
    return [TensorType(q.dtype, (q.shape[0], q.shape[1], qh * dv)),
            TensorType(q.dtype if past is None else past.dtype,
                       (q.shape[0], kvh, dk, dv))][: max(1, call.num_outputs)]


def _la_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    query, key, value = (need(at(inputs, i), "LinearAttention") for i in range(3))
    past, decay, beta = (at(inputs, i) for i in (3, 4, 5))
    rule = sattr(call, "update_rule", "gated_delta")
    qh, kvh = iattr(call, "q_num_heads"), iattr(call, "kv_num_heads")
    if rule not in ("linear", "gated", "delta", "gated_delta"):
        raise ShapeError(f"LinearAttention: unknown update_rule '{rule}'")
    if qh <= 0 or kvh <= 0 or qh % kvh:
        raise ShapeError(f"LinearAttention: q_num_heads {qh} is not a multiple of "
                         f"kv_num_heads {kvh}")
    gated, delta = rule in ("gated", "gated_delta"), rule in ("delta", "gated_delta")
    if gated != (decay is not None) or delta != (beta is not None):
        raise ShapeError(f"LinearAttention: update_rule '{rule}' needs "
                         f"{'decay ' if gated else ''}{'beta' if delta else ''} exactly")
    b, t, _ = query.shape
    q, k, v = _heads(query, qh), _heads(key, kvh), _heads(value, kvh)
    dk, dv = q.shape[-1], v.shape[-1]
    if decay is not None:
        g = (decay.reshape(b, t, kvh, 1).transpose(0, 2, 1, 3) if decay.shape[-1] == kvh
             else _heads(decay, kvh)).astype(np.float32)
    if beta is not None:
        bt = beta.reshape(b, t, beta.shape[-1], 1).transpose(0, 2, 1, 3).astype(np.float32)
    state = (np.zeros((b, kvh, dk, dv), np.float32) if past is None
             else past.astype(np.float32).copy())
    scale = fattr(call, "scale", 0.0) or 1 / np.sqrt(dk)
    out = np.zeros((b, qh, t, dv), np.float32)
    for i in range(t):
        kt, vt = k[:, :, i], v[:, :, i]
        if gated:
            state = state * np.exp(g[:, :, i])[..., None]
        if delta:
            vt = bt[:, :, i] * (vt - np.einsum("bhdm,bhd->bhm", state, kt))
        state = state + kt[..., :, None] * vt[..., None, :]
        read = np.repeat(state, qh // kvh, axis=1)
        out[:, :, i] = scale * np.einsum("bhd,bhdm->bhm", q[:, :, i], read)
    y = out.transpose(0, 2, 1, 3).reshape(b, t, qh * dv).astype(query.dtype)
    present = state.astype(query.dtype if past is None else past.dtype)
    return [y, present][: max(1, call.num_outputs)]


# ----------------------------------------------------------------------------- CausalConv


def _ccs_infer(types: Types, _c: object, call: Call) -> list[TensorType]:
    x, w = need(at(types, 0), "CausalConvWithState"), need(at(types, 1), "CausalConv", "W")
    if x.shape is None or w.shape is None:
        return [x, TensorType(x.dtype, None)][: max(1, call.num_outputs)]
    k = w.shape[2]
    state = TensorType(x.dtype, (x.shape[0], x.shape[1],
                                 k - 1 if isinstance(k, int) else "?"))
    return [x, state][: max(1, call.num_outputs)]


def _ccs_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    x, w = need(at(inputs, 0), "CausalConvWithState"), need(at(inputs, 1), "CausalConv")
    bias, past = at(inputs, 2), at(inputs, 3)
    act = sattr(call, "activation", "none")
    if act not in ("none", "silu", "swish"):
        raise ShapeError(f"CausalConvWithState: unknown activation '{act}'")
    k = w.shape[2]
    pad = np.zeros((*x.shape[:2], k - 1), x.dtype) if past is None else past
    full = np.concatenate([pad, x], axis=2)
    work: type[np.floating] = np.float64 if x.dtype == np.float64 else np.float32
    fw, ww = full.astype(work), w[:, 0, :].astype(work)
    y = sum(fw[:, :, j:j + x.shape[2]] * ww[None, :, j, None] for j in range(k))
    if bias is not None:
        y = y + bias.astype(work)[None, :, None]
    y = np.asarray(y).astype(x.dtype)
    if act != "none":
        yw = y.astype(np.float32)
        y = (yw / (1 + np.exp(-yw))).astype(x.dtype)
    return [y, full[:, :, full.shape[2] - (k - 1):]][: max(1, call.num_outputs)]


_RNN_PORTS = "X W R B? sequence_lens? initial_h?"
SCHEMAS = [
    schema("RNN", 7, _RNN_PORTS, "Y? Y_h?", _rnn_infer(2),
           _rnn_kernel(1, ("Tanh",), 1, _rnn_cell), attrs=RNN_ATTRS,
           doc="simple recurrent network: H = f(X W^T + H R^T + b)"),
    schema("GRU", 7, _RNN_PORTS, "Y? Y_h?", _rnn_infer(2),
           _rnn_kernel(3, ("Sigmoid", "Tanh"), 1, _gru_cell),
           attrs=[*RNN_ATTRS, attr("linear_before_reset", "int", 0)],
           doc="gated recurrent unit (gates z, r, h)"),
    schema("LSTM", 7, _RNN_PORTS + " initial_c? P?", "Y? Y_h? Y_c?", _rnn_infer(3),
           _rnn_kernel(4, ("Sigmoid", "Tanh", "Tanh"), 2, _lstm_cell),
           attrs=[*RNN_ATTRS, attr("input_forget", "int", 0)],
           doc="long short-term memory (gates i, o, f, c; optional peepholes)"),
    schema("LinearAttention", 27, "query key value past_state? decay? beta?",
           "output present_state?", _la_infer, _la_kernel,
           attrs=[attr("chunk_size", "int", 64), attr("kv_num_heads", "int"),
                  attr("q_num_heads", "int"), attr("scale", "float", 0.0),
                  attr("update_rule", "string", "gated_delta")],
           doc="recurrent linear attention (linear, gated, delta, gated_delta updates)"),
    schema("CausalConvWithState", 27, "input weight bias? past_state?",
           "output present_state?", _ccs_infer, _ccs_kernel,
           attrs=[attr("activation", "string", "none")],
           doc="depthwise causal 1-D convolution carrying its last k-1 steps"),
]
