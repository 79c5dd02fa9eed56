"""``ge.TransData``: one tensor from one format to another (GE's format transfer).

Invariants:
- ``TransData(x) {src_format, dst_format}`` keeps the logical value: the output has x's dtype
  and logical shape, held in ``dst_format``; ``src_format`` must be x's format as named
  (``NCHW`` for a plain 4-D tensor, ``ND`` for other plain ones) and the two must differ.
  As in GE, one side is a plain layout (ND/NCHW or NHWC): between two blocked formats a
  tensor goes through the plain one.
- The kernel is ``ir.formats.transfer`` (pad, reshape, transpose and back); the padding it
  writes is zeros and the padding it reads is dropped, so a TransData pair gives back the
  exact values. It reads x's logical shape from ``Call.types`` (a blocked source cannot be
  read without it).
- ``kernel_out`` writes the same values straight into the runtime's arena view.
- The cost model prices it as the bytes it moves on the vector unit.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...errors import KernelError, ShapeError
from .. import formats as F
from ..graph import TensorType
from ..layout import TRANSFER
from ..registry import SHAPE_OP, Call
from ._common import Arrays, Types, at, attr, need, sattr, schema


def _formats(x: TensorType, call: Call) -> tuple[str, str]:
    """The stored source and target formats; each spelled as ``formats.name`` spells it (a
    plain 4-D tensor is ``NCHW``, never ``ND``), so one transfer is one e-node."""
    src = F.stored(sattr(call, "src_format"), x.rank)
    dst = F.stored(sattr(call, "dst_format"), x.rank)
    if sattr(call, "src_format") != x.format_name:
        raise ShapeError(f"ge.TransData: src_format {sattr(call, 'src_format')} but the input "
                         f"is {x.format_name}")
    if sattr(call, "dst_format") != F.name(dst, x.rank):
        raise ShapeError(f"ge.TransData: a plain {x.rank}-D target is spelled "
                         f"{F.name(dst, x.rank)}")
    if src == dst:
        raise ShapeError(f"ge.TransData: {sattr(call, 'src_format')} and "
                         f"{sattr(call, 'dst_format')} are one layout")
    if src in F.PADDED and dst in F.PADDED:
        raise ShapeError(f"ge.TransData: no direct transfer from {src} to {dst} (GE goes "
                         f"through {F.name(F.ND, x.rank)})")
    return src, dst


def _infer(types: Types, _c: object, call: Call) -> list[TensorType]:
    x = need(at(types, 0), "ge.TransData")
    _, dst = _formats(x, call)
    F.check_hold(dst, x.shape)
    return [TensorType(x.dtype, x.shape, dst)]


def _operand(inputs: Arrays, call: Call) -> tuple[np.ndarray, str, str, tuple[int, ...]]:
    """The input, its stored format, the target format and its logical shape."""
    p = need(at(inputs, 0), "ge.TransData")
    t = at(call.types, 0)
    if t is None:
        if F.stored(sattr(call, "src_format"), p.ndim) != F.ND:
            raise KernelError("ge.TransData: the input's logical shape is unknown (no types "
                              "in the call)")
        t = TensorType(p.dtype.name, tuple(int(d) for d in p.shape))
    src, dst = _formats(t, call)
    shape = F.bind(t.shape, t.dtype, src, p.shape) if t.shape is not None else p.shape
    return p, src, dst, tuple(int(d) for d in shape)


def _kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    p, src, dst, shape = _operand(inputs, call)
    return [F.transfer(p, src, dst, shape)]


def _kernel_out(inputs: Arrays, call: Call, outs: Sequence[np.ndarray]) -> None:
    """The transfer written into the arena's ``outs[0]`` (no fresh array)."""
    p, src, dst, shape = _operand(inputs, call)
    out = outs[0]
    if src == F.FRACTAL_NZ and dst == F.ND and out.flags.c_contiguous \
            and tuple(out.shape) == shape:
        F.nz_plain_into(p, shape, out)
    else:
        F.to_format(F.from_format(p, src, shape), dst, out=out)


def _flops(ins: Types, outs: object, call: Call) -> int:
    return 0  # data movement only: priced by its bytes


SCHEMAS = [
    schema("TransData", 1, "X", "Y", _infer, _kernel, domain="ge",
           attrs=[attr("src_format", "string", required=True),
                  attr("dst_format", "string", required=True)],
           traits={SHAPE_OP}, flops=_flops, formats=TRANSFER, kernel_out=_kernel_out,
           doc="Y = X held in dst_format (GE's format transfer: pad, reshape, transpose; "
               "NCHW/ND, NHWC, NC1HWC0, NC1HWC0_C04, FRACTAL_Z, FRACTAL_Z_C04, FRACTAL_NZ)"),
]
