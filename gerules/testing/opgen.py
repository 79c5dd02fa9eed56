"""The op generators behind ``graphgen.build_graph``: one function per op family.

A generator takes the ``Builder``, picks operands of fitting shapes among its tensors (or
makes constants), chooses attributes that are valid for those shapes and adds the node(s). It
returns ``False``, adding nothing, when no tensor fits (Conv needs a 4-D tensor with static
channels and spatial dims).

Invariants:
- A generator never adds a node that inference rejects: every attribute is derived from the
  operand shapes (channels divisible by ``group``, kernel no larger than the padded input,
  ``Squeeze`` only of dims that are 1, ``Concat`` of operands equal off the axis).
- Symbolic dims are never reshaped, split, sliced or concatenated along; constants never
  carry them (size 1 stands in when a constant broadcasts against one).
- ``GENERATORS`` starts with ``Relu``, which applies to any tensor (the builder's fallback).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from ..ir.graph import Shape
from .graphgen import Builder, Tensor, choice, coin

Generator = Callable[[Builder], bool]


# ----------------------------------------------------------------------------- helpers


def broadcasts(a: Shape, b: Shape) -> bool:
    """``a`` and ``b`` broadcast without relying on a symbolic dim being 1."""
    for x, y in zip(reversed(a), reversed(b), strict=False):
        if x != y and x != 1 and y != 1:
            return False
    return True


def const_shape(b: Builder, shape: Shape) -> tuple[int, ...]:
    """A static shape that broadcasts to ``shape``: a suffix with some dims set to 1."""
    keep = b.integer(0, len(shape))
    out = []
    for d in shape[len(shape) - keep:]:
        out.append(d if isinstance(d, int) and coin(b.chooser) else 1)
    return tuple(out)


def static_axes(t: Tensor, ok: Callable[[int], bool] = lambda d: True) -> list[int]:
    return [i for i, d in enumerate(t.shape) if isinstance(d, int) and ok(d)]


def is_4d(t: Tensor) -> bool:
    return t.rank == 4 and all(isinstance(d, int) for d in t.shape[1:])


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


# ----------------------------------------------------------------------------- elementwise

UNARY = ("Relu", "Sigmoid", "Tanh", "Gelu", "Abs", "Neg", "Erf", "Softsign", "Softplus",
         "HardSwish", "Identity")


def unary(b: Builder) -> bool:
    x = b.pick()
    assert x is not None  # graph inputs are always there
    op = choice(b.chooser, UNARY if b.options.opset >= 20 else UNARY[:3] + UNARY[4:])
    attrs = {"approximate": "tanh"} if op == "Gelu" and coin(b.chooser) else {}
    b.add(op, [x.name], attrs)
    return True


def relu(b: Builder) -> bool:
    x = b.pick()
    assert x is not None
    b.add("Relu", [x.name])
    return True


def unary_attr(b: Builder) -> bool:
    x = b.pick()
    assert x is not None
    op, attrs = choice(b.chooser, [
        ("LeakyRelu", {"alpha": choice(b.chooser, [0.01, 0.1, 0.2])}),
        ("Elu", {"alpha": choice(b.chooser, [1.0, 0.5])}),
        ("HardSigmoid", {"alpha": 0.2, "beta": 0.5}),
        ("Celu", {"alpha": 1.0}),
    ])
    b.add(op, [x.name], attrs)
    return True


def binary(b: Builder) -> bool:
    """Add/Sub/Mul/Max/Min of two tensors that broadcast, or of a tensor and a constant."""
    x = b.pick()
    assert x is not None
    op = choice(b.chooser, ("Add", "Sub", "Mul", "Max", "Min"))
    other = b.pick(lambda t: broadcasts(t.shape, x.shape)) if coin(b.chooser) else None
    y = other.name if other is not None else b.weights(const_shape(b, x.shape))
    args = [x.name, y] if coin(b.chooser) else [y, x.name]
    b.add(op, args)
    return True


def divide(b: Builder) -> bool:
    """Division by a constant whose entries are at least 0.5 away from zero."""
    x = b.pick()
    assert x is not None
    shape = const_shape(b, x.shape)
    magnitude = b.rng().uniform(0.5, 2.0, size=shape)
    sign = np.where(b.rng().integers(0, 2, size=shape) == 1, 1.0, -1.0)
    b.add("Div", [x.name, b.const((magnitude * sign).astype(b.dtype))])
    return True


def power(b: Builder) -> bool:
    x = b.pick()
    assert x is not None
    exponent = choice(b.chooser, [2.0, 1.0, 0.5])
    base = x.name
    if exponent == 0.5:  # a square root needs a non-negative base
        base = b.add("Abs", [x.name])[0].name
    b.add("Pow", [base, b.const(np.asarray(exponent, dtype=b.dtype))])
    return True


def clip(b: Builder) -> bool:
    x = b.pick()
    assert x is not None
    lo = choice(b.chooser, [0.0, -1.0, -6.0])
    hi = choice(b.chooser, [6.0, 1.0])
    args = [x.name, b.const(np.asarray(lo, b.dtype)), b.const(np.asarray(hi, b.dtype))]
    b.add("Clip", args)
    return True


def where(b: Builder) -> bool:
    """``Where(Greater(x, c), x, y)``: a bool intermediate that never leaves the pair."""
    x = b.pick()
    assert x is not None
    cond = b.add(choice(b.chooser, ("Greater", "Less")),
                 [x.name, b.weights(const_shape(b, x.shape))])[0]
    other = b.pick(lambda t: broadcasts(t.shape, x.shape))
    y = other.name if other is not None and coin(b.chooser) else b.weights(())
    b.add("Where", [cond.name, x.name, y])
    return True


def cast_roundtrip(b: Builder) -> bool:
    """Cast to a wider float and back: exact, and a target for cast-folding rules."""
    if b.dtype != "float32":
        return False
    x = b.pick()
    assert x is not None
    wide = b.add("Cast", [x.name], {"to": 11})[0]
    b.add("Cast", [wide.name], {"to": 1})
    return True


def identity_ops(b: Builder) -> bool:
    """An op that changes nothing (x + 0, x * 1, a no-op Transpose or Reshape, -(-x)...):
    simplification rules remove them, and in an e-graph they make classes that contain
    themselves, which extraction must not turn into cycles."""
    x = b.pick()
    assert x is not None
    kind = b.integer(0, 6)
    if kind <= 3:
        op, value = [("Add", 0.0), ("Mul", 1.0), ("Sub", 0.0), ("Div", 1.0)][kind]
        b.add(op, [x.name, b.const(np.full(const_shape(b, x.shape), value, b.dtype))])
    elif kind == 4:
        b.add("Transpose", [x.name], {"perm": list(range(x.rank))})
    elif kind == 5 and all(isinstance(d, int) for d in x.shape):
        b.add("Reshape", [x.name, b.ints([int(d) for d in x.shape])])
    else:
        b.add("Neg", [b.add("Neg", [x.name])[0].name])
    return True


def duplicate(b: Builder) -> bool:
    """Repeat an earlier node with the same inputs: a shared subterm for CSE to find."""
    candidates = [n for n in b.nodes if len(n.outputs) == 1]
    if not candidates:
        return False
    node = choice(b.chooser, candidates)
    b.add(node.op, list(node.inputs), dict(node.attrs), domain=node.domain)
    return True


# ----------------------------------------------------------------------------- movement


def transpose(b: Builder) -> bool:
    x = b.pick(lambda t: t.rank >= 2)
    if x is None:
        return False
    perm = list(range(x.rank))
    for i in range(x.rank - 1, 0, -1):  # Fisher-Yates with chooser draws
        j = b.integer(0, i)
        perm[i], perm[j] = perm[j], perm[i]
    b.add("Transpose", [x.name], {"perm": perm})
    return True


def reshape(b: Builder) -> bool:
    """Keep every dim up to the last symbolic one (``0``), refactor the static tail."""
    x = b.pick()
    assert x is not None
    symbolic = [i for i, d in enumerate(x.shape) if isinstance(d, str)]
    head = symbolic[-1] + 1 if symbolic else 0
    tail = math.prod(int(d) for d in x.shape[head:])
    dims: list[int] = [0] * head
    rest = tail
    for _ in range(b.integer(0, 2)):
        f = choice(b.chooser, divisors(rest))
        dims.append(f)
        rest //= f
    dims.append(-1 if coin(b.chooser) else rest)
    b.add("Reshape", [x.name, b.ints(dims)])
    return True


def flatten(b: Builder) -> bool:
    x = b.pick(lambda t: t.rank >= 1 and all(isinstance(d, int) for d in t.shape[1:]))
    if x is None:
        return False
    axis = b.integer(1, max(1, x.rank)) if x.rank and x.static(0) else 1
    b.add("Flatten", [x.name], {"axis": axis})
    return True


def unsqueeze(b: Builder) -> bool:
    x = b.pick(lambda t: t.rank < 5)
    if x is None:
        return False
    b.add("Unsqueeze", [x.name, b.ints([b.integer(0, x.rank)])])
    return True


def squeeze(b: Builder) -> bool:
    x = b.pick(lambda t: 1 in t.shape)
    if x is None:
        return False
    ones = [i for i, d in enumerate(x.shape) if d == 1]
    b.add("Squeeze", [x.name, b.ints([choice(b.chooser, ones)])])
    return True


def concat(b: Builder) -> bool:
    x = b.pick(lambda t: bool(static_axes(t)))
    if x is None:
        return False
    axis = choice(b.chooser, static_axes(x))

    def fits(t: Tensor) -> bool:
        return t.rank == x.rank and t.static(axis) and all(p == q for i, (p, q) in
                                        enumerate(zip(t.shape, x.shape, strict=True))
                                        if i != axis)

    parts = [x.name]
    for _ in range(b.integer(1, 2)):
        other = b.pick(fits) if coin(b.chooser) else None
        static_rest = all(isinstance(d, int) for d in x.shape)
        if other is not None or not static_rest:
            parts.append(other.name if other is not None else x.name)
        else:
            shape = list(x.shape)
            shape[axis] = b.integer(1, 3)
            parts.append(b.weights(tuple(int(d) for d in shape)))
    b.add("Concat", parts, {"axis": axis - x.rank if coin(b.chooser) else axis})
    return True


def split(b: Builder) -> bool:
    x = b.pick(lambda t: bool(static_axes(t, lambda d: d >= 2)))
    if x is None:
        return False
    axis = choice(b.chooser, static_axes(x, lambda d: d >= 2))
    size = int(x.shape[axis])
    first = b.integer(1, size - 1)
    b.add("Split", [x.name, b.ints([first, size - first])], {"axis": axis}, outputs=2)
    return True


def slice_(b: Builder) -> bool:
    x = b.pick(lambda t: bool(static_axes(t, lambda d: d >= 2)))
    if x is None:
        return False
    axis = choice(b.chooser, static_axes(x, lambda d: d >= 2))
    size = int(x.shape[axis])
    start = b.integer(0, size - 1)
    end = b.integer(start + 1, size)
    step = b.integer(1, 2)
    args = [x.name, b.ints([start]), b.ints([end]), b.ints([axis]), b.ints([step])]
    b.add("Slice", args)
    return True


def expand(b: Builder) -> bool:
    """Expand a dim of size 1 (or add a leading one) to a static size."""
    x = b.pick(lambda t: t.rank < 5)
    if x is None:
        return False
    target: list[int] = [1 if not isinstance(d, int) else d for d in x.shape]
    ones = [i for i, d in enumerate(x.shape) if d == 1]
    if ones and coin(b.chooser):
        target[choice(b.chooser, ones)] = b.integer(2, 3)
    else:
        target.insert(0, b.integer(1, 3))
    b.add("Expand", [x.name, b.ints(target)])
    return True


def _table() -> dict[str, Generator]:
    from .motifs import MOTIFS
    from .nngen import batchnorm, conv, gemm, layernorm, matmul, pool, reduce, softmax

    return {
        "Relu": relu, "unary": unary, "unary_attr": unary_attr, "binary": binary,
        "Div": divide, "Pow": power, "Clip": clip, "Where": where, "Cast": cast_roundtrip,
        "duplicate": duplicate, "identity_ops": identity_ops, "MatMul": matmul, "Gemm": gemm,
        "Transpose": transpose,
        "Reshape": reshape, "Flatten": flatten, "Unsqueeze": unsqueeze, "Squeeze": squeeze,
        "Concat": concat, "Split": split, "Slice": slice_, "Expand": expand,
        "Softmax": softmax, "Reduce": reduce, "Conv": conv, "BatchNormalization": batchnorm,
        "LayerNormalization": layernorm, "Pool": pool, **MOTIFS,
    }


GENERATORS: dict[str, Generator] = _table()


def generators(names: Sequence[str] | None = None) -> list[Generator]:
    """The generators named (all when ``None``), ``Relu`` first; unknown names raise.

    In the full table the elementwise families count twice: they are what most rules match.
    """
    if names is None:
        return [*GENERATORS.values(), unary, binary]
    unknown = [n for n in names if n not in GENERATORS]
    if unknown:
        raise ValueError(f"unknown op generators {unknown}; choose from {sorted(GENERATORS)}")
    return [relu, *(GENERATORS[n] for n in names if n != "Relu")]
