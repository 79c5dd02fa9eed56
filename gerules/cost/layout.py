"""What data formats cost on the cube: padding waste and the transfers a plain layout implies.

The cube unit computes on 16 x C0 fractals (``ir.formats``): a convolution reads its input in
NC1HWC0 and its weight in FRACTAL_Z, a matmul its operands in FRACTAL_NZ, and every dim the
fractals block is padded to a whole block. So:

- ``cube_bytes``: a cube op moves its operands as the cube holds them, padding included,
  whatever format the graph states (a plain one is converted first; see below).
- ``cube_padding``: the cube does padded work. A convolution's reduction runs over Cin
  padded to C0 (per group: GE packs groups so a depthwise one pads to one block) and its
  output over Cout padded to 16: a 3-channel input conv in C0 = 16 does 16/3 of its useful
  multiply-adds. The small-channel form (NC1HWC0_C04) reduces over (h, w, c) with c padded
  to 4 and the whole axis to C0 (4*7*7 = 196 -> 208 for a 7x7 kernel, not 16*49 = 784). A
  matmul pads M and N to 16 and K to C0.
- ``implied_transfers``: a convolution or matmul whose data operands or result are plain
  (ND/NCHW) cannot run as it is: GE would put a TransData on each (one per non-constant
  input, one per output). Attention kernels read ND (BSH) themselves: none for them. The
  model prices them as such TransData nodes (the vector unit's launch and the bytes both
  sides move), so a plain cube op costs what its naive layout costs, and a graph
  whose transfers were moved and cancelled in the e-graph is cheaper by exactly the
  transfers it no longer has. Constant operands (weights) are converted at compile time
  and cost nothing.

Invariants: factors are >= 1 and finite; symbolic dims count as 1 (as everywhere in the
cost model); every figure is an estimate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..ir import formats as F
from ..ir.dtypes import itemsize
from ..ir.graph import Graph, Node, TensorType

if TYPE_CHECKING:
    from .model import GraphEstimate

CONV_OPS = frozenset({"Conv", "ge.FusedConv", "ConvInteger", "QLinearConv", "ConvTranspose",
                      "DeformConv"})
# cube ops that read their matrices in FRACTAL_NZ (attention kernels take ND: BSH / BNSD)
MATMUL_OPS = frozenset({"MatMul", "Gemm", "ge.FusedMatMul", "MatMulInteger", "QLinearMatMul"})
# the data inputs of conv-like ops (X, and FusedConv's residual Z); the others are weights
CONV_DATA = {"Conv": (0,), "ge.FusedConv": (0, 3), "ConvInteger": (0,), "QLinearConv": (0,),
             "ConvTranspose": (0,), "DeformConv": (0, 2)}


@dataclass(frozen=True, slots=True)
class Transfer:
    """A transfer a plain cube op implies: the tensor, the format the cube needs it in."""

    tensor: TensorType
    native: str


def _dim(d: object) -> int:
    return d if isinstance(d, int) and d > 0 else 1


def _pad(n: int, block: int) -> int:
    return -(-n // block) * block


def cube_padding(op: str, inputs: Sequence[TensorType | None],
                 outputs: Sequence[TensorType]) -> float:
    """How much more work the cube does than the op's useful work (>= 1)."""
    if op in CONV_OPS:
        return _conv_padding(op, inputs)
    a = inputs[0] if inputs else None
    y = outputs[0] if outputs else None
    if a is None or y is None or not a.shape or not y.shape or len(y.shape) < 2:
        return 1.0
    m, n, k = _dim(y.shape[-2]), _dim(y.shape[-1]), _dim(a.shape[-1])
    block = F.c0(a.dtype)
    return (_pad(m, F.FRACTAL) / m) * (_pad(n, F.FRACTAL) / n) * (_pad(k, block) / k)


def _conv_padding(op: str, inputs: Sequence[TensorType | None]) -> float:
    x = inputs[0] if inputs else None
    w = inputs[1] if len(inputs) > 1 else None
    if x is None or w is None or w.shape is None or len(w.shape) < 2:
        return 1.0
    dims = [_dim(d) for d in w.shape]
    cout, cin = (dims[1], dims[0]) if op == "ConvTranspose" else (dims[0], dims[1])
    taps = 1
    for d in dims[2:]:
        taps *= d
    block = F.c0(x.dtype)
    if x.format == F.NC1HWC0_C04:
        reduce = _pad(F.SMALL_C0 * taps, block) / (cin * taps)
    else:
        reduce = _pad(cin, block) / cin
    return reduce * _pad(cout, F.FRACTAL) / cout


def native_format(op: str, t: TensorType, port: int = 0) -> str:
    """The format the cube holds operand ``port`` (-1: the result) of ``op`` in: its own when
    it is blocked already; NC1HWC0 for a conv's data, FRACTAL_Z for its weight, ND for a
    bias; FRACTAL_NZ for a matmul's matrices."""
    if t.format != F.ND:
        return t.format
    if op in CONV_OPS:
        if port in CONV_DATA.get(op, (0,)) or port < 0:
            return F.NC1HWC0 if t.rank == 4 else F.ND
        return F.FRACTAL_Z if port == 1 and t.rank == 4 else F.ND
    if port <= 1 and t.rank is not None and t.rank >= 2:
        return F.FRACTAL_NZ
    return F.ND


def cube_bytes(op: str, inputs: Sequence[TensorType | None],
               outputs: Sequence[TensorType]) -> int:
    """What a cube op reads and writes: every operand as the cube holds it (a plain one in
    its native format, padding included), whatever format the graph gives it."""
    total = 0
    for k, t in enumerate(inputs):
        if t is not None:
            total += physical_bytes(_held(t, native_format(op, t, k)))
    for t in outputs:
        total += physical_bytes(_held(t, native_format(op, t, -1)))
    return total


def _held(t: TensorType, fmt: str) -> TensorType:
    return t.with_format(fmt) if F.can_hold(fmt, t.shape) is None else t


def implied_transfers(op: str, inputs: Sequence[TensorType | None],
                      outputs: Sequence[TensorType], constant: Sequence[bool]
                      ) -> list[Transfer]:
    """The TransData nodes a cube op in plain formats implies (see the module docstring);
    none for a cube op that reads ND itself (the attention kernels)."""
    if op not in CONV_OPS and op not in MATMUL_OPS:
        return []
    data = CONV_DATA.get(op)
    out: list[Transfer] = []
    for k, t in enumerate(inputs):
        if t is None or t.format != F.ND or (k < len(constant) and constant[k]):
            continue
        if data is not None and k not in data:
            continue  # a conv's weight or bias: converted once, at compile time
        if op not in CONV_OPS and k > 1:
            continue  # a matmul's bias or mask: added by the vector unit after the cube
        out.append(Transfer(t, native_format(op, t, k)))
    out += [Transfer(t, native_format(op, t, -1)) for t in outputs if t.format == F.ND]
    return [x for x in out if x.native != F.ND and F.can_hold(x.native, x.tensor.shape) is None]


def physical_bytes(t: TensorType | None) -> int:
    """Bytes memory holds for ``t`` (padding included; symbolic dims count as 1)."""
    if t is None or t.shape is None:
        return 0
    dims = t.shape if t.format == F.ND else _physical(t)
    n = 1
    for d in dims:
        n *= _dim(d)
    return n * itemsize(t.dtype)


def _physical(t: TensorType) -> tuple[object, ...]:
    static = tuple(_dim(d) for d in t.shape or ())
    return F.physical_shape(static, t.dtype, t.format)


def transfer_bytes(x: Transfer) -> int:
    """What one implied TransData reads and writes."""
    return physical_bytes(x.tensor) + physical_bytes(x.tensor.with_format(x.native))


def padding_bytes(t: TensorType | None) -> int:
    """The bytes a format adds to a tensor (0 for plain ones)."""
    if t is None or t.format not in F.PADDED:
        return 0
    return physical_bytes(t) - physical_bytes(TensorType(t.dtype, t.shape))


def layout_figures(graph: Graph, estimate: GraphEstimate) -> dict[str, object]:
    """What a compiled graph's layout is and costs (plain JSON data): the format of every
    tensor (``tensors``; counts ``by_format`` of activations and weights), the TransData
    nodes (``transdata``: ``naive``, what a pair around every cube op needs, the way GE's
    layout starts; ``final``, the ones left; ``implied``, those plain cube ops still imply),
    the ``padding_bytes`` blocked formats add (activations, weights) and the estimated time
    in format transfers (``transfer_us``: the TransData nodes and the implied ones)."""
    consumers = {n for node in graph.nodes for n in node.present_inputs()}
    tensors: dict[str, str] = {}
    acts: dict[str, int] = {}
    weights: dict[str, int] = {}
    pad_acts = pad_weights = 0
    for name in [*graph.input_names, *(o for n in graph.nodes for o in n.outputs if o)]:
        t = graph.type_of(name)
        if t is not None:
            tensors[name] = t.format_name
            acts[t.format_name] = acts.get(t.format_name, 0) + 1
            pad_acts += padding_bytes(t) if _static(t) else 0
    for name in graph.initializers:
        t = graph.type_of(name)
        if t is not None and name in consumers:
            tensors[name] = t.format_name
            weights[t.format_name] = weights.get(t.format_name, 0) + 1
            pad_weights += padding_bytes(t)
    naive = implied = 0
    transfer_us = 0.0
    for node, (_, est) in zip(graph.nodes, estimate.nodes, strict=True):
        implied += est.transfers
        transfer_us += est.us if est.op == "ge.TransData" else est.transfer_us
        if est.unit == "cube":
            naive += len(_naive(node, graph))
    return {"tensors": tensors, "by_format": {"activations": acts, "weights": weights},
            "transdata": {"naive": naive, "final": estimate_count(estimate), "implied": implied},
            "padding_bytes": {"activations": pad_acts, "weights": pad_weights},
            "transfer_us": round(transfer_us, 3)}


def estimate_count(estimate: GraphEstimate) -> int:
    return sum(1 for _, est in estimate.nodes if est.op == "ge.TransData")


def _naive(node: Node, graph: Graph) -> list[Transfer]:
    """The transfers ``node`` (a cube op) needs when every tensor is plain."""
    ins = [t.with_format(F.ND) if i and (t := graph.type_of(i)) is not None else None
           for i in node.inputs]
    outs = [t.with_format(F.ND) for o in node.outputs if (t := graph.type_of(o)) is not None]
    constant = [i in graph.initializers for i in node.inputs]
    return implied_transfers(node.qualified_op, ins, outs, constant)


def _static(t: TensorType) -> bool:
    return t.shape is not None and all(isinstance(d, int) for d in t.shape)
