"""Op generators for ``graphgen`` (continued from ``opgen``): MatMul and Gemm, softmax and
reductions, and the CNN ops (Conv, BatchNormalization, LayerNormalization, pooling).

Invariants: as for ``opgen``: attributes follow from the operand shapes, so every node infers;
a generator declines (returns ``False``) when no tensor fits.
"""

from __future__ import annotations

import math

from .graphgen import Builder, choice, coin
from .opgen import broadcasts, divisors, is_4d

# ----------------------------------------------------------------------------- linear algebra


def matmul(b: Builder) -> bool:
    x = b.pick(lambda t: t.rank >= 1 and t.static(-1))
    if x is None:
        return False
    k = int(x.shape[-1])
    other = b.pick(lambda t: t.rank >= 2 and t.shape[-2] == k and t.static(-1)
                   and broadcasts(t.shape[:-2], x.shape[:-2]))
    if other is not None and x.rank >= 2 and coin(b.chooser):
        b.add("MatMul", [x.name, other.name])
    else:
        n = b.integer(1, 6)
        b.add("MatMul", [x.name, b.weights((k, n), -1 / math.sqrt(k), 1 / math.sqrt(k))])
    return True


def gemm(b: Builder) -> bool:
    x = b.pick(lambda t: t.rank == 2 and t.static(1))
    if x is None:
        return False
    k, n = int(x.shape[1]), b.integer(1, 6)
    trans_b = b.integer(0, 1)
    w = b.weights((n, k) if trans_b else (k, n))
    args = [x.name, w] + ([b.weights(choice(b.chooser, [(n,), (1, n), ()]))]
                          if coin(b.chooser) else [])
    attrs = {"transB": trans_b, "alpha": choice(b.chooser, [1.0, 0.5]),
             "beta": choice(b.chooser, [1.0, 2.0])}
    b.add("Gemm", args, attrs)
    return True


# ----------------------------------------------------------------------------- reductions


def softmax(b: Builder) -> bool:
    x = b.pick(lambda t: t.rank >= 1)
    if x is None:
        return False
    op = choice(b.chooser, ("Softmax", "LogSoftmax"))
    b.add(op, [x.name], {"axis": b.integer(-x.rank, x.rank - 1)})
    return True


def reduce(b: Builder) -> bool:
    x = b.pick(lambda t: t.rank >= 1)
    if x is None:
        return False
    op = choice(b.chooser, ("ReduceMean", "ReduceSum", "ReduceMax"))
    axes = sorted({b.integer(0, x.rank - 1) for _ in range(b.integer(1, x.rank))})
    b.add(op, [x.name, b.ints(axes)], {"keepdims": b.integer(0, 1)})
    return True


# ----------------------------------------------------------------------------- CNN


def conv(b: Builder) -> bool:
    x = b.pick(is_4d)
    if x is None:
        return False
    c, h, w = (int(d) for d in x.shape[1:])
    group = choice(b.chooser, divisors(c))
    m = group * b.integer(1, 3)
    kh, kw = b.integer(1, min(3, h)), b.integer(1, min(3, w))
    pads = [b.integer(0, kh - 1), b.integer(0, kw - 1)] * 2 if coin(b.chooser) else [0, 0, 0, 0]
    attrs = {"kernel_shape": [kh, kw], "pads": pads, "group": group,
             "strides": [b.integer(1, 2)] * 2}
    scale = 1 / math.sqrt(c // group * kh * kw)
    args = [x.name, b.weights((m, c // group, kh, kw), -scale, scale)]
    if coin(b.chooser):
        args.append(b.weights((m,), -0.1, 0.1))
    b.add("Conv", args, attrs)
    return True


def batchnorm(b: Builder) -> bool:
    x = b.pick(lambda t: t.rank >= 2 and t.static(1))
    if x is None:
        return False
    c = int(x.shape[1])
    args = [x.name, b.weights((c,), 0.5, 1.5), b.weights((c,), -0.5, 0.5),
            b.weights((c,), -0.5, 0.5), b.weights((c,), 0.5, 2.0)]
    b.add("BatchNormalization", args, {"epsilon": choice(b.chooser, [1e-5, 1e-3])})
    return True


def layernorm(b: Builder) -> bool:
    x = b.pick(lambda t: t.rank >= 1 and t.static(-1))
    if x is None:
        return False
    n = int(x.shape[-1])
    args = [x.name, b.weights((n,), 0.5, 1.5)]
    if coin(b.chooser):
        args.append(b.weights((n,), -0.5, 0.5))
    b.add("LayerNormalization", args, {"axis": -1, "epsilon": 1e-5})
    return True


def pool(b: Builder) -> bool:
    x = b.pick(is_4d)
    if x is None:
        return False
    op = choice(b.chooser, ("MaxPool", "AveragePool", "GlobalAveragePool"))
    if op == "GlobalAveragePool":
        b.add(op, [x.name])
        return True
    h, w = int(x.shape[2]), int(x.shape[3])
    k = [b.integer(1, min(3, h)), b.integer(1, min(3, w))]
    b.add(op, [x.name], {"kernel_shape": k, "strides": [b.integer(1, 2)] * 2})
    return True
