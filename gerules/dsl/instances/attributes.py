"""Attributes for a rule's left side: the ones a pattern leaves open (``strides``,
``epsilon``, ``perm``...) and candidates for attribute variables (``{perm = p}``).

Invariant: values are drawn to expose mistakes rather than to be typical: epsilons up to 0.5,
non-identity permutations, strides of 2, grouped convolutions, Gemm's alpha and beta off 1,
while the common value (1.0, identity, defaults) keeps a fair share so guards that ask for
it still pass. A ``layout`` probe draws convolutions that keep their input's height and width
(with the channels tied to them, ``proposals.conv_operand``); a ``values`` probe adds zero
epsilons and zero or negative scales.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ...ir import formats
from .proposals import LAYOUT, VALUES, Draw, Operand

FLOAT_CODES = (1, 10, 11)  # float32, float16, float64


def _perm(draw: Draw, rank: int) -> tuple[int, ...]:
    if draw.coin(0.3):
        return tuple(range(rank))
    return tuple(int(i) for i in draw.rng.permutation(rank))


def _axis(draw: Draw, rank: int) -> int:
    return draw.integer(-rank, rank - 1) if rank else 0


def _conv_attrs(draw: Draw, x: Operand | None) -> dict[str, Any]:
    if x is None or x.value is None or x.value.ndim != 4:
        return {}
    c, h, w = x.shape[1:]
    if draw.probe == LAYOUT:  # the output keeps H and W: a vector of m values fits 3 axes
        k = draw.pick([1, 3]) if min(h, w) >= 3 else 1
        return {"kernel_shape": (k, k), "group": 1, "strides": (1, 1),
                "pads": ((k - 1) // 2,) * 4, "dilations": (1, 1)}
    k = (draw.integer(1, min(3, h)), draw.integer(1, min(3, w)))
    group = c if c > 1 and draw.coin(0.2) else 1
    return {"kernel_shape": k, "group": group, "strides": (draw.pick([1, 1, 2]),) * 2,
            "pads": (draw.integer(0, k[0] - 1), draw.integer(0, k[1] - 1)) * 2,
            "dilations": (1, 1) if draw.coin(0.8) or min(h, w) < 5 else (2, 2)}


def _pool_attrs(op: str, draw: Draw, x: Operand | None) -> dict[str, Any]:
    """A window that fits ``x``'s spatial dims (``[N, C, D1, ..]``): sizes up to 3, strides
    of 1 or 2, pads below the window, sometimes ``ceil_mode``, dilations of 2 (MaxPool) or
    padding counted (AveragePool)."""
    if x is None or x.value is None or x.value.ndim < 3:
        return {}
    spatial = x.shape[2:]
    k = tuple(draw.integer(1, min(3, d)) for d in spatial)
    out: dict[str, Any] = {"kernel_shape": k,
                           "strides": tuple(draw.pick([1, 1, 2]) for _ in k),
                           "pads": tuple(draw.integer(0, w - 1) for w in k) * 2,
                           "ceil_mode": int(draw.coin(0.2))}
    wide = all(d >= 2 * w for d, w in zip(spatial, k, strict=True))
    if op == "MaxPool" and draw.coin(0.2) and wide:
        out["dilations"] = (2,) * len(k)
    if op == "AveragePool":
        out["count_include_pad"] = int(draw.coin(0.3))
    return out


def sample_attrs(op: str, draw: Draw, x: Operand | None) -> dict[str, Any]:
    """Attributes the pattern does not fix, drawn to expose mistakes (see the module doc)."""
    rank = x.value.ndim if x is not None and x.value is not None else 0
    eps = draw.pick([1e-5, 1e-3, 0.1, 0.5, *([0.0] if draw.probe == VALUES else [])])
    if draw.probe == VALUES and draw.theme == "zero":
        eps = 0.0
    table: dict[str, Callable[[], dict[str, Any]]] = {
        "Conv": lambda: _conv_attrs(draw, x),
        "MaxPool": lambda: _pool_attrs("MaxPool", draw, x),
        "AveragePool": lambda: _pool_attrs("AveragePool", draw, x),
        "LpPool": lambda: _pool_attrs("LpPool", draw, x),
        "ge.FusedConv": lambda: _conv_attrs(draw, x),
        "BatchNormalization": lambda: {"epsilon": eps},
        "InstanceNormalization": lambda: {"epsilon": eps},
        "LayerNormalization": lambda: {"epsilon": eps,
                                       "axis": draw.pick([-1, -1, _axis(draw, rank)])},
        "ge.AddLayerNorm": lambda: {"epsilon": eps},
        "Transpose": lambda: {"perm": _perm(draw, rank)},
        "Softmax": lambda: {"axis": _axis(draw, rank)},
        "LogSoftmax": lambda: {"axis": _axis(draw, rank)},
        "Concat": lambda: {"axis": _axis(draw, rank)},
        "Flatten": lambda: {"axis": draw.integer(0, rank)},
        "Gemm": lambda: {"alpha": draw.pick([1.0, 1.0, 0.5]), "beta": draw.pick([1.0, 1.0, 2.0]),
                         "transA": int(draw.coin(0.25)), "transB": int(draw.coin())},
        "ge.FusedMatMul": lambda: {"transB": int(draw.coin(0.3))},
        "Gelu": lambda: {"approximate": draw.pick(["none", "tanh"])},
        "ge.Gelu": lambda: {"approximate": draw.pick(["none", "tanh"])},
        "LeakyRelu": lambda: {"alpha": draw.pick([0.01, 0.2])},
        "Elu": lambda: {"alpha": draw.pick([1.0, 0.5])},
        "Cast": lambda: {"to": draw.pick(FLOAT_CODES)},
        "ge.Attention": lambda: {"scale": draw.pick([0.125, 0.5, 1.0])},
        "ge.MultiHeadAttention": lambda: {"scale": draw.pick([0.125, 0.5, 1.0]),
                                          "num_heads": _heads(draw, x)},
        "Shape": lambda: {"start": draw.pick([0, 0, 1, -1])},
        "ge.TransData": lambda: _transfer(draw, x),
    }
    if op.startswith("Reduce"):
        return {"keepdims": int(draw.coin())}
    make = table.get(op)
    return make() if make is not None else {}


def _transfer(draw: Draw, x: Operand | None) -> dict[str, str]:
    """A TransData of ``x``: from the format it is held in to one that can hold it (plain
    ones go to a blocked one, blocked ones to a plain one, as GE's transfers do)."""
    t = x.type if x is not None else None
    if t is None or t.shape is None:
        return {}
    src = t.format
    targets = [f for f in formats.FORMATS if f != src and formats.can_hold(f, t.shape) is None
               and not (src in formats.PADDED and f in formats.PADDED)]
    if not targets:
        return {}
    return {"src_format": t.format_name,
            "dst_format": formats.name(draw.pick(targets), t.rank)}


def _heads(draw: Draw, x: Operand | None) -> int:
    """A head count that divides Q's last dim (a third of it when K and V are packed in)."""
    last = x.value.shape[-1] if x is not None and x.value is not None and x.value.ndim else 1
    width = last // 3 if last % 3 == 0 and draw.coin() else last
    return int(draw.pick([h for h in range(1, width + 1) if width % h == 0]))


def attr_candidate(name: str, kind: str, draw: Draw, x: Operand | None,
                   earlier: Sequence[Any]) -> Any:
    """A value for an attribute variable (``{perm = p}``): like ``sample_attrs``, sometimes
    equal to an earlier attribute variable of the same kind (guards such as ``a2 == a1``).
    An ``edge`` draw takes telling permutations instead: a rotation for the first, a
    reversal for the next (they do not commute from rank 3 on)."""
    rank = x.value.ndim if x is not None and x.value is not None else 0
    if name == "perm" and draw.edge and rank:
        rotation = tuple(range(1, rank)) + (0,)
        return rotation if sum(isinstance(v, tuple) for v in earlier) % 2 == 0 else \
            tuple(reversed(range(rank)))
    same_kind = [v for v in earlier if isinstance(v, tuple) == (kind in ("ints", "floats"))]
    if same_kind and draw.coin(0.5):
        return draw.pick(same_kind)
    if name == "perm":
        return _perm(draw, rank)
    if name == "axes":
        return (draw.integer(-1, -1) if draw.coin() else draw.integer(0, max(0, rank - 1)),)
    if name in ("axis",):
        return _axis(draw, rank)
    if name == "to":
        return draw.pick(FLOAT_CODES)
    if name in ("src_format", "dst_format"):
        return _transfer(draw, x).get(name)
    if name in ("epsilon", "alpha", "beta", "scale"):
        return draw.pick([1e-5, 1e-3, 0.1, 0.5, 1.0,
                          *([0.0, -0.5] if draw.probe == VALUES else [])])
    if name == "keepdims":
        return 1
    if kind == "int":
        return draw.integer(0, 1)
    if kind == "float":
        return draw.pick([0.5, 1.0, 2.0])
    if kind == "string":
        return draw.pick(["none", "tanh", ""])
    return None
