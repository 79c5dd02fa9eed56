"""Which formats an op takes and gives: the format rules of the op registry.

Every ``OpSchema`` has a format rule (``OpSchema.formats``; ``ir.formats`` defines the
formats). The registry wraps the op's inference with it, so every caller of ``infer`` (graph
inference, the e-graph's shape analysis, rule checking) sees the same decision:

- ``PLAIN`` (the default): every operand plain (``ND``/``NCHW``), outputs plain. Reshape,
  Transpose, Softmax, Concat and every op that reads positions take only plain tensors.
- ``ELEMENTWISE`` (the default of ops with the elementwise trait): the operands share one
  format, which the outputs get. An operand in a blocked format must have the output's rank
  and its blocked dims (a 5-D activation's channel, a fractal matrix's last two dims), so
  broadcasting never reaches into padding; a plain operand must be a single number. The
  kernel needs no change: elementwise arithmetic on the physical arrays is exact, and the
  padding only ever computes into padding.
- ``native(...)``: an op that runs on blocked formats (the cube ops in NC1HWC0 / FRACTAL_Z /
  FRACTAL_NZ, pooling and reductions in NC1HWC0, LayerNorm in FRACTAL_NZ): per input port
  the formats it takes, and which input's format the outputs follow. Its kernel is wrapped
  to convert the formatted operands to plain arrays (``formats.from_format``, padding
  dropped), run the plain kernel and convert the outputs back: exact by construction, so a
  native form is right whatever the layout (the NumPy kernels convert inside; an NPU
  computes on the blocks directly, and the cost model prices it so).
- ``TRANSFER``: TransData alone changes formats (its kernel converts itself).

Kernels of native ops read the logical types of their operands from ``Call.types`` (the
runtime, the executor, graph inference and the e-graph's folding pass them); a call without
types means every operand is plain. A read-only operand (a weight) is converted once and its
plain form kept while it lives (``kept``: any form derived from a weight, up to ``KEPT``
bytes in all). A rule's ``direct`` kernel, when it takes the call, computes on the blocked
operands without these conversions (``ge.FusedConv``: ``ops/conv_blocked.py``; MaxPool,
GlobalAveragePool: ``ops/pool_blocked.py``). In the runtime's arena (``kernel_out``) an
NC1HWC0 activation is converted into a buffer this thread keeps for its input port, the
plain kernel writes into buffers kept per output, and the result is written into the arena
in its format directly: the conversions copy, but touch no fresh memory per call (each
buffer holds the largest tensor it served on the thread).
"""

from __future__ import annotations

import dataclasses
import threading
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from ..errors import ShapeError
from . import formats as F
from .graph import TensorType
from .weights import aligned

if TYPE_CHECKING:
    from .registry import Call, InferFn, KernelFn, KernelOutFn

Types = Sequence["TensorType | None"]
# a kernel that computes on the formatted operands themselves: (inputs, call, outs) with
# ``outs`` the arena views to write (empty: allocate); the outputs, or None to decline
DirectFn = Callable[[Sequence["np.ndarray | None"], "Call", Sequence[np.ndarray]],
                    "Sequence[np.ndarray] | None"]
Kind = Literal["plain", "elementwise", "native", "transfer"]


@dataclass(frozen=True, slots=True)
class FormatRule:
    """What formats an op's operands may be in and which format its outputs take.

    ``ports[i]`` are the blocked formats input ``i`` takes besides plain (the last entry
    repeats for later inputs); ``follow`` is the input whose format the outputs take
    (``out`` maps it when the output's format differs, ``NC1HWC0_C04`` giving ``NC1HWC0``);
    ``when`` may refuse a blocked form for reasons of attributes (a pooling's padding, a
    reduction's axes): it returns why, or ``None``. ``direct`` computes on the blocked
    operands without converting them (its outputs equal the converting path's up to float
    rounding, padding lanes zero); the wrappers try it first on formatted calls, and the
    conversions run when it declines (returns ``None``) a call it does not handle.
    """

    kind: Kind
    ports: tuple[frozenset[str], ...] = ()
    follow: int = 0
    out: tuple[tuple[str, str], ...] = ()
    when: Callable[[Types, Call], str | None] | None = None
    direct: DirectFn | None = None

    @property
    def converts(self) -> bool:
        """True when the kernel must see plain arrays (native ops)."""
        return self.kind == "native"

    def takes(self, index: int) -> frozenset[str]:
        if not self.ports:
            return frozenset()
        return self.ports[min(index, len(self.ports) - 1)]

    def output_formats(self, types: Types, outs: Sequence[TensorType], call: Call
                       ) -> tuple[str, ...]:
        """The format of every output, or ``ShapeError`` when the operands' formats are not
        accepted."""
        if self.kind == "plain":
            return _plain(types, outs, call)
        if self.kind == "elementwise":
            return _elementwise(types, outs)
        if self.kind == "transfer":
            return tuple(t.format for t in outs)  # TransData's inference decides
        return self._native(types, outs, call)

    def _native(self, types: Types, outs: Sequence[TensorType], call: Call) -> tuple[str, ...]:
        for i, t in enumerate(types):
            if t is not None and t.format != F.ND and t.format not in self.takes(i):
                raise ShapeError(f"input {i} in format {t.format} is not taken here "
                                 f"(takes plain{_list(self.takes(i))})")
        lead = types[self.follow] if self.follow < len(types) else None
        fmt = F.ND if lead is None else lead.format
        if fmt != F.ND and self.when is not None:
            why = self.when(types, call)
            if why:
                raise ShapeError(why)
        fmt = dict(self.out).get(fmt, fmt)
        for t in outs:
            F.check_hold(fmt, t.shape)
        return tuple(fmt for _ in outs)


def _list(fmts: frozenset[str]) -> str:
    return "".join(f", {f}" for f in sorted(fmts))


def _plain(types: Types, outs: Sequence[TensorType], call: Call) -> tuple[str, ...]:
    for i, t in enumerate(types):
        if t is not None and t.format != F.ND:
            raise ShapeError(f"takes plain (ND/NCHW) tensors; input {i} is in format "
                             f"{t.format} (a TransData to {F.name(F.ND, t.rank)} first)")
    return tuple(F.ND for _ in outs)


def _elementwise(types: Types, outs: Sequence[TensorType]) -> tuple[str, ...]:
    fmts = {t.format for t in types if t is not None and t.format != F.ND}
    if not fmts:
        return tuple(F.ND for _ in outs)
    if len(fmts) > 1:
        raise ShapeError(f"operands in different formats {sorted(fmts)}")
    fmt = fmts.pop()
    out = outs[0].shape if outs else None
    for i, t in enumerate(types):
        if t is None:
            continue
        if t.format == F.ND:
            if t.numel() != 1:
                raise ShapeError(f"input {i} is plain {t} beside a {fmt} operand: only a "
                                 "single number broadcasts into a blocked format")
            continue
        if out is None or t.shape is None or len(t.shape) != len(out):
            raise ShapeError(f"input {i} {t} must have the output's rank in format {fmt}")
        for axis in F.blocked_dims(fmt, len(out)):
            if t.shape[axis] != out[axis]:
                raise ShapeError(f"input {i} {t} broadcasts along dim {axis}, which format "
                                 f"{fmt} blocks")
    block = {F.c0(t.dtype) for t in types if t is not None and t.format == fmt}
    for t in outs:
        F.check_hold(fmt, t.shape)
        if fmt in F.PADDED and {F.c0(t.dtype)} != block:
            raise ShapeError(f"a {t.dtype} result in format {fmt} has another block size "
                             f"than its operands (C0 {F.c0(t.dtype)}, not {sorted(block)})")
    return tuple(fmt for _ in outs)


PLAIN = FormatRule("plain")
ELEMENTWISE = FormatRule("elementwise")
TRANSFER = FormatRule("transfer")


def native(*ports: str | Sequence[str], follow: int = 0, out: dict[str, str] | None = None,
           when: Callable[[Types, Call], str | None] | None = None,
           direct: DirectFn | None = None) -> FormatRule:
    """A rule for an op that runs on blocked formats: ``ports[i]`` the formats input ``i``
    takes besides plain (a string or a list; the last repeats)."""
    sets = tuple(frozenset([p] if isinstance(p, str) else p) - {""} for p in ports)
    return FormatRule("native", sets, follow, tuple((out or {}).items()), when, direct)


def one_output(types: Types, call: Call) -> str | None:
    """A ``when`` for ops whose extra outputs (indices, statistics) stay plain."""
    return None if call.num_outputs <= 1 else "only its first output runs in a blocked format"


def last_axis(types: Types, call: Call) -> str | None:
    """A ``when`` for normalizations over the last axis only (FRACTAL_NZ keeps rows apart)."""
    x = types[0] if types else None
    axis = int(call.attrs.get("axis", -1) or 0)  # type: ignore[arg-type]
    rank = x.rank if x is not None else None
    if rank is None or axis not in (-1, rank - 1):
        return "normalizes over more than the last axis"
    return one_output(types, call)


# The shared rules of the shipped ops.
CONV = native((F.NC1HWC0, F.NC1HWC0_C04), (F.FRACTAL_Z, F.FRACTAL_Z_C04), "", F.NC1HWC0,
              out={F.NC1HWC0_C04: F.NC1HWC0})
MATMUL = native(F.FRACTAL_NZ)
POOL = native(F.NC1HWC0, when=one_output)
NORM_LAST = native(F.FRACTAL_NZ, F.FRACTAL_NZ, "", when=last_axis)


# ----------------------------------------------------------------------------- wrappers


def wrap_infer(infer: InferFn, rule: FormatRule) -> InferFn:
    """``infer`` with the rule applied: operands checked, outputs given their formats."""

    def run(types: Types, consts: Sequence[np.ndarray | None], call: Call
            ) -> Sequence[TensorType]:
        outs = list(infer(types, consts, call))
        if rule.kind != "transfer" and all(t is None or t.format == F.ND for t in types) and all(
                t.format == F.ND for t in outs):
            return outs  # the common case: all plain, nothing to decide
        fmts = rule.output_formats(types, outs, call)
        return [t.with_format(f) for t, f in zip(outs, fmts, strict=False)]

    run.layout_rule = rule  # type: ignore[attr-defined]
    return run


def _formatted(call: Call) -> bool:
    return any(t is not None and t.format != F.ND for t in call.types)


def plain_inputs(inputs: Sequence[np.ndarray | None], call: Call, buffered: bool = False
                 ) -> list[np.ndarray | None]:
    """The operands as plain logical arrays (formatted ones converted, padding dropped;
    a read-only one, a weight, converted once and kept while it lives). ``buffered``: an
    NC1HWC0 or FRACTAL_NZ activation is converted into this thread's buffer for its port (the caller
    must be done with the result, and with any output viewing it, before the next call)."""
    out: list[np.ndarray | None] = []
    for k, x in enumerate(inputs):
        t = call.types[k] if k < len(call.types) else None
        if x is None or t is None or t.format == F.ND:
            out.append(x)
        elif t.shape is None:
            raise ShapeError(f"a {t.format} operand needs a known rank, got {t}")
        elif x.flags.writeable:
            shape = F.bind(t.shape, t.dtype, t.format, x.shape)
            if buffered and t.format == F.NC1HWC0 and x.ndim == 5:
                out.append(_unblock_into(x, shape, _buffer(k, (
                    x.shape[0], x.shape[1] * x.shape[4], *x.shape[2:4]), x.dtype)))
            elif buffered and t.format == F.FRACTAL_NZ and x.ndim >= 4:
                out.append(F.nz_plain_into(x, shape, _buffer(k, shape, x.dtype)))
            else:
                out.append(F.from_format(x, t.format, shape))
        else:
            out.append(_weight(x, t))
    return out


def _unblock_into(x: np.ndarray, shape: Sequence[int], buf: np.ndarray) -> np.ndarray:
    """The plain [N, C, H, W] array of the NC1HWC0 array ``x`` written into ``buf`` (of
    [N, C1*C0, H, W]): ``formats.from_format`` without a fresh array."""
    want = F.physical_shape(tuple(shape), x.dtype.name, F.NC1HWC0)
    if tuple(x.shape) != want:
        raise ShapeError(f"a NC1HWC0 tensor of shape {list(shape)} is held as {list(want)}, "
                         f"got {list(x.shape)}")
    n, c1, h, w, c0 = x.shape
    np.copyto(buf.reshape(n, c1, c0, h, w), x.transpose(0, 1, 4, 2, 3))
    return buf[:, :int(shape[1])]


# (ids of the weights, form) -> (weak references to them, a derived array); an entry leaves
# with any of its weights. Weights are read-only and never change, so a form of them (a
# weight's plain array, a conv's GEMM-ready matrix with its bias) is computed once, for the
# first KEPT bytes of them in all (beyond, each call derives it again: bounded memory).
# These are this CPU runtime's pre-packed weights (onnxruntime pre-packs its GEMM weights
# alike): the bound covers BERT-base's 340 MB, whose every MatMul weight is FRACTAL_NZ;
# past it a model pays a conversion per call (5 ms for a 768 x 3072 weight).
_KEPT: dict[tuple[tuple[int, ...], str],
            tuple[tuple[weakref.ref[np.ndarray], ...], np.ndarray]] = {}
KEPT = 1 << 30


def kept(sources: np.ndarray | tuple[np.ndarray, ...], form: str,
         make: Callable[[], np.ndarray]) -> np.ndarray:
    """``make()``, a read-only array derived from the read-only ``sources`` (weights) and
    named ``form`` (what it is: the format it was converted from, the layout it has), kept
    while they all live and the budget allows, so it is computed once per weight."""
    xs = sources if isinstance(sources, tuple) else (sources,)
    key = (tuple(id(a) for a in xs), form)
    hit = _KEPT.get(key)
    if hit is not None and all(r() is a for r, a in zip(hit[0], xs, strict=True)):
        return hit[1]
    made = np.ascontiguousarray(make())
    if (any(a.flags.writeable for a in xs)
            or sum(e[1].nbytes for e in list(_KEPT.values())) + made.nbytes > KEPT):
        return made
    made = aligned(made)  # on a cache line: BLAS packs it faster (weights.packed)
    made.setflags(write=False)

    def forget(_: object, entries: dict[Any, Any] = _KEPT) -> None:
        entries.pop(key, None)  # (bound now: at exit the module's globals may be gone)

    try:
        refs = tuple(weakref.ref(a, forget) for a in xs)
    except TypeError:
        return made  # an array that takes no weak reference: not kept
    _KEPT[key] = (refs, made)
    return made


def _weight(x: np.ndarray, t: TensorType) -> np.ndarray:
    def plain() -> np.ndarray:
        return F.from_format(x, t.format, F.bind(t.shape or (), t.dtype, t.format, x.shape))

    return kept(x, f"plain from {t.format}", plain)


def wrap_kernel(kernel: KernelFn, rule: FormatRule) -> KernelFn:
    """A native op's kernel on formatted operands: plain arrays in, outputs converted back
    to the formats the rule gives them."""

    def run(inputs: Sequence[np.ndarray | None], call: Call) -> Sequence[np.ndarray]:
        if not _formatted(call):
            return kernel(inputs, call)
        if rule.direct is not None:
            done = rule.direct(inputs, call, ())
            if done is not None:
                return done
        outs = [np.asarray(y) for y in kernel(plain_inputs(inputs, call), call)]
        plain = [TensorType(y.dtype.name, tuple(int(d) for d in y.shape)) for y in outs]
        fmts = rule.output_formats(call.types, plain, call)
        return [y if f == F.ND else F.to_format(np.ascontiguousarray(y), f)
                for y, f in zip(outs, fmts, strict=True)]

    return run


def wrap_kernel_out(kernel_out: KernelOutFn, kernel: KernelFn, infer: InferFn,
                    rule: FormatRule) -> KernelOutFn:
    """``kernel_out`` for plain operands. Formatted ones are converted into this thread's
    reusable buffers (one per input port), the plain ``kernel_out`` writes into reusable
    output buffers (their plain shapes from the plain ``infer``), and each output is
    written into the arena in its format: no fresh pages per call. (Outputs of a shape
    that inference leaves open go through the plain ``kernel`` and are copied.)"""

    # id(call) -> (call, its plain form, plain output types, output formats): a runtime
    # step keeps its Call, so inference runs once per step (bounded: cleared when full)
    memo: dict[int, tuple[Call, Call, list[TensorType], list[str]]] = {}

    def run(inputs: Sequence[np.ndarray | None], call: Call, outs: Sequence[np.ndarray]
            ) -> None:
        if not _formatted(call):
            kernel_out(inputs, call, outs)
            return
        if rule.direct is not None and rule.direct(inputs, call, outs) is not None:
            return
        hit = memo.get(id(call))
        if hit is None or hit[0] is not call:
            plain_call = dataclasses.replace(call, types=tuple(
                None if t is None else TensorType(t.dtype, t.shape) for t in call.types))
            types = list(infer(plain_call.types, [None] * len(inputs), plain_call))
            types = types[:len(outs)]
            if len(memo) >= MEMO_CALLS:
                memo.clear()
            memo[id(call)] = hit = (call, plain_call, types,
                                    list(rule.output_formats(call.types, types, call)))
        _, plain_call, types, fmts = hit
        operands = plain_inputs(inputs, call, buffered=True)
        if all(t.is_static for t in types):
            ys = [_buffer(-1 - k, t.physical_shape or (), np.dtype(t.dtype))
                  for k, t in enumerate(types)]
            kernel_out(operands, plain_call, ys)
        else:
            ys = [np.asarray(y) for y in kernel(operands, plain_call)]
        for dst, y, f in zip(outs, ys, fmts, strict=False):
            F.to_format(y, f, out=dst)  # before the next call reuses the buffers

    return run


MEMO_CALLS = 4096
_BUFFERS = threading.local()  # .slots: input port -> a reusable byte buffer


def _buffer(port: int, shape: Sequence[Any], dtype: np.dtype) -> np.ndarray:
    """An uninitialised array of ``shape`` in this thread's buffer for input ``port`` (or
    output ``-1 - port``), valid until the next call for that port on this thread."""
    slots: dict[int, np.ndarray] = _BUFFERS.__dict__.setdefault("slots", {})
    nbytes = int(np.prod(shape)) * dtype.itemsize
    buf = slots.get(port)
    if buf is None or buf.nbytes < nbytes:
        buf = slots[port] = np.empty(max(nbytes, 1 << 16), np.uint8)
    return buf[:nbytes].view(dtype).reshape(tuple(shape))


def rule_of(infer: Any) -> FormatRule | None:
    """The rule an inference function was wrapped with (``None``: not wrapped yet)."""
    return getattr(infer, "layout_rule", None)
