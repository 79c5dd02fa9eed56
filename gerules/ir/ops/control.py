"""Control flow (ai.onnx): If, Loop, Scan, with subgraph attributes.

Invariants:
- A subgraph's reads of enclosing values are the node's last inputs, in the order of
  ``ir.graph.captures`` (the reader appends them); kernels bind them by position, so the
  enclosing graph may rename those values freely.
- ``run_body`` runs a subgraph with the registry's kernels (the same kernels the executor
  uses); ``infer_body`` types its outputs with ``ir.infer.infer_graph`` given the types of
  its inputs and captured values.
- If runs ``then_branch`` or ``else_branch`` by the boolean ``cond``; its output types are the
  branches' where they agree, with unknown dims where they differ.
- Loop runs ``body(iteration, cond, carried...) -> (cond, carried..., scan...)`` while
  ``iteration < M`` (when M is given) and ``cond`` (when given); outputs: the final carried
  values, then each scan output stacked along a new first axis, whose inferred length is a
  constant M (a compiled plan then assumes the loop runs M times: a loop that stops earlier
  fails at run time naming the node, never gives a short result silently).
- Scan at opset 8 is batched: every input has a batch axis 0 (scan inputs scan along axis
  1, ``directions`` reverses), each batch entry runs on its own; ``sequence_lens`` shorter
  than the inputs is refused.
- Scan (opset 9+) runs ``body(states..., slices...) -> (states..., outputs...)`` over
  ``num_scan_inputs`` inputs sliced along ``scan_input_axes`` (reversed where
  ``scan_input_directions`` says 1); outputs: the final states, then each per-step output
  stacked along ``scan_output_axes`` (reversed where ``scan_output_directions`` says 1).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...errors import ShapeError
from ..graph import Dim, Graph, TensorType, Value, captures
from ..registry import Call, default_registry
from ..weights import arrays
from ._common import UNKNOWN, Arrays, T, Types, at, attr, ints, lattr, need, norm_axis, schema

MAX_ITERATIONS = 1 << 20  # a Loop without M and with a cond that never turns false


def _captured(call: Call, args: Sequence[T]) -> tuple[tuple[str, ...], list[T]]:
    """The captured names of the node's subgraphs and the values bound to them."""
    names = captures(call.attrs)
    return names, list(args[len(args) - len(names):]) if names else []


def run_body(body: Graph, values: Sequence[np.ndarray | None], names: Sequence[str],
             captured: Sequence[np.ndarray | None]) -> list[np.ndarray]:
    """The outputs of ``body`` for its inputs ``values`` and the captured values."""
    registry = default_registry()
    env: dict[str, np.ndarray | None] = dict(arrays(body.initializers))
    env.update(zip(body.input_names, values, strict=False))
    env.update(zip(names, captured, strict=True))
    for node in body.nodes:
        schema = registry.get(node.op, node.domain, body.opset.get(node.domain))
        call = schema.call(node.attrs, len(node.outputs), node.label)
        outs = schema.kernel([env[i] if i else None for i in node.inputs], call)
        env.update(zip(node.outputs, outs, strict=False))
    return [np.asarray(env[v.name]) for v in body.outputs]


def infer_body(body: Graph, types: Sequence[TensorType | None], names: Sequence[str],
               captured: Sequence[TensorType | None]) -> list[TensorType]:
    """The output types of ``body`` (its declared ones when inputs are not all typed)."""
    from ..infer import infer_graph

    if any(t is None for t in captured):
        return [v.type for v in body.outputs]
    inputs = [Value(v.name, t if t is not None else v.type)
              for v, t in zip(body.inputs, list(types) + [None] * len(body.inputs),
                              strict=False)]
    inputs += [Value(n, t) for n, t in zip(names, captured, strict=True)
               if t is not None and n not in body.input_names]
    typed = infer_graph(body.replace(inputs=tuple(inputs)))
    return [v.type for v in typed.outputs]


def _join(a: TensorType, b: TensorType) -> TensorType:
    if a.dtype != b.dtype:
        raise ShapeError(f"If: the branches give {a.dtype} and {b.dtype}")
    if a.shape is None or b.shape is None or len(a.shape) != len(b.shape):
        return TensorType(a.dtype, None)
    return TensorType(a.dtype, tuple(x if x == y else UNKNOWN
                                     for x, y in zip(a.shape, b.shape, strict=True)))


def _branches(call: Call) -> tuple[Graph, Graph]:
    then, other = call.attrs.get("then_branch"), call.attrs.get("else_branch")
    if not isinstance(then, Graph) or not isinstance(other, Graph):
        raise ShapeError("If needs then_branch and else_branch subgraphs")
    if len(then.outputs) != len(other.outputs):
        raise ShapeError(f"If: the branches give {len(then.outputs)} and "
                         f"{len(other.outputs)} outputs")
    return then, other


def _if_infer(types: Types, _c: object, call: Call) -> list[TensorType]:
    then, other = _branches(call)
    names, captured = _captured(call, types)
    a = infer_body(then, [], names, captured)
    b = infer_body(other, [], names, captured)
    return [_join(x, y) for x, y in zip(a, b, strict=True)]


def _if_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    then, other = _branches(call)
    cond = need(at(inputs, 0), "If", "cond")
    names, captured = _captured(call, inputs)
    return run_body(then if bool(np.asarray(cond).reshape(-1)[0]) else other, [], names,
                    captured)


# ----------------------------------------------------------------------------- Loop


def _body(call: Call, op: str) -> Graph:
    body = call.attrs.get("body")
    if not isinstance(body, Graph):
        raise ShapeError(f"{op} needs a body subgraph")
    return body


def _loop_infer(types: Types, consts: Arrays, call: Call) -> list[TensorType]:
    body = _body(call, "Loop")
    names, captured = _captured(call, types)
    carried = list(types[2:len(types) - len(names)])
    outs = infer_body(body, [TensorType("int64", ()), TensorType("bool", ()), *carried],
                      names, captured)
    n = len(carried)
    finals = [t if t is not None else o for t, o in zip(carried, outs[1:1 + n], strict=True)]
    finals = [TensorType(f.dtype, o.shape if o.shape == f.shape else
                         (None if f.shape is None else (UNKNOWN,) * len(f.shape)))
              for f, o in zip(finals, outs[1:1 + n], strict=True)]
    limit = at(consts, 0)
    trips: Dim = UNKNOWN if limit is None else ints(limit)[0]
    scans = [TensorType(o.dtype, None if o.shape is None else (trips, *o.shape))
             for o in outs[1 + n:]]
    return (finals + scans)[: max(1, call.num_outputs)]


def _loop_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    body = _body(call, "Loop")
    names, captured = _captured(call, inputs)
    limit, cond = at(inputs, 0), at(inputs, 1)
    carried: list[np.ndarray | None] = list(inputs[2:len(inputs) - len(names)])
    n = len(carried)
    trips = MAX_ITERATIONS if limit is None else int(np.asarray(limit).reshape(-1)[0])
    go = True if cond is None else bool(np.asarray(cond).reshape(-1)[0])
    scans: list[list[np.ndarray]] = [[] for _ in range(len(body.outputs) - 1 - n)]
    i = 0
    while i < trips and go:
        outs = run_body(body, [np.asarray(i, np.int64), np.asarray(go), *carried], names,
                        captured)
        go = bool(np.asarray(outs[0]).reshape(-1)[0])
        carried = list(outs[1:1 + n])
        for k, value in enumerate(outs[1 + n:]):
            scans[k].append(value)
        i += 1
        if i >= MAX_ITERATIONS:
            raise ShapeError(f"Loop ran {MAX_ITERATIONS} iterations without stopping")
    stacked = [np.stack(s) if s else np.zeros((0,), dtype=v.type.dtype)
               for s, v in zip(scans, body.outputs[1 + n:], strict=True)]
    return [*carried, *stacked]  # type: ignore[list-item]


# ----------------------------------------------------------------------------- Scan


def _scan_layout(call: Call, total: int, n_out: int) -> tuple[int, list[int], list[int],
                                                             list[int], list[int]]:
    m = int(call.attrs.get("num_scan_inputs", 0))  # type: ignore[arg-type]
    states = total - m
    in_axes = lattr(call, "scan_input_axes") or [0] * m
    in_dirs = lattr(call, "scan_input_directions") or [0] * m
    k = n_out - states
    out_axes = lattr(call, "scan_output_axes") or [0] * k
    out_dirs = lattr(call, "scan_output_directions") or [0] * k
    return states, in_axes, in_dirs, out_axes, out_dirs


def _scan_infer(types: Types, _c: object, call: Call) -> list[TensorType]:
    body = _body(call, "Scan")
    names, captured = _captured(call, types)
    own = list(types[:len(types) - len(names)])
    states, in_axes, _, out_axes, _ = _scan_layout(call, len(own), len(body.outputs))
    slices: list[TensorType | None] = []
    steps: Dim = UNKNOWN
    for t, axis in zip(own[states:], in_axes, strict=False):
        if t is None or t.shape is None:
            slices.append(None)
            continue
        a = norm_axis(axis, len(t.shape))
        steps = t.shape[a]
        slices.append(TensorType(t.dtype, t.shape[:a] + t.shape[a + 1:]))
    outs = infer_body(body, [*own[:states], *slices], names, captured)
    result = list(outs[:states])
    for o, axis in zip(outs[states:], out_axes, strict=False):
        if o.shape is None:
            result.append(TensorType(o.dtype, None))
            continue
        a = norm_axis(axis, len(o.shape) + 1)
        result.append(TensorType(o.dtype, (*o.shape[:a], steps, *o.shape[a:])))
    return result[: max(1, call.num_outputs)]


def _scan_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    body = _body(call, "Scan")
    names, captured = _captured(call, inputs)
    own = [need(x, "Scan") for x in inputs[:len(inputs) - len(names)]]
    states, in_axes, in_dirs, out_axes, out_dirs = _scan_layout(call, len(own),
                                                                len(body.outputs))
    seqs = [np.moveaxis(x, norm_axis(a, x.ndim), 0) for x, a in zip(own[states:], in_axes,
                                                                    strict=True)]
    seqs = [s[::-1] if d else s for s, d in zip(seqs, in_dirs, strict=True)]
    steps = seqs[0].shape[0] if seqs else 0
    if any(s.shape[0] != steps for s in seqs):
        raise ShapeError("Scan: the scan inputs have different lengths")
    carried = own[:states]
    per_step: list[list[np.ndarray]] = [[] for _ in range(len(body.outputs) - states)]
    for t in range(steps):
        outs = run_body(body, [*carried, *(s[t] for s in seqs)], names,
                        captured)
        carried = outs[:states]
        for k, value in enumerate(outs[states:]):
            per_step[k].append(value)
    stacked = []
    for values, axis, d, v in zip(per_step, out_axes, out_dirs, body.outputs[states:],
                                  strict=True):
        s = np.stack(values[::-1] if d else values) if values else np.zeros(
            (0,), dtype=v.type.dtype)
        stacked.append(np.moveaxis(s, 0, norm_axis(axis, s.ndim)))
    return [*carried, *stacked]


def _scan8_call(call: Call, states: int, m: int, k: int) -> Call:
    """The opset-9 Scan call for one batch entry of an opset-8 Scan."""
    dirs = lattr(call, "directions") or [0] * m
    attrs = {"body": call.attrs["body"], "num_scan_inputs": m,
             "scan_input_directions": tuple(dirs)}
    return Call(attrs, states + k, call.node)


def _scan8_parts(items: Sequence[T], call: Call) -> tuple[list[T], int, int]:
    names = captures(call.attrs)
    own = list(items[1:len(items) - len(names)])
    m = int(call.attrs.get("num_scan_inputs", 0))  # type: ignore[arg-type]
    return own, len(own) - m, m


def _scan8_infer(types: Types, _c: object, call: Call) -> list[TensorType]:
    own, states, m = _scan8_parts(types, call)
    body = _body(call, "Scan")
    inner = [None if t is None or t.shape is None else TensorType(t.dtype, t.shape[1:])
             for t in own]
    names = captures(call.attrs)
    outs = _scan_infer([*inner, *types[len(types) - len(names):]] if names else inner,
                       None, _scan8_call(call, states, m, len(body.outputs) - states))
    batch = own[0].shape[0] if own and own[0] is not None and own[0].shape else UNKNOWN
    return [TensorType(o.dtype, None if o.shape is None else (batch, *o.shape))
            for o in outs][: max(1, call.num_outputs)]


def _scan8_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    own, states, m = _scan8_parts(inputs, call)
    body = _body(call, "Scan")
    lens = at(inputs, 0)
    arrays = [need(x, "Scan") for x in own]
    if lens is not None and m and (lens != arrays[states].shape[1]).any():
        raise ShapeError("Scan (opset 8): sequence_lens shorter than the inputs is not "
                         "supported")
    names = captures(call.attrs)
    tail = list(inputs[len(inputs) - len(names):]) if names else []
    inner_call = _scan8_call(call, states, m, len(body.outputs) - states)
    runs = [_scan_kernel([*(a[b] for a in arrays), *tail], inner_call)
            for b in range(arrays[0].shape[0])]
    return [np.stack(parts) for parts in zip(*runs, strict=True)]


SCAN_ATTRS = [attr("body", "graph", required=True), attr("num_scan_inputs", "int",
                                                            required=True),
              attr("scan_input_axes", "ints"), attr("scan_input_directions", "ints"),
              attr("scan_output_axes", "ints"), attr("scan_output_directions", "ints")]
SCHEMAS = [
    schema("If", 1, "cond captures?*", "outputs*", _if_infer, _if_kernel, unit="scalar",
           attrs=[attr("then_branch", "graph", required=True),
                  attr("else_branch", "graph", required=True)], widen_low=False,
           doc="run then_branch or else_branch by cond"),
    schema("Loop", 1, "M:i64? cond:bool? v_initial*", "v_final_and_scan_outputs*",
           _loop_infer, _loop_kernel, unit="scalar", widen_low=False,
           attrs=[attr("body", "graph", required=True)],
           doc="run body while iteration < M and cond; carried values and stacked outputs"),
    schema("Scan", 8, "sequence_lens:i64? initial_state_and_scan_inputs*",
           "final_state_and_scan_outputs*", _scan8_infer, _scan8_kernel, unit="scalar",
           widen_low=False, attrs=[attr("body", "graph", required=True),
                                   attr("directions", "ints"),
                                   attr("num_scan_inputs", "int", required=True)],
           doc="batched Scan (opset 8): each batch entry scans along axis 1"),
    schema("Scan", 9, "initial_state_and_scan_inputs*", "final_state_and_scan_outputs*",
           _scan_infer, _scan_kernel, unit="scalar", attrs=SCAN_ATTRS, widen_low=False,
           doc="run body over slices of the scan inputs, carrying states"),
]
