"""Matrix products (ai.onnx): MatMul, Gemm, Einsum, MatMulInteger.

Invariants:
- MatMul follows NumPy's ``matmul``: 1-D operands are promoted and the promoted dim
  removed again, batch dims broadcast; inner dims that are both known must agree
  ("MatMul: inner dims 4 and 5 differ"). ``matmul_type`` is shared with ge.FusedMatMul.
- float16 products run in float32 and are rounded once; other types keep their dtype.
- Einsum inference parses the equation (explicit or implicit output, ``...``) and gives each
  output letter its input size; a letter bound to two different known sizes raises.
- FLOPs are ``2 * MACs``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...errors import ShapeError
from ..graph import Dim, Shape, TensorType
from ..registry import Call
from ._common import (
    Arrays,
    Types,
    at,
    attr,
    broadcast,
    fattr,
    fill,
    fmt,
    iattr,
    need,
    numel_of,
    out_elems,
    same_dtype,
    sattr,
    schema,
    widen,
)


def matmul_shape(a: Shape | None, b: Shape | None, op: str = "MatMul") -> Shape | None:
    """The shape of ``a @ b`` with NumPy's promotion rules."""
    if a is None or b is None:
        return None
    if len(a) == 0 or len(b) == 0:
        raise ShapeError(f"{op}: operands must not be scalars")
    a2 = (1, *a) if len(a) == 1 else a
    b2 = (*b, 1) if len(b) == 1 else b
    k1, k2 = a2[-1], b2[-2]
    if isinstance(k1, int) and isinstance(k2, int) and k1 != k2:
        raise ShapeError(f"{op}: inner dims {k1} and {k2} differ ({fmt(a)} @ {fmt(b)})")
    batch = broadcast(a2[:-2], b2[:-2]) or ()
    out: tuple[Dim, ...] = (*batch, a2[-2], b2[-1])
    if len(a) == 1:
        out = out[:-2] + out[-1:]
    if len(b) == 1:
        out = out[:-1]
    return out


def blas_ready(x: np.ndarray) -> np.ndarray:
    """``x`` with unit stride in one of its last two dims (copied if not).

    NumPy's stacked matmul calls BLAS only for such operands; a transposed view (attention's
    ``K^T`` from a Transpose) otherwise takes a scalar loop that is 100x slower.
    """
    if x.ndim < 2 or x.dtype.kind != "f":
        return x
    item = x.itemsize
    if x.strides[-1] == item or x.strides[-2] == item:
        return x
    return np.ascontiguousarray(x)


def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` in a's dtype (float16 computed in float32)."""
    y = np.matmul(blas_ready(widen(a)), blas_ready(widen(b)))
    return np.asarray(y).astype(a.dtype, copy=False)


def _matmul_infer(types: Types, _c: object, call: Call) -> list[TensorType]:
    a, b = need(at(types, 0), "MatMul", "A"), need(at(types, 1), "MatMul", "B")
    return [TensorType(same_dtype([a, b], "MatMul"), matmul_shape(a.shape, b.shape))]


def _matmul_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    a, b = need(at(inputs, 0), "MatMul", "A"), need(at(inputs, 1), "MatMul", "B")
    return [matmul(a, b)]


def _matmul_out(inputs: Arrays, call: Call, outs: Sequence[np.ndarray]) -> None:
    """``A @ B`` with one BLAS call per matrix straight into ``outs[0]`` (float16 through
    float32, then copied)."""
    a, b = need(at(inputs, 0), "MatMul", "A"), need(at(inputs, 1), "MatMul", "B")
    if a.dtype == np.float16 or a.dtype != outs[0].dtype:
        fill(outs, _matmul_kernel(inputs, call), "MatMul")
        return
    np.matmul(blas_ready(a), blas_ready(b), out=outs[0])


def matmul_flops(ins: Types, outs: Sequence[TensorType], call: Call) -> int:
    a = at(ins, 0)
    k = a.shape[-1] if a is not None and a.shape else 1
    return 2 * numel_of(outs[0]) * (k if isinstance(k, int) else 1)


# ----------------------------------------------------------------------------- Gemm


def _gemm_infer(types: Types, _c: object, call: Call) -> list[TensorType]:
    a, b = need(at(types, 0), "Gemm", "A"), need(at(types, 1), "Gemm", "B")
    dtype = same_dtype([a, b, at(types, 2)], "Gemm")
    if a.shape is None or b.shape is None:
        return [TensorType(dtype, None)]
    if len(a.shape) != 2 or len(b.shape) != 2:
        raise ShapeError(f"Gemm: operands must be 2-D, got {fmt(a.shape)} and {fmt(b.shape)}")
    m, k1 = a.shape[::-1] if iattr(call, "transA") else a.shape
    k2, n = b.shape[::-1] if iattr(call, "transB") else b.shape
    if isinstance(k1, int) and isinstance(k2, int) and k1 != k2:
        raise ShapeError(f"Gemm: inner dims {k1} and {k2} differ")
    c = at(types, 2)
    if c is not None and c.shape is not None:
        out = broadcast((m, n), c.shape)  # C broadcasts to [M, N], never past it
        grown = out is not None and (len(out) > 2 or any(
            isinstance(o, int) and isinstance(d, int) and o != d
            for o, d in zip(out, (m, n), strict=False)))
        if grown:
            raise ShapeError(f"Gemm: C {fmt(c.shape)} does not broadcast to [{m},{n}]")
    return [TensorType(dtype, (m, n))]


def _gemm_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    a, b = need(at(inputs, 0), "Gemm", "A"), need(at(inputs, 1), "Gemm", "B")
    a2, b2 = _gemm_operands(a, b, call)
    y = np.empty((a2.shape[0], b2.shape[1]), np.result_type(a2, b2))
    _gemm_into(a2, b2, at(inputs, 2), call, y)
    return [y.astype(a.dtype, copy=False)]


def _gemm_operands(a: np.ndarray, b: np.ndarray, call: Call) -> tuple[np.ndarray, np.ndarray]:
    """A' and B' as views (a transposed operand is a transposed view: NumPy hands it to
    BLAS with the transpose flag, never copying the weight)."""
    if a.ndim != 2 or b.ndim != 2:
        raise ShapeError(f"Gemm: operands must be 2-D, got {list(a.shape)} and "
                         f"{list(b.shape)}")
    a2, b2 = blas_ready(widen(a)), blas_ready(widen(b))
    return (a2.T if iattr(call, "transA") else a2), (b2.T if iattr(call, "transB") else b2)


def _gemm_into(a2: np.ndarray, b2: np.ndarray, c: np.ndarray | None, call: Call,
               y: np.ndarray) -> None:
    """``y = alpha * A' @ B' + beta * C`` with one BLAS call into ``y`` (not an operand)."""
    np.matmul(a2, b2, out=y)
    alpha, beta = fattr(call, "alpha", 1.0), fattr(call, "beta", 1.0)
    if alpha != 1.0:
        y *= y.dtype.type(alpha)
    if c is not None and beta != 0.0:
        cw = widen(c)
        y += cw if beta == 1.0 else cw * cw.dtype.type(beta)


def _gemm_out(inputs: Arrays, call: Call, outs: Sequence[np.ndarray]) -> None:
    a, b = need(at(inputs, 0), "Gemm", "A"), need(at(inputs, 1), "Gemm", "B")
    a2, b2 = _gemm_operands(a, b, call)
    y = outs[0]
    if y.dtype != np.result_type(a2, b2):  # float16 through float32
        fill(outs, _gemm_kernel(inputs, call), "Gemm")
        return
    _gemm_into(a2, b2, at(inputs, 2), call, y)


def _gemm_flops(ins: Types, outs: Sequence[TensorType], call: Call) -> int:
    a = at(ins, 0)
    k = (a.shape[0] if iattr(call, "transA") else a.shape[-1]) if a and a.shape else 1
    extra = 2 if at(ins, 2) is not None else 0
    return (2 * (k if isinstance(k, int) else 1) + extra) * numel_of(outs[0])


# ----------------------------------------------------------------------------- Einsum


def _parse_einsum(eq: str, ranks: Sequence[int]) -> tuple[list[str], str]:
    """Each input's labels (``...`` expanded to ``0..9`` digits) and the output labels."""
    eq = eq.replace(" ", "")
    lhs, _, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise ShapeError(f"Einsum: equation has {len(terms)} operands, got {len(ranks)}")
    ell = max((r - len(t.replace("...", "")) for t, r in zip(terms, ranks, strict=True)
               if "..." in t), default=0)
    digits = "".join(str(i) for i in range(ell))
    labels = []
    for t, r in zip(terms, ranks, strict=True):
        if "..." in t:
            n = r - len(t.replace("...", ""))
            t = t.replace("...", digits[ell - n:] if n else "")
        if len(t) != r or not all(ch.isalpha() or ch.isdigit() for ch in t):
            raise ShapeError(f"Einsum: term {t!r} does not fit an operand of rank {r}")
        labels.append(t)
    if "->" in eq:
        out = rhs.replace("...", digits)
    else:
        counts = {ch: "".join(labels).count(ch) for ch in "".join(labels)}
        out = digits + "".join(sorted(ch for ch, n in counts.items() if n == 1 and
                                      ch.isalpha()))
    return labels, out


def _einsum_infer(types: Types, _c: object, call: Call) -> list[TensorType]:
    present = [need(t, "Einsum") for t in types]
    dtype = same_dtype(present, "Einsum")
    if any(t.shape is None for t in present):
        return [TensorType(dtype, None)]
    labels, out = _parse_einsum(sattr(call, "equation"), [len(t.shape) for t in present])  # type: ignore[arg-type]
    sizes: dict[str, Dim] = {}
    for term, t in zip(labels, present, strict=True):
        for ch, d in zip(term, t.shape, strict=True):  # type: ignore[arg-type]
            sizes[ch] = _merge_dim(sizes.get(ch), d, ch)
    for ch in out:
        if ch not in sizes:
            raise ShapeError(f"Einsum: output label {ch!r} is in no input")
    return [TensorType(dtype, tuple(sizes[ch] for ch in out))]


def _merge_dim(old: Dim | None, new: Dim, label: str) -> Dim:
    if old is None or old == 1 and label.isdigit():
        return new
    if new == 1 and label.isdigit():
        return old
    if isinstance(old, int) and isinstance(new, int) and old != new:
        raise ShapeError(f"Einsum: label {label!r} is both {old} and {new}")
    return old if isinstance(old, int) else new


def _einsum_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    xs = [need(x, "Einsum") for x in inputs]
    y = np.einsum(sattr(call, "equation"), *[widen(x) for x in xs], optimize=len(xs) > 2)
    return [np.asarray(y).astype(xs[0].dtype, copy=False)]


def _einsum_flops(ins: Types, outs: Sequence[TensorType], call: Call) -> int:
    present = [t for t in ins if t is not None and t.shape is not None]
    try:
        labels, _ = _parse_einsum(sattr(call, "equation"), [len(t.shape) for t in present])  # type: ignore[arg-type]
    except ShapeError:
        return numel_of(outs[0])
    sizes = {ch: d for term, t in zip(labels, present, strict=True)
             for ch, d in zip(term, t.shape, strict=True)}  # type: ignore[arg-type]
    total = 1
    for d in sizes.values():
        total *= d if isinstance(d, int) else 1
    return 2 * total


# ----------------------------------------------------------------------------- MatMulInteger


def _mmi_infer(types: Types, _c: object, call: Call) -> list[TensorType]:
    a, b = need(at(types, 0), "MatMulInteger", "A"), need(at(types, 1), "MatMulInteger", "B")
    return [TensorType("int32", matmul_shape(a.shape, b.shape, "MatMulInteger"))]


def _mmi_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    a, b = need(at(inputs, 0), "MatMulInteger"), need(at(inputs, 1), "MatMulInteger")
    a32, b32 = a.astype(np.int32), b.astype(np.int32)
    za, zb = at(inputs, 2), at(inputs, 3)
    if za is not None:
        a32 = a32 - (za.astype(np.int32)[:, None] if za.ndim == 1 else za.astype(np.int32))
    if zb is not None:
        b32 = b32 - zb.astype(np.int32)
    return [np.matmul(a32, b32).astype(np.int32)]


def _det_infer(types: Types, _c: object, call: Call) -> list[TensorType]:
    x = need(at(types, 0), "Det")
    if x.shape is not None and len(x.shape) < 2:
        raise ShapeError(f"Det needs a matrix or a batch of them, got rank {len(x.shape)}")
    return [TensorType(x.dtype, None if x.shape is None else x.shape[:-2])]


def _det_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    x = need(at(inputs, 0), "Det")
    return [np.asarray(np.linalg.det(widen(x))).astype(x.dtype)]


SCHEMAS = [
    schema("MatMul", 1, "A B", "Y", _matmul_infer, _matmul_kernel, unit="cube",
           flops=matmul_flops, kernel_out=_matmul_out,
           doc="matrix product with NumPy batching and 1-D promotion"),
    schema("Gemm", 7, "A B C?", "Y", _gemm_infer, _gemm_kernel, unit="cube",
           attrs=[attr("alpha", "float", 1.0), attr("beta", "float", 1.0),
                  attr("transA", "int", 0), attr("transB", "int", 0)],
           flops=_gemm_flops, kernel_out=_gemm_out,
           doc="Y = alpha * A' @ B' + beta * C (C broadcasts)"),
    schema("Einsum", 12, "Inputs*", "Output", _einsum_infer, _einsum_kernel, unit="cube",
           attrs=[attr("equation", "string", required=True)], flops=_einsum_flops,
           doc="Einstein summation over the equation's labels"),
    schema("MatMulInteger", 10, "A B a_zero_point? b_zero_point?", "Y", _mmi_infer,
           _mmi_kernel, unit="cube", flops=matmul_flops,
           doc="int32 product of 8-bit integers minus their zero points"),
    schema("Det", 11, "X", "Y", _det_infer, _det_kernel, flops=out_elems(27),
           doc="determinant of each square matrix in the last two dims"),
]
