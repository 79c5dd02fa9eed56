"""Op generators for the subgraphs exporters write and optimizers fuse (see ``opgen``).

Each motif adds a few nodes at once, the way PyTorch's exporter writes them, so random graphs
contain what the shipped rules look for: a convolution block (Conv, BatchNormalization with
constant statistics, an activation, sometimes a residual Add), a linear layer (MatMul by a
constant weight, a bias Add, an activation), a feed-forward layer (linear + GELU with Erf),
GELU spelled with Erf, LayerNormalization spelled with ReduceMean / Pow / Sqrt, scaled
dot-product attention, residual adds around a linear layer or a convolution, and head
split/merge chains (Reshape / Transpose). ``MOTIF_OPS`` names the table the optimizer's
property suite draws from (``strategies.motif_graphs``, ``testing.random_motif_graph``).

Invariants: as for ``opgen`` (every node infers; a motif declines when no tensor fits), and
the motifs use ai.onnx ops only, so graphs stay runnable by onnxruntime.
"""

from __future__ import annotations

import math

import numpy as np

from .graphgen import Builder, GraphOptions, Tensor, choice, coin

ACTIVATIONS = ("Relu", "Sigmoid", "Tanh", "LeakyRelu", "HardSigmoid", "HardSwish", "Gelu")


def is_4d(t: Tensor) -> bool:
    return t.rank == 4 and all(isinstance(d, int) for d in t.shape[1:])


def _activation(b: Builder, x: str) -> str:
    op = choice(b.chooser, ACTIVATIONS if b.options.opset >= 20 else ACTIVATIONS[:-1])
    return b.add(op, [x])[0].name


def _scalar(b: Builder, value: float) -> str:
    return b.const(np.asarray(value, dtype=b.dtype))


def conv_block(b: Builder) -> bool:
    """Conv (+ bias) -> BatchNormalization -> activation, sometimes + a residual."""
    x = b.pick(is_4d)
    if x is None:
        return False
    c = int(x.shape[1])
    group = choice(b.chooser, [1, 1, c] if c > 1 else [1])
    m = group * b.integer(1, 2) if group > 1 else b.integer(1, 4)
    k = choice(b.chooser, [1, 3]) if min(int(x.shape[2]), int(x.shape[3])) >= 3 else 1
    bound = 1 / math.sqrt(c // group * k * k)
    args = [x.name, b.weights((m, c // group, k, k), -bound, bound)]
    if coin(b.chooser):
        args.append(b.weights((m,), -0.1, 0.1))
    y = b.add("Conv", args, {"kernel_shape": [k, k], "pads": [k // 2] * 4,
                             "group": group})[0].name
    if coin(b.chooser):
        y = b.add("BatchNormalization", [y, b.weights((m,), 0.5, 1.5), b.weights((m,)),
                                         b.weights((m,)), b.weights((m,), 0.5, 2.0)])[0].name
    if m == c and coin(b.chooser):
        y = b.add("Add", [y, x.name])[0].name
    if coin(b.chooser):
        _activation(b, y)
    return True


def _dense(b: Builder, x: Tensor, n: int) -> Tensor:
    """MatMul of ``x`` by a constant ``[k, n]`` weight, then a bias Add."""
    k = int(x.shape[-1])
    y = b.add("MatMul", [x.name, b.weights((k, n), -1 / math.sqrt(k), 1 / math.sqrt(k))])[0]
    return b.add("Add", [y.name, b.weights((n,), -0.1, 0.1)])[0]


def linear(b: Builder) -> bool:
    """MatMul by a constant weight, then a bias Add and maybe an activation."""
    x = b.pick(lambda t: t.rank >= 2 and t.static(-1))
    if x is None:
        return False
    y = _dense(b, x, b.integer(1, 6))
    if coin(b.chooser):
        _activation(b, y.name)
    return True


def gelu_erf(b: Builder) -> bool:
    """``x * 0.5 * (1 + erf(x / sqrt 2))`` in one of the two orders exporters write."""
    x = b.pick()
    assert x is not None
    erf = b.add("Erf", [b.add("Div", [x.name, _scalar(b, math.sqrt(2))])[0].name])[0]
    one_plus = b.add("Add", [erf.name, _scalar(b, 1.0)])[0]
    if coin(b.chooser):
        inner = b.add("Mul", [x.name, one_plus.name])[0]
        b.add("Mul", [inner.name, _scalar(b, 0.5)])
    else:
        half = b.add("Mul", [x.name, _scalar(b, 0.5)])[0]
        b.add("Mul", [half.name, one_plus.name])
    return True


def layernorm_subgraph(b: Builder) -> bool:
    """LayerNormalization over the last axis, spelled out (opset 18: axes as an input)."""
    x = b.pick(lambda t: t.rank >= 1 and t.static(-1))
    if x is None:
        return False
    n = int(x.shape[-1])
    axes = b.ints([-1])
    mean = b.add("ReduceMean", [x.name, axes], {"keepdims": 1})[0]
    d = b.add("Sub", [x.name, mean.name])[0]
    sq = b.add("Pow", [d.name, _scalar(b, 2.0)])[0]
    var = b.add("ReduceMean", [sq.name, b.ints([-1])], {"keepdims": 1})[0]
    std = b.add("Sqrt", [b.add("Add", [var.name, _scalar(b, 1e-5)])[0].name])[0]
    y = b.add("Div", [d.name, std.name])[0]
    y = b.add("Mul", [y.name, b.weights((n,), 0.5, 1.5)])[0]
    b.add("Add", [y.name, b.weights((n,), -0.5, 0.5)])
    return True


def attention(b: Builder) -> bool:
    """``softmax(q @ kt / sqrt(d) [+ mask]) @ v`` on a rank-4 tensor split into q, k, v."""
    x = b.pick(lambda t: t.rank == 4 and all(isinstance(d, int) for d in t.shape[1:]))
    if x is None:
        return False
    d = int(x.shape[-1])
    q, v = x.name, b.add("Neg", [x.name])[0].name
    kt = b.add("Transpose", [b.add("Sigmoid", [x.name])[0].name], {"perm": [0, 1, 3, 2]})[0]
    scores = b.add("MatMul", [q, kt.name])[0]
    if coin(b.chooser):
        s = b.add("Div", [scores.name, _scalar(b, math.sqrt(d))])[0]
    else:
        s = b.add("Mul", [scores.name, _scalar(b, 1 / math.sqrt(d))])[0]
    if coin(b.chooser):
        s_len = int(x.shape[2])
        mask = np.where(np.tril(np.ones((s_len, s_len))) > 0, 0.0, -1e4).astype(b.dtype)
        s = b.add("Add", [s.name, b.const(mask)])[0]
    p = b.add("Softmax", [s.name], {"axis": -1})[0]
    b.add("MatMul", [p.name, v])
    return True


MOTIFS = {"conv_block": conv_block, "linear": linear, "gelu_erf": gelu_erf,
          "layernorm_subgraph": layernorm_subgraph, "attention": attention}


def linear_gelu(b: Builder) -> bool:
    """A transformer feed-forward layer: MatMul, bias Add, then GELU spelled with Erf."""
    x = b.pick(lambda t: t.rank >= 2 and t.static(-1))
    if x is None:
        return False
    y = _dense(b, x, b.integer(2, 6))
    erf = b.add("Erf", [b.add("Div", [y.name, _scalar(b, math.sqrt(2))])[0].name])[0]
    half = b.add("Mul", [y.name, _scalar(b, 0.5)])[0]
    b.add("Mul", [half.name, b.add("Add", [erf.name, _scalar(b, 1.0)])[0].name])
    return True


def residual(b: Builder) -> bool:
    """``x + f(x)`` where f is a same-width linear layer or a same-channel 3x3 convolution."""
    x = b.pick(lambda t: t.rank >= 2 and t.static(-1))
    if x is None:
        return False
    if is_4d(x) and coin(b.chooser):
        c = int(x.shape[1])
        f = b.add("Conv", [x.name, b.weights((c, c, 3, 3), -0.2, 0.2), b.weights((c,))],
                  {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]})[0]
    else:
        n = int(x.shape[-1])
        f = b.add("MatMul", [x.name, b.weights((n, n), -1 / math.sqrt(n), 1 / math.sqrt(n))])[0]
    b.add("Add", [x.name, f.name] if coin(b.chooser) else [f.name, x.name])
    return True


def reshape_chain(b: Builder) -> bool:
    """Split the last dim into heads and back, the way exporters move attention heads:
    Reshape [.., h, d] -> Transpose -> Transpose back -> Reshape [.., h * d]."""
    x = b.pick(lambda t: t.rank == 3 and t.static(-1) and t.static(1) and int(t.shape[-1]) > 1)
    if x is None:
        return False
    n = int(x.shape[-1])
    heads = choice(b.chooser, [h for h in range(2, n + 1) if n % h == 0])
    split = b.add("Reshape", [x.name, b.ints([0, 0, heads, n // heads])])[0]
    t = b.add("Transpose", [split.name], {"perm": [0, 2, 1, 3]})[0]
    if coin(b.chooser):
        t = b.add("Relu", [t.name])[0]
    back = b.add("Transpose", [t.name], {"perm": [0, 2, 1, 3]})[0]
    b.add("Reshape", [back.name, b.ints([0, 0, n])])
    return True


MOTIFS.update(linear_gelu=linear_gelu, residual=residual, reshape_chain=reshape_chain)
# The graphs the optimizer's property suite draws: motifs, and a little glue between them.
MOTIF_OPS = ("conv_block", "linear", "linear_gelu", "gelu_erf", "layernorm_subgraph",
             "attention", "residual", "reshape_chain", "binary", "Relu")


def motif_options(**overrides: object) -> GraphOptions:
    """Graph options for motif graphs: 3-D and 4-D inputs (sides 2..6), ``MOTIF_OPS``."""
    base: dict[str, object] = dict(max_nodes=5, min_nodes=3, ops=MOTIF_OPS, ranks=(3, 4),
                                   min_side=2, max_side=6, max_inputs=1, max_outputs=2)
    base.update(overrides)
    return GraphOptions(**base)  # type: ignore[arg-type]
