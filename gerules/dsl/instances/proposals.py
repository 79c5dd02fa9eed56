"""Operands and attributes for one op of a rule's left side, proposed from what is known.

When the instance builder meets an op whose operand is a fresh variable (``x`` in
``Relu(x)``, ``w`` in ``MatMul(a, w)``), ``propose`` draws a type and a value that suit the
op and its other operands: a ``MatMul`` weight gets ``[.., k, n]`` for an ``[.., m, k]`` left
operand, a ``BatchNormalization`` variance positive values of shape ``[C]``, a ``Reshape``
shape a valid target shape for its data, an ``Add`` operand the same shape as its sibling or a
broadcasting variant of it (scalar, channel ``[C, 1, 1]``, suffix, ones). Attributes are
drawn in ``attributes``.

Probes: a ``Draw`` may probe one kind of edge, so that an attempt's instance is telling in
one way rather than typical: ``shape`` (distinct dims, a literal spread over a shape larger
than its sibling, permutations that do not commute), ``layout`` (tied dims, so a vector of
``m`` values fits several axes, and constants laid along one axis: ``[1, m, 1]``), ``values``
(zeros, range ends and large magnitudes that overflow float16 in floats, ``values``;
inverted Clip bounds, zero epsilons) and ``guards`` (the search pins variables at and just
past the edges of the guards, ``search``).

Invariants:
- Everything is drawn from the ``Draw`` given, so an instance is a function of its seed.
- Integer operands (shapes, axes, indices, repeats) and flags are always constants: their
  values are part of the instance, not inputs drawn afresh per run.
- A proposal may still be rejected by the op's inference or kernel; the builder then retries.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...ir.graph import TensorType
from ...ir.registry import ELEMENTWISE, OpSchema


@dataclass(frozen=True, slots=True)
class Operand:
    """A concrete operand: its type and value; ``const`` ones become initializers."""

    type: TensorType | None  # None: an omitted optional input
    value: np.ndarray | None
    const: bool = False

    @property
    def shape(self) -> tuple[int, ...]:
        """The logical shape (a value held in a blocked format has its physical one)."""
        assert self.value is not None
        if self.type is not None and self.type.format != "ND" and self.type.shape is not None:
            return tuple(int(d) for d in self.type.shape)
        return tuple(self.value.shape)


ABSENT = Operand(None, None, True)
SHAPE, LAYOUT, VALUES, GUARDS = "shape", "layout", "values", "guards"
PROBES = ("", SHAPE, LAYOUT, VALUES, GUARDS)  # "": a typical draw
# The largest magnitude a ``values`` probe draws: in float16 a product with a constant of 64
# or more, or a square, overflows (65504 is its largest finite value); float32 and float64
# activations this large overflow nothing a rule commonly holds.
LARGE = {"float16": 2.0**10}
LARGE_ELSE = 2.0**20
# A ``values`` probe's tensor: all zeros, all large, or zeros, range ends and large
# magnitudes mixed into ordinary values. A ``theme`` leans one way; per theme: the shares of
# all-zero and all-large tensors, then of zeros and large magnitudes among mixed elements
# (``attributes``: the "zero" theme's epsilons are 0).
THEMES = {"": (0.15, 0.3, 0.2, 0.35), "zero": (0.35, 0.0, 0.4, 0.0),
          "big": (0.05, 0.6, 0.1, 0.5)}
END = 0.1  # range ends among mixed elements


@dataclass
class Draw:
    """Random choices for one instance: the generator, the float dtype, the largest dim and
    the edge it ``probe``s (see the module docstring; ``""`` draws typical instances)."""

    rng: np.random.Generator
    dtype: str = "float32"
    size: int = 4
    probe: str = ""  # one of PROBES
    memo: dict[str, Any] = field(default_factory=dict)  # per-op state (a Slice's spec)
    tie: int = 0  # the one dim of a ``layout`` probe (drawn on first use)
    theme: str = ""  # a ``values`` probe's leaning (THEMES): "zero", "big" or mixed

    @property
    def edge(self) -> bool:
        """A ``shape`` probe: distinct dims, literals larger than their sibling, perms..."""
        return self.probe == SHAPE

    def integer(self, lo: int, hi: int) -> int:
        return int(self.rng.integers(lo, hi + 1))

    def pick(self, items: Sequence[Any]) -> Any:
        return items[int(self.rng.integers(0, len(items)))]

    def coin(self, p: float = 0.5) -> bool:
        return bool(self.rng.random() < p)

    def dim(self) -> int:
        if self.probe == LAYOUT:
            return self.tied()
        return self.integer(1, self.size)

    def tied(self) -> int:
        """The dim every axis of a ``layout`` probe has (2 or 3)."""
        if not self.tie:
            self.tie = self.integer(2, 3)
        return self.tie

    def shape(self, rank: int) -> tuple[int, ...]:
        if self.edge and rank > 1:
            dims = self.rng.choice(np.arange(2, 4 + max(rank, self.size)), rank, replace=False)
            return tuple(int(d) for d in dims)
        return tuple(self.dim() for _ in range(rank))

    def floats(self, shape: Sequence[int], lo: float | None = None, hi: float | None = None
               ) -> np.ndarray:
        return values(self.rng, shape, self.dtype, lo, hi, edge=self.probe == VALUES,
                      theme=self.theme)


def values(rng: np.random.Generator, shape: Sequence[int], dtype: str,
           lo: float | None = None, hi: float | None = None, *, edge: bool = False,
           theme: str = "") -> np.ndarray:
    """Floats of ``shape``: N(0, 1), or uniform in ``[lo, hi]``. ``edge``: all zeros, all
    large magnitudes (log-uniform up to ``LARGE``, either sign unless the range is
    non-negative), or zeros, the range's ends and large magnitudes mixed in, so overflow in
    the dtype, division by zero and ties show; ``theme`` picks the shares (``THEMES``). The
    one value generator of instances: constants (``Draw.floats``) and the verifier's
    inputs."""
    shape = tuple(shape)
    ranged = lo is not None and hi is not None
    drawn = rng.uniform(lo or 0.0, hi or 0.0, size=shape) if ranged else \
        rng.standard_normal(shape)
    if edge and drawn.size:
        style = rng.random()
        u = rng.random(shape)
        zeros, bigs, zero, big_share = THEMES[theme]
        if style < zeros + bigs:  # one kind of edge for the whole tensor
            u = np.full(shape, 0.0 if style < zeros else 1.0)
        top = np.log(LARGE.get(np.dtype(dtype).name, LARGE_ELSE))
        big = np.exp(rng.uniform(0.0, top, shape))
        if not (ranged and (lo or 0.0) >= 0):
            big = np.where(rng.random(shape) < 0.5, -big, big)
        ends = rng.choice(np.array([lo, hi], dtype=np.float64), shape) if ranged else drawn
        drawn = np.where(u < zero, 0.0, drawn)
        drawn = np.where((u >= zero) & (u < zero + END), ends, drawn)
        drawn = np.where(u >= 1.0 - big_share if big_share else u > 1.0, big, drawn)
    return np.asarray(drawn).astype(dtype)


def tensor(draw: Draw, shape: Sequence[int], lo: float | None = None, hi: float | None = None,
           const: bool = False) -> Operand:
    value = draw.floats(shape, lo, hi)
    return Operand(_type(value), value, const)


def ints(values: Sequence[int] | np.ndarray | int, dtype: str = "int64") -> Operand:
    value = np.asarray(values, dtype=dtype)
    return Operand(_type(value), value, True)


def _type(value: np.ndarray) -> TensorType:
    return TensorType(value.dtype.name, tuple(int(d) for d in value.shape))


def reference(operands: Sequence[Operand | None]) -> Operand | None:
    """The first known operand with a float value: what siblings are shaped after."""
    for o in operands:
        if o is not None and o.value is not None and o.value.dtype.kind == "f":
            return o
    return next((o for o in operands if o is not None and o.value is not None), None)


# ----------------------------------------------------------------------------- shapes


def broadcast_variant(draw: Draw, shape: tuple[int, ...]) -> tuple[int, ...]:
    """``shape`` itself, or a shape that broadcasts to it: scalar, [1], a suffix, a channel
    vector ``[C, 1, ..]`` (with or without leading 1), the last dim, or some dims set to 1.
    A ``layout`` probe mostly lays a vector along one axis (``axis_vector``)."""
    r = len(shape)
    if r == 0:
        return ()
    if draw.probe == LAYOUT and draw.coin(0.8):
        return axis_vector(draw, shape)
    options: list[Callable[[], tuple[int, ...]]] = [
        lambda: shape, lambda: shape, lambda: shape, lambda: (), lambda: (1,),
        lambda: shape[draw.integer(0, r):],
        lambda: tuple(d if draw.coin() else 1 for d in shape),
    ]
    if r >= 2:
        channel = (shape[1],) + (1,) * (r - 2)
        options += [lambda: channel, lambda: (1, *channel), lambda: (shape[-1],)]
    return tuple(draw.pick(options)())


def axis_vector(draw: Draw, shape: tuple[int, ...]) -> tuple[int, ...]:
    """The values of one axis of ``shape``, ones elsewhere, some leading ones dropped:
    ``[1, m, 1]``, ``[m, 1, 1]``, ``[m]`` for ``[n, m, m, m]``. With tied dims these are the
    layouts a per-channel guard must tell apart."""
    axis = draw.integer(0, len(shape) - 1)
    laid = tuple(d if i == axis else 1 for i, d in enumerate(shape))
    return laid[draw.integer(0, axis):]


def grown_variant(draw: Draw, shape: tuple[int, ...]) -> tuple[int, ...]:
    """A shape that ``shape`` broadcasts to and that is larger: a 1 made larger, or a new
    leading dim."""
    ones = [i for i, d in enumerate(shape) if d == 1]
    if ones and draw.coin(0.7):
        grown = list(shape)
        grown[draw.pick(ones)] = draw.integer(2, 3)
        return tuple(grown)
    return (draw.integer(2, 3), *shape)


def elementwise(draw: Draw, operands: Sequence[Operand | None], slot: int) -> Operand:
    ref = reference(operands)
    if ref is None or ref.value is None:
        return tensor(draw, draw.shape(draw.integer(1, 4)))
    return tensor(draw, broadcast_variant(draw, ref.shape))


def random_rank(draw: Draw, lo: int = 1, hi: int = 4) -> int:
    return draw.integer(lo, hi)


# ----------------------------------------------------------------------------- int inputs


def reshape_target(draw: Draw, shape: tuple[int, ...], rank: int | None = None) -> Operand:
    """A valid target for ``Reshape``: a refactoring of the element count, maybe with -1/0;
    sometimes (always when ``rank`` asks for one more or one less dim) the last dim split in
    two or the last two merged (attention heads), the split at the smallest factor, so equal
    shapes split alike across a pattern."""
    f = _smallest_factor(shape[-1]) if shape else None
    if f is not None and (rank == len(shape) + 1 or rank is None and draw.coin(0.2)):
        return ints([*shape[:-1], f, shape[-1] // f])
    if len(shape) >= 2 and (rank == len(shape) - 1 or rank is None and draw.coin(0.2)):
        return ints([*shape[:-2], shape[-2] * shape[-1]])
    n = math.prod(shape)
    dims: list[int] = []
    rest = n
    for _ in range(draw.integer(0, 3)):
        f = draw.pick([d for d in range(1, rest + 1) if rest % d == 0])
        dims.append(f)
        rest //= f
    dims.append(rest)
    if draw.coin(0.3):
        dims[draw.integer(0, len(dims) - 1)] = -1
    elif draw.coin(0.2) and shape and len(dims) == len(shape) and dims[0] == shape[0]:
        dims[0] = 0
    return ints(dims)


def _smallest_factor(n: int) -> int | None:
    return next((f for f in range(2, n + 1) if n % f == 0), None)


def expand_target(draw: Draw, shape: tuple[int, ...]) -> Operand:
    target = list(shape)
    ones = [i for i, d in enumerate(shape) if d == 1]
    if ones and draw.coin():
        target[draw.pick(ones)] = draw.integer(2, 3)
    elif draw.coin():
        target.insert(0, draw.integer(1, 3))
    return ints(target)


def slice_spec(draw: Draw, shape: tuple[int, ...]) -> dict[str, Operand]:
    axis = draw.integer(0, len(shape) - 1) if shape else 0
    size = shape[axis] if shape else 1
    if draw.coin(0.3):  # the whole axis (what drop_full_slice rules look for)
        start, end, step = 0, size, 1
    else:
        start = draw.integer(0, max(0, size - 1))
        end = draw.integer(start + 1, size) if start < size else size
        step = draw.pick([1, 1, 2])
    return {"starts": ints([start]), "ends": ints([end]), "axes": ints([axis]),
            "steps": ints([step])}


def axes_subset(draw: Draw, rank: int) -> Operand:
    if rank == 0:
        return ints([])
    axes = sorted({draw.integer(0, rank - 1) for _ in range(draw.integer(1, rank))})
    return ints([a - rank if draw.coin(0.3) else a for a in axes])


def split_sizes(draw: Draw, size: int) -> Operand:
    first = draw.integer(1, size - 1) if size > 1 else size
    return ints([first, size - first] if size > 1 else [size])


INT_PORTS = frozenset({
    "Reshape.shape", "Expand.shape", "Tile.repeats", "Squeeze.axes", "Unsqueeze.axes",
    "Slice.starts", "Slice.ends", "Slice.axes", "Slice.steps", "Split.split", "Gather.indices",
    "GatherElements.indices", "TopK.K", "CumSum.axis", "Pad.pads", "Pad.axes", "Trilu.k",
    "Dropout.training_mode", "Where.condition", "ConstantOfShape.input", "Range.start",
    "Range.limit", "Range.delta",
})
# Ops whose first operand has a structure of its own (not just "like a sibling").
SHAPED = frozenset({"MatMul", "Gemm", "Conv", "ge.FusedConv", "ge.FusedMatMul",
                    "BatchNormalization", "InstanceNormalization", "LayerNormalization",
                    "ge.AddLayerNorm", "ge.Attention", "ge.MultiHeadAttention"})


def is_int_port(op: str, port: str) -> bool:
    return f"{op}.{port}" in INT_PORTS or (op.startswith("Reduce") and port == "axes")


def int_operand(op: str, port: str, draw: Draw, data: Operand | None,
                attrs: dict[str, Any], rank: int | None = None) -> Operand | None:
    """A value for an integer (shape, axes, indices) or flag input, or None if not one;
    ``rank``: the rank a guard pins the op's result to (a ``Reshape`` target follows it)."""
    shape = data.shape if data is not None and data.value is not None else ()
    key = f"{op}.{port}"
    if key == "Reshape.shape":
        return reshape_target(draw, shape, rank)
    if key == "Expand.shape":
        return expand_target(draw, shape)
    if key == "Tile.repeats":
        return ints([draw.pick([1, 1, 2]) for _ in shape])
    if key == "Squeeze.axes":
        ones = [i for i, d in enumerate(shape) if d == 1]
        return ints([draw.pick(ones)] if ones else [])
    if key == "Unsqueeze.axes":
        return ints([draw.integer(0, len(shape))])
    if op == "Slice" and port in ("starts", "ends", "axes", "steps"):
        spec = draw.memo.setdefault("slice", slice_spec(draw, shape))
        return spec[port]  # type: ignore[no-any-return]
    if port == "axes" and op.startswith("Reduce"):
        return axes_subset(draw, len(shape))
    if key == "Split.split":
        axis = int(attrs.get("axis", 0)) % max(1, len(shape))
        return split_sizes(draw, shape[axis] if shape else 1)
    if key in ("Gather.indices", "GatherElements.indices"):
        axis = int(attrs.get("axis", 0)) % max(1, len(shape))
        return ints(draw.rng.integers(0, max(1, shape[axis] if shape else 1), size=(2,)))
    if key == "TopK.K":
        return ints([draw.integer(1, shape[-1] if shape else 1)])
    if key == "CumSum.axis":
        return ints(draw.integer(0, max(0, len(shape) - 1)))
    if key == "Pad.pads":
        return ints([draw.integer(0, 1) for _ in range(2 * len(shape))])
    if key in ("Dropout.training_mode",):
        return Operand(TensorType("bool", ()), np.asarray(False), True)
    if key == "Where.condition":
        value = draw.rng.random(shape) < 0.5
        return Operand(_type(np.asarray(value)), np.asarray(value), False)
    if key == "Trilu.k":
        return ints(draw.integer(-1, 1))
    if op == "Range":
        spec = draw.memo.setdefault("range", range_spec(draw))
        return spec[port]  # type: ignore[no-any-return]
    return None


def range_spec(draw: Draw) -> dict[str, Operand]:
    """Int64 scalars for ``Range``: mostly ``0 .. n`` by 1 (indices), sometimes another
    start or a step of 2."""
    start = 0 if draw.coin(0.6) else draw.integer(1, 2)
    delta = 1 if draw.coin(0.7) else 2
    return {"start": ints(start), "limit": ints(start + delta * draw.dim()),
            "delta": ints(delta)}


def scalar_operand(op: str, port: str, draw: Draw) -> Operand | None:
    """Scalar float inputs: Clip bounds (a ``values`` probe inverts or ties them), Dropout's
    ratio, Pad's value."""
    if op == "Clip" and port in ("min", "max"):
        lows, highs = [0.0, -1.0, -6.0], [6.0, 1.0]
        if draw.probe == VALUES:
            lows, highs = [*lows, 1.0, 6.0], [*highs, 0.0, -1.0]
        value = draw.pick(lows) if port == "min" else draw.pick(highs)
        return Operand(TensorType(draw.dtype, ()), np.asarray(value, draw.dtype), True)
    if op == "Dropout" and port == "ratio":
        return Operand(TensorType(draw.dtype, ()), np.asarray(0.5, draw.dtype), True)
    if op == "Pad" and port == "constant_value":
        return Operand(TensorType(draw.dtype, ()), np.asarray(0.0, draw.dtype), True)
    return None


# ----------------------------------------------------------------------------- float inputs


def matmul_operand(draw: Draw, operands: Sequence[Operand | None], slot: int,
                   trans_b: bool = False) -> Operand:
    other = operands[1 - slot] if len(operands) > 1 else None
    if slot == 0:
        if other is not None and other.value is not None and other.value.ndim >= 2:
            k = other.shape[-1] if trans_b else other.shape[-2]
            return tensor(draw, (*draw.shape(draw.integer(1, 3) - 1), draw.dim(), k))
        return tensor(draw, draw.shape(draw.integer(2, 4)))
    assert other is not None and other.value is not None
    a = other.shape
    k, n = a[-1], draw.dim()
    batch = a[:-2] if draw.coin() else ()
    return tensor(draw, (*batch, n, k) if trans_b else (*batch, k, n))


def conv_operand(draw: Draw, operands: Sequence[Operand | None], slot: int,
                 attrs: dict[str, Any]) -> Operand:
    if slot == 0:
        if draw.probe == LAYOUT:  # channels, height and width alike (see _conv_attrs)
            return tensor(draw, (draw.integer(1, 2), *(draw.tied(),) * 3))
        n, c = draw.integer(1, 2), draw.integer(1, 4)
        return tensor(draw, (n, c, draw.integer(3, 6), draw.integer(3, 6)))
    x = operands[0]
    assert x is not None and x.value is not None
    group = int(attrs.get("group", 1))
    kernel = tuple(attrs.get("kernel_shape") or (draw.integer(1, 3), draw.integer(1, 3)))
    many = draw.tied() // group if draw.probe == LAYOUT and draw.tied() % group == 0 else \
        draw.integer(1, 3)
    m = int(draw.memo.setdefault("conv_m", group * many))
    c = x.shape[1]
    if slot == 1:
        fan_in = max(1, c // group * math.prod(kernel))
        bound = 1 / math.sqrt(fan_in)
        return tensor(draw, (m, c // group, *kernel), -bound, bound)
    return tensor(draw, (m,), -0.5, 0.5)


def norm_operand(op: str, draw: Draw, operands: Sequence[Operand | None], slot: int,
                 attrs: dict[str, Any]) -> Operand:
    """BatchNormalization / InstanceNormalization / LayerNormalization / ge.AddLayerNorm."""
    if slot == 0:
        lo = 3 if op == "InstanceNormalization" else 2
        return tensor(draw, draw.shape(draw.integer(lo, 4)))
    x = operands[0]
    assert x is not None and x.value is not None
    if op in ("LayerNormalization", "ge.AddLayerNorm"):
        if op == "ge.AddLayerNorm" and slot == 1:
            return tensor(draw, x.shape)
        axis = int(attrs.get("axis", -1)) % max(1, len(x.shape))
        shape = x.shape[axis:] if op == "LayerNormalization" else x.shape[-1:]
        return tensor(draw, shape, 0.5, 1.5) if slot == (2 if op == "ge.AddLayerNorm" else 1) \
            else tensor(draw, shape)
    channels = x.shape[1:2] or (1,)  # (a pinned rank below 2: inference refuses it)
    if op == "BatchNormalization" and slot == 4:  # the variance: positive, some of it small
        return tensor(draw, channels, 0.01, 2.0)
    return tensor(draw, channels, 0.5, 1.5) if slot == 1 else tensor(draw, channels)


def attention_operand(draw: Draw, operands: Sequence[Operand | None], slot: int) -> Operand:
    q = operands[0]
    if slot == 0 or q is None or q.value is None:
        return tensor(draw, (draw.integer(1, 2), draw.integer(1, 2), draw.dim(), draw.dim()))
    b, h, s, d = q.shape
    kt = operands[1] if len(operands) > 1 else None
    known = kt.shape[-1] if kt is not None and kt.value is not None else draw.dim()
    s2 = int(draw.memo.setdefault("s2", known))
    if slot == 1:
        return tensor(draw, (b, h, d, s2))
    if slot == 2:
        return tensor(draw, (b, h, s2, draw.dim()))
    return tensor(draw, broadcast_variant(draw, (b, h, s, s2)))


def mha_operand(draw: Draw, operands: Sequence[Operand | None], slot: int,
                attrs: dict[str, Any]) -> Operand:
    """Q, K, V ``[B, S, H*D]`` alike (packed: ``3*H*D``), a Mask broadcasting to the scores."""
    q = operands[0]
    h = int(attrs.get("num_heads") or 1)
    if slot == 0 or q is None or q.value is None:
        return tensor(draw, (draw.integer(1, 2), draw.dim(), h * draw.dim()))
    if slot in (1, 2):
        return tensor(draw, q.shape)
    k = operands[1] if operands[1] is not None and operands[1].value is not None else q
    return tensor(draw, broadcast_variant(draw, (q.shape[0], h, q.shape[1], k.shape[1])))


def gemm_operand(draw: Draw, operands: Sequence[Operand | None], slot: int,
                 attrs: dict[str, Any]) -> Operand:
    if slot == 0:
        return tensor(draw, draw.shape(2))
    a = operands[0]
    assert a is not None and a.value is not None
    m, k = a.shape[::-1] if attrs.get("transA") else a.shape
    n = int(draw.memo.setdefault("gemm_n", draw.dim()))
    if slot == 1:
        return tensor(draw, (n, k) if attrs.get("transB") else (k, n))
    return tensor(draw, draw.pick([(), (n,), (1, n), (m, n), (m, 1)]))


def float_operand(op: str, schema: OpSchema, draw: Draw, operands: Sequence[Operand | None],
                  slot: int, attrs: dict[str, Any]) -> Operand:
    """A float tensor for ``slot`` of ``op`` (see the module docstring)."""
    if op == "MatMul":
        return matmul_operand(draw, operands, slot)
    if op == "ge.FusedMatMul":
        if slot == 2:
            w = operands[1]
            n = (w.shape[-2] if attrs.get("transB") else w.shape[-1]) if w and w.value is not None \
                else draw.dim()
            return tensor(draw, (n,))
        return matmul_operand(draw, operands, slot, bool(attrs.get("transB")))
    if op in ("Conv", "ge.FusedConv") and slot <= 2:
        return conv_operand(draw, operands, slot, attrs)
    if op in ("BatchNormalization", "InstanceNormalization", "LayerNormalization",
              "ge.AddLayerNorm"):
        return norm_operand(op, draw, operands, slot, attrs)
    if op == "ge.Attention":
        return attention_operand(draw, operands, slot)
    if op == "ge.MultiHeadAttention":
        return mha_operand(draw, operands, slot, attrs)
    if op == "Gemm":
        return gemm_operand(draw, operands, slot, attrs)
    if schema.has(ELEMENTWISE) or slot > 0:
        return elementwise(draw, operands, slot)
    return tensor(draw, draw.shape(draw.integer(1, 4)))
