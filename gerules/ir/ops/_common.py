"""Shared helpers for op definitions: broadcasting, axis handling, schema builders.

Invariants:
- ``broadcast`` follows NumPy/ONNX multidirectional broadcasting; a symbolic dim broadcasts
  against 1 and equals only itself; a mismatch of two known dims raises ``ShapeError``.
- Builders return ``OpSchema`` objects whose ``infer`` and ``kernel`` agree on dtype and shape.
- ``"?"`` in an inferred shape is a dim nobody can know before run time; the graph-level
  inference renames each one to a fresh symbol.
- Kernels and inference functions read operands with ``at(seq, i)``: a node may omit trailing
  optional inputs, so ``seq`` can be shorter than the schema's port list.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Generic, TypeVar

import numpy as np

from ...errors import KernelError, ShapeError
from ..dtypes import LOW_FLOATS
from ..graph import Dim, Shape, TensorType
from ..layout import FormatRule
from ..registry import (
    COMMUTATIVE,
    ELEMENTWISE,
    INPLACE,
    SHAPE_OP,
    AttrSpec,
    Call,
    FlopsFn,
    FoldTypesFn,
    InferFn,
    KernelFn,
    KernelOutFn,
    OpSchema,
    Port,
    Unit,
    UnitFn,
)

T = TypeVar("T")
UNKNOWN = "?"
F16 = np.dtype(np.float16)
Arrays = Sequence["np.ndarray | None"]
Types = Sequence["TensorType | None"]


# ----------------------------------------------------------------------------- operands


def at(seq: Sequence[T | None], i: int) -> T | None:
    """``seq[i]``, or ``None`` when the node omitted that (optional) operand."""
    return seq[i] if 0 <= i < len(seq) else None


def need(t: T | None, op: str, what: str = "input") -> T:
    """An operand that must be present (its type or value)."""
    if t is None:
        raise ShapeError(f"{op}: {what} is required")
    return t


def ints(value: Any) -> list[int]:
    """A constant tensor or attribute as a list of Python ints."""
    return [int(v) for v in np.asarray(value).reshape(-1)]


def floats(value: Any) -> list[float]:
    return [float(v) for v in np.asarray(value).reshape(-1)]


def is_static(shape: Shape | None) -> bool:
    return shape is not None and all(isinstance(d, int) for d in shape)


def numel(shape: Sequence[Dim]) -> int | None:
    n = 1
    for d in shape:
        if not isinstance(d, int):
            return None
        n *= d
    return n


def prod(values: Iterable[int]) -> int:
    n = 1
    for v in values:
        n *= int(v)
    return n


def dim_op(fn: Callable[..., int], *dims: Dim) -> Dim:
    """``fn`` over known dims, ``"?"`` when any of them is symbolic."""
    if all(isinstance(d, int) for d in dims):
        return int(fn(*dims))
    return UNKNOWN


def fmt(shape: Shape | None) -> str:
    return "?" if shape is None else "[" + ",".join(str(d) for d in shape) + "]"


# ----------------------------------------------------------------------------- shapes


def broadcast(*shapes: Shape | None) -> Shape | None:
    """The broadcast of several shapes (``None`` if any rank is unknown)."""
    if any(s is None for s in shapes):
        return None
    rank = max((len(s) for s in shapes), default=0)  # type: ignore[arg-type]
    out: list[Dim] = []
    for i in range(rank):
        dims = [s[len(s) - rank + i] for s in shapes if len(s) - rank + i >= 0]  # type: ignore
        out.append(_broadcast_dim(dims, shapes))
    return tuple(out)


def _broadcast_dim(dims: list[Dim], shapes: Sequence[Shape | None]) -> Dim:
    known = {d for d in dims if isinstance(d, int) and d != 1}
    symbols = {d for d in dims if isinstance(d, str) and d != UNKNOWN}
    if len(known) > 1:
        raise ShapeError(f"shapes {' and '.join(fmt(s) for s in shapes)} do not broadcast")
    if known:
        return known.pop()
    if UNKNOWN in dims:
        return UNKNOWN
    if len(symbols) == 1:
        return symbols.pop()
    if symbols:
        return sorted(symbols)[0]  # equal at run time or the run fails; keep one name
    return 1


def norm_axis(axis: int, rank: int, what: str = "axis") -> int:
    """``axis`` in ``[-rank, rank)`` mapped to ``[0, rank)``."""
    if not -rank <= axis < rank:
        raise ShapeError(f"{what} {axis} is out of range for rank {rank}")
    return axis % rank


def norm_axes(axes: Iterable[int], rank: int, what: str = "axes") -> list[int]:
    """Axes mapped to ``[0, rank)``; duplicates raise."""
    out = [norm_axis(int(a), rank, what) for a in axes]
    if len(set(out)) != len(out):
        raise ShapeError(f"{what} {list(axes)} repeat an axis")
    return out


def same_dtype(types: Types, op: str) -> str:
    """The common dtype of the present operands; mixing dtypes raises."""
    dts = {t.dtype for t in types if t is not None}
    if len(dts) > 1:
        raise ShapeError(f"{op} operands have different dtypes {sorted(dts)}")
    if not dts:
        raise ShapeError(f"{op} has no typed operands")
    return dts.pop()


def numel_of(t: TensorType | None) -> int:
    """Element count for the cost model (symbolic dims were already replaced by 1)."""
    return 0 if t is None else (t.numel() or 0)


def out_elems(factor: int = 1) -> FlopsFn:
    """A ``flops`` function: ``factor`` operations per element of output 0."""
    return lambda ins, outs, call: factor * numel_of(outs[0] if outs else None)


def in_elems(factor: int = 1) -> FlopsFn:
    """A ``flops`` function: ``factor`` operations per element of input 0."""
    return lambda ins, outs, call: factor * numel_of(at(ins, 0))


def shape_math_unit(ins: Types, outs: Sequence[TensorType]) -> Unit:
    """"scalar" when the op computes a shape vector (int64, rank <= 1), else "vector"."""
    out = outs[0] if outs else None
    if out is not None and out.dtype == "int64" and out.shape is not None and len(out.shape) <= 1:
        return "scalar"
    return "vector"


# ----------------------------------------------------------------------------- builders


PORT_DTYPES = {"i64": "int64", "bool": "bool"}


def ports(spec: str) -> tuple[Port, ...]:
    """Ports from ``"X W B? shape:i64"``: ``?`` marks optional, ``*`` variadic (last port
    only), ``:i64`` the one element type the port takes (shapes, axes, sizes)."""
    out = []
    for word in spec.split():
        name, _, dtype = word.rstrip("?*").partition(":")
        out.append(Port(name, optional="?" in word, variadic="*" in word,
                        dtype=PORT_DTYPES[dtype] if dtype else None))
    return tuple(out)


def attr(name: str, kind: str, default: Any = None, required: bool = False) -> AttrSpec:
    if isinstance(default, list):
        default = tuple(default)
    return AttrSpec(name, kind, default, required)  # type: ignore[arg-type]


def schema(
    op: str,
    since: int,
    inputs: str,
    outputs: str,
    infer: InferFn,
    kernel: KernelFn,
    *,
    attrs: Sequence[AttrSpec] = (),
    unit: Unit = "vector",
    traits: Iterable[str] = (),
    flops: FlopsFn | None = None,
    fold_types: FoldTypesFn | None = None,
    unit_of: UnitFn | None = None,
    domain: str = "",
    doc: str = "",
    kernel_out: KernelOutFn | None = None,
    widen_low: bool = True,
    formats: FormatRule | None = None,
) -> OpSchema:
    """An ``OpSchema`` from the compact port notation of ``ports``.

    With ``widen_low`` (the default, except for ops that move data without arithmetic) the
    kernel sees bfloat16 and float8 operands as float32 and its float32 outputs go back to
    that type (``low_precision``); ops that handle those types themselves (Cast, the
    quantizers) pass ``False``.
    """
    if widen_low and SHAPE_OP not in traits:
        kernel = low_precision(kernel)
        if kernel_out is not None:
            kernel_out = low_precision_out(kernel_out, kernel)
    return OpSchema(
        op=op,
        since_version=since,
        inputs=ports(inputs),
        outputs=ports(outputs),
        infer=infer,
        kernel=kernel,
        attrs={a.name: a for a in attrs},
        domain=domain,
        unit=unit,
        traits=frozenset(traits),
        flops=flops,
        fold_types=fold_types,
        doc=doc,
        unit_of=unit_of,
        kernel_out=kernel_out,
        formats=formats,
    )


def is_low_float(dtype: np.dtype) -> bool:
    """Whether ``dtype`` is one of ``LOW_FLOATS`` (bfloat16, float8...). Those are ml_dtypes'
    user-defined types (``num >= 256``), so NumPy's own types skip the name lookup, which
    costs a microsecond and runs for every operand of every step."""
    return dtype.num >= 256 and dtype.name in LOW_FLOATS


def low_precision(kernel: KernelFn) -> KernelFn:
    """``kernel`` run in float32 on bfloat16/float8 operands, its float32 outputs rounded back
    to the operands' type (one rounding per op, as NPUs and onnxruntime compute them)."""

    def run(inputs: Arrays, call: Call) -> Sequence[np.ndarray]:
        low = next((x.dtype for x in inputs if x is not None and is_low_float(x.dtype)),
                   None)
        if low is None:
            return kernel(inputs, call)
        wide = [x.astype(np.float32) if x is not None and x.dtype == low else x
                for x in inputs]
        return [y.astype(low) if y.dtype == np.float32 else y for y in kernel(wide, call)]

    return run


def low_precision_out(kernel_out: KernelOutFn, kernel: KernelFn) -> KernelOutFn:
    """``kernel_out``, except that bfloat16/float8 operands or outputs go through ``kernel``
    (the widened one) and are copied into ``outs``."""

    def run(inputs: Arrays, call: Call, outs: Sequence[np.ndarray]) -> None:
        if not any(x is not None and is_low_float(x.dtype) for x in (*inputs, *outs)):
            kernel_out(inputs, call, outs)
            return
        for out, y in zip(outs, kernel(inputs, call), strict=False):
            out[...] = y

    return run


def copied_out(kernel: KernelFn) -> KernelOutFn:
    """A ``kernel_out`` that runs ``kernel`` and copies its outputs into ``outs``: for an op
    whose format rule's ``direct`` kernel computes into the arena (``layout.wrap_kernel_out``
    tries it first) while its plain kernel has no ``out`` form."""

    def run(inputs: Arrays, call: Call, outs: Sequence[np.ndarray]) -> None:
        for out, y in zip(outs, kernel(inputs, call), strict=False):
            np.copyto(out, y)

    return run


def widen(x: np.ndarray) -> np.ndarray:
    """float16 promoted to float32 for transcendental math (cast back by the caller)."""
    return x.astype(np.float32) if x.dtype == np.float16 else x


def unary(
    op: str,
    since: int,
    fn: Callable[..., np.ndarray],
    *,
    attrs: Sequence[AttrSpec] = (),
    doc: str = "",
    flops_per_elem: int = 1,
    dtypes: frozenset[str] | None = None,
    out_dtype: str | None = None,
    into: Callable[..., object] | None = None,
) -> OpSchema:
    """An elementwise unary op; ``fn(x, **attrs)`` computes it (float16 math runs in float32).

    ``dtypes`` restricts the accepted operand types; ``out_dtype`` fixes the result type
    (``"bool"`` for IsNaN), otherwise the result has the operand's dtype. ``into(x, out,
    **attrs)`` computes it into ``out`` (which may be ``x``) for the ``kernel_out``; a
    one-operand ufunc ``fn`` is its own ``into``.
    """

    def infer(types: Types, _c: object, call: Call) -> list[TensorType]:
        x = need(at(types, 0), op)
        if dtypes is not None and x.dtype not in dtypes:
            raise ShapeError(f"{op} does not take {x.dtype}")
        return [TensorType(out_dtype or x.dtype, x.shape)]

    def kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
        x = need(at(inputs, 0), op)
        with np.errstate(all="ignore"):
            y = np.asarray(fn(widen(x), **call.attrs))
        return [y.astype(out_dtype or x.dtype, copy=False)]

    if into is None and isinstance(fn, np.ufunc) and fn.nin == 1:
        into = fn
    traits = {ELEMENTWISE} | ({INPLACE} if out_dtype is None else set())
    return schema(op, since, "X", "Y", infer, kernel, attrs=attrs, traits=traits,
                  flops=out_elems(flops_per_elem), doc=doc,
                  kernel_out=elementwise_out(op, kernel, into))


def binary(
    op: str,
    since: int,
    fn: Callable[[np.ndarray, np.ndarray], np.ndarray],
    *,
    commutative: bool = False,
    out_dtype: str | None = None,
    dtypes: frozenset[str] | None = None,
    attrs: Sequence[AttrSpec] = (),
    doc: str = "",
    into: Callable[..., object] | None = None,
) -> OpSchema:
    """An elementwise binary op with multidirectional broadcasting.

    ``out_dtype`` fixes the result type (``"bool"`` for comparisons); otherwise the result
    has the operands' common dtype. ``fn`` receives the node's attributes as keywords when
    the op declares any. ``into(a, b, out, **attrs)`` computes it into ``out`` (which may
    be ``a`` or ``b``); a two-operand ufunc ``fn`` is its own ``into``.
    """

    def infer(types: Types, _c: object, call: Call) -> list[TensorType]:
        a, b = need(at(types, 0), op, "A"), need(at(types, 1), op, "B")
        dtype = same_dtype([a, b], op)
        if dtypes is not None and dtype not in dtypes:
            raise ShapeError(f"{op} does not take {dtype}")
        return [TensorType(out_dtype or dtype, broadcast(a.shape, b.shape))]

    def kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
        a, b = need(at(inputs, 0), op, "A"), need(at(inputs, 1), op, "B")
        try:
            with np.errstate(all="ignore"):
                y = fn(a, b, **call.attrs) if attrs else fn(a, b)
        except ValueError as e:
            raise KernelError(f"{op}: {e}") from None
        return [np.asarray(y).astype(out_dtype or a.dtype, copy=False)]

    traits = {ELEMENTWISE}
    if commutative:
        traits.add(COMMUTATIVE)
    if out_dtype is None:
        traits.add(INPLACE)
    if into is None and isinstance(fn, np.ufunc) and fn.nin == 2:
        into = fn
    return schema(op, since, "A B", "C", infer, kernel, attrs=attrs, traits=traits,
                  flops=out_elems(1), doc=doc, kernel_out=elementwise_out(op, kernel, into))


def elementwise_out(op: str, kernel: KernelFn, into: Callable[..., object] | None
                    ) -> KernelOutFn | None:
    """The ``kernel_out`` of an elementwise op (``None`` without an ``into``):
    ``into(*operands, out, **attrs)`` straight into the output (a ufunc ``into`` is called
    as ``into(*operands, out=out)``; NumPy's ufuncs are safe when ``out`` is one of the
    operands), except for float16 or mixed operand dtypes, whose ``kernel`` result
    (computed in float32, cast once) is copied in. Either way the operands must broadcast
    to exactly the output's shape: a ufunc would silently broadcast them to a larger
    ``out`` (checked by NumPy once per call and operand shapes). Written lean: it runs
    after every GEMM's bias, when the interpreter's working set is cold."""
    if into is None:
        return None
    ufunc = into if isinstance(into, np.ufunc) else None

    def kernel_out(inputs: Arrays, call: Call, outs: Sequence[np.ndarray]) -> None:
        xs = [x for x in inputs if x is not None]
        out = outs[0]
        for x in xs:
            if x.shape != out.shape:  # else they are all the output's shape
                _check_broadcast(op, call, xs, out)
                break
        first = xs[0].dtype
        mixed = first == F16
        for x in xs:
            mixed = mixed or x.dtype != first
        if mixed:
            fill(outs, kernel(inputs, call), op)
        elif ufunc is not None:  # under the runtime's errstate (``OpSchema``)
            ufunc(*xs, out=out)
        else:
            into(*xs, out, **call.attrs)

    return kernel_out


def with_step(unary_schema: OpSchema, fn: Callable[[np.ndarray, np.ndarray, object], object],
              dtypes: frozenset[str]) -> OpSchema:
    """A unary elementwise op whose ``kernel_out`` calls ``fn(x, out, call)`` when X and the
    output have one of ``dtypes`` and the same shape (else its own ``kernel_out``): the
    kernel gets the step's ``Call``, kept across runs, for ``_jit``'s loops."""
    generic = unary_schema.kernel_out
    assert generic is not None

    def kernel_out(inputs: Arrays, call: Call, outs: Sequence[np.ndarray]) -> None:
        x, out = inputs[0], outs[0]
        if (x is not None and x.dtype == out.dtype and x.dtype.name in dtypes
                and x.shape == out.shape):
            fn(x, out, call)
        else:
            generic(inputs, call, outs)

    return dataclasses.replace(unary_schema, kernel_out=kernel_out)


def _check_broadcast(op: str, call: Call, xs: Sequence[np.ndarray], out: np.ndarray) -> None:
    """The operands ``xs`` broadcast to exactly ``out``'s shape (kept per call and shapes)."""
    shapes = (out.shape, *(x.shape for x in xs))
    shape = _BROADCASTS.get(call, shapes, lambda: _broadcast(op, shapes[1:]))
    if shape != out.shape:
        raise KernelError(f"the operands give {out.dtype.name}{list(shape)}, the output is "
                          f"{out.dtype.name}{list(out.shape)}")


def _broadcast(op: str, shapes: Sequence[tuple[int, ...]]) -> tuple[int, ...]:
    try:
        return np.broadcast_shapes(*shapes)
    except ValueError as e:
        raise KernelError(f"{op}: {e}") from None


def fill(outs: Sequence[np.ndarray], values: Sequence[np.ndarray], op: str) -> None:
    """A ``kernel_out`` made of a kernel's results: each copied into its output, which must
    have the result's shape (never broadcast into a larger one)."""
    for out, value in zip(outs, values, strict=False):
        if np.shape(value) != out.shape:
            raise KernelError(f"kernel gave {out.dtype.name}{list(np.shape(value))}, the "
                              f"output is {out.dtype.name}{list(out.shape)}")
        np.copyto(out, value, casting="unsafe")


# ----------------------------------------------------------------------------- attributes


def iattr(call: Call, name: str, default: int = 0) -> int:
    value = call.attrs.get(name)
    return default if value is None else int(value)  # type: ignore[arg-type]


def fattr(call: Call, name: str, default: float = 0.0) -> float:
    value = call.attrs.get(name)
    return default if value is None else float(value)  # type: ignore[arg-type]


def sattr(call: Call, name: str, default: str = "") -> str:
    value = call.attrs.get(name)
    return default if value is None else str(value)


def lattr(call: Call, name: str) -> list[int] | None:
    """An ``ints`` attribute as a list, ``None`` when absent."""
    value = call.attrs.get(name)
    return None if value is None else ints(value)


class PerOwner(Generic[T]):
    """Values worked out once per owner object and key (a kernel's geometry per runtime
    step: the executor hands a step the same ``Call`` and attribute mapping every run).

    Keyed by ``id(owner)`` and checked by identity and ``key``: the entry holds the owner, so
    its id cannot be reused while the entry lives. Bounded: cleared when ``size`` entries
    are held. A race between threads at worst computes a value twice."""

    def __init__(self, size: int = 4096) -> None:
        self.size = size
        self._held: dict[int, tuple[object, object, T]] = {}

    def get(self, owner: object, key: object, make: Callable[[], T]) -> T:
        hit = self._held.get(id(owner))
        if hit is not None and hit[0] is owner and hit[1] == key:
            return hit[2]
        value = make()
        if len(self._held) >= self.size:
            self._held.clear()
        self._held[id(owner)] = (owner, key, value)
        return value


# an elementwise call's broadcast shape per (output, operand) shapes: a runtime step keeps
# its Call, so NumPy works it out once per step (right after a GEMM has evicted the
# interpreter's working set, ``np.broadcast_shapes`` took longer than the add)
_BROADCASTS: PerOwner[tuple[int, ...]] = PerOwner()

_SCRATCH = threading.local()  # .bufs: slot -> this thread's reusable byte buffer


def scratch(shape: Sequence[int], dtype: np.dtype | type, slot: int = 0) -> np.ndarray:
    """A work array of ``shape`` (uninitialised, 64-byte aligned) from this thread's reusable
    buffer for ``slot``.

    Kernels use it for temporaries they fill and drop before returning (im2col patches), so
    the buffer's pages are touched once per thread instead of being mapped anew per call.
    The array is valid until the next ``scratch`` call for the same slot on the same thread:
    a kernel that needs two temporaries alive at once takes them from two slots.
    """
    dt = np.dtype(dtype)
    nbytes = prod(shape) * dt.itemsize
    bufs: dict[int, np.ndarray] = _SCRATCH.__dict__.setdefault("bufs", {})
    buf = bufs.get(slot)
    if buf is None or buf.nbytes < nbytes + 64:
        buf = bufs[slot] = np.empty(max(nbytes, 1 << 20) + 64, np.uint8)
    start = -buf.ctypes.data % 64
    return buf[start:start + nbytes].view(dt).reshape(tuple(shape))
