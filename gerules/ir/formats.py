"""Data formats: how a tensor's elements lie in memory, as GE lays them out for the cube unit.

A tensor type holds its *logical* shape (the dims the model means, ONNX's order) and its
format; the *physical* shape (what memory holds, padding included) follows from the shape,
the element type and the format (``physical_shape``). ``to_format`` and ``from_format`` are
the exact conversions (GE's TransData): pad, reshape, transpose, and back.

Formats (GE's names; ``C0`` is the cube block, 16 elements, 32 for one-byte types: ``c0``):

- ``ND``: plain row-major over the logical dims; a 4-D plain tensor is named ``NCHW``
  (``name``): an activation [N, C, H, W] or a conv weight [Cout, Cin, KH, KW]. One layout,
  two names; a type stores ``ND``.
- ``NHWC``: a 4-D [N, C, H, W] held channel-last, physical [N, H, W, C].
- ``NC1HWC0``: [N, C, H, W] as [N, C1, H, W, C0], C1 = ceil(C / C0); channel c sits at
  (c // C0, c % C0).
- ``NC1HWC0_C04``: the same with C0 = 4, for C <= 4: the small-channel input of a first
  convolution (atc's ``--enable_small_channel``).
- ``FRACTAL_Z``: a conv weight [N, C, H, W] as [C1 * H * W, N1, 16, C0], N1 = ceil(N / 16):
  element (n, c, h, w) at ((c // C0) * H * W + h * W + w, n // 16, n % 16, c % C0).
- ``FRACTAL_Z_C04``: a weight with C <= 4: C padded to 4, the (h, w, c) reduction axis
  (c fastest) padded to Z1 * C0 and cut in C0 blocks: [Z1, N1, C0, C0], Z1 = ceil(4HW / C0),
  N1 = ceil(N / C0).
- ``FRACTAL_NZ``: a matrix [..., M, K] as [..., K1, M1, 16, C0], K1 = ceil(K / C0), M1 =
  ceil(M / 16): element (m, k) at (k // C0, m // 16, m % 16, k % C0); leading dims stay.

Invariants:
- ``from_format(to_format(x, f), f, shape) == x`` exactly for every format and dtype; the
  padding ``to_format`` adds is zeros.
- Padding is never a value: every reader of a padded format either drops it (``from_format``)
  or keeps it in padding (elementwise ops map each position to itself). So padding may hold
  anything after an elementwise op, and results never depend on it.
- Blocked dims (the channel of the 5-D formats, every dim of the weight fractals, the last
  two of FRACTAL_NZ) must be known numbers; other dims may be symbols (``can_hold``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..errors import ShapeError
from .dtypes import itemsize

Dim = int | str
Shape = tuple[Dim, ...]

ND = "ND"
NCHW = "NCHW"  # the name of a 4-D ND tensor; never stored in a type
NHWC = "NHWC"
NC1HWC0 = "NC1HWC0"
NC1HWC0_C04 = "NC1HWC0_C04"
FRACTAL_Z = "FRACTAL_Z"
FRACTAL_Z_C04 = "FRACTAL_Z_C04"
FRACTAL_NZ = "FRACTAL_NZ"

FORMATS = (ND, NHWC, NC1HWC0, NC1HWC0_C04, FRACTAL_Z, FRACTAL_Z_C04, FRACTAL_NZ)
NAMES = (ND, NCHW, *FORMATS[1:])  # what attributes and reports may spell
FOUR_D = frozenset({NHWC, NC1HWC0, NC1HWC0_C04, FRACTAL_Z, FRACTAL_Z_C04})
# formats whose physical shape pads: the cube's native ones
PADDED = frozenset({NC1HWC0, NC1HWC0_C04, FRACTAL_Z, FRACTAL_Z_C04, FRACTAL_NZ})
FRACTAL = 16  # rows of a cube fractal (Ni, H0)
SMALL_C0 = 4


def c0(dtype: str) -> int:
    """GE's cube block for ``dtype``: 32 for one-byte types, 16 otherwise."""
    return 32 if itemsize(dtype) == 1 else 16


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def stored(name: str, rank: int | None) -> str:
    """The format a type stores for a spelled name (``NCHW`` is the 4-D ``ND``); raises
    ``ShapeError`` for an unknown name or a name that does not fit ``rank``."""
    if name == NCHW:
        if rank is not None and rank != 4:
            raise ShapeError(f"format NCHW needs a 4-D tensor, got rank {rank}")
        return ND
    if name not in FORMATS:
        raise ShapeError(f"unknown format '{name}' (formats: {', '.join(NAMES)})")
    return name


def name(fmt: str, rank: int | None) -> str:
    """The name of a stored format for a tensor of ``rank``: ``NCHW`` for a 4-D ``ND``."""
    return NCHW if fmt == ND and rank == 4 else fmt


def is_plain(fmt: str) -> bool:
    return fmt == ND


def blocked_dims(fmt: str, rank: int) -> tuple[int, ...]:
    """The logical axes a format pads or merges (they must be static; broadcasting an
    elementwise operand along them would read padding)."""
    if fmt in (NC1HWC0, NC1HWC0_C04):
        return (1,)
    if fmt in (FRACTAL_Z, FRACTAL_Z_C04):
        return tuple(range(rank))
    if fmt == FRACTAL_NZ:
        return (rank - 2, rank - 1)
    return ()


def can_hold(fmt: str, shape: Shape | None) -> str | None:
    """Why a tensor of ``shape`` cannot be held in ``fmt`` (``None`` when it can)."""
    if fmt == ND:
        return None
    if shape is None:
        return f"format {fmt} needs a known rank"
    rank = len(shape)
    if fmt in FOUR_D and rank != 4:
        return f"format {fmt} needs a 4-D tensor, got rank {rank}"
    if fmt == FRACTAL_NZ and rank < 2:
        return f"format {fmt} needs a matrix (rank 2 or more), got rank {rank}"
    for axis in blocked_dims(fmt, rank):
        if not isinstance(shape[axis], int):
            return f"format {fmt} needs dim {axis} to be a number, got '{shape[axis]}'"
    if fmt in (NC1HWC0_C04, FRACTAL_Z_C04) and int(shape[1]) > SMALL_C0:
        return f"format {fmt} takes at most {SMALL_C0} channels, got {shape[1]}"
    return None


def check_hold(fmt: str, shape: Shape | None) -> None:
    why = can_hold(fmt, shape)
    if why is not None:
        raise ShapeError(why)


def physical_shape(shape: Shape, dtype: str, fmt: str) -> Shape:
    """The dims memory holds for a tensor of logical ``shape`` in ``fmt`` (padding included).
    Symbolic dims stay symbols where they are not blocked (``can_hold`` says which must be
    numbers; this function raises ``ShapeError`` for a shape the format cannot hold)."""
    if fmt == ND:
        return shape
    check_hold(fmt, shape)
    k = c0(dtype)
    if fmt == NHWC:
        n, c, h, w = shape
        return (n, h, w, c)
    if fmt == NC1HWC0:
        n, c, h, w = shape
        return (n, _ceil(int(c), k), h, w, k)
    if fmt == NC1HWC0_C04:
        n, _, h, w = shape
        return (n, 1, h, w, SMALL_C0)
    if fmt == FRACTAL_Z:
        n, c, h, w = (int(d) for d in shape)
        return (_ceil(c, k) * h * w, _ceil(n, FRACTAL), FRACTAL, k)
    if fmt == FRACTAL_Z_C04:
        n, _, h, w = (int(d) for d in shape)
        return (_ceil(SMALL_C0 * h * w, k), _ceil(n, k), k, k)
    m, kk = int(shape[-2]), int(shape[-1])  # FRACTAL_NZ
    return (*shape[:-2], _ceil(kk, k), _ceil(m, FRACTAL), FRACTAL, k)


def bind(shape: Shape, dtype: str, fmt: str, physical: Sequence[int]) -> tuple[int, ...]:
    """``shape`` with its symbolic dims read off the array memory holds (``physical``): a
    symbol sits unblocked at its own place of the physical shape. Raises ``ShapeError``
    when ``physical`` is not how ``fmt`` holds such a tensor."""
    if all(isinstance(d, int) for d in shape):
        return tuple(int(d) for d in shape)
    want = physical_shape(shape, dtype, fmt)
    if len(want) != len(physical):
        raise ShapeError(f"a {fmt} tensor of shape {list(shape)} is held in {len(want)} dims, "
                         f"got {list(physical)}")
    sizes = {d: int(p) for d, p in zip(want, physical, strict=True) if isinstance(d, str)}
    if any(isinstance(d, str) and d not in sizes for d in shape):
        raise ShapeError(f"the dims of {list(shape)} cannot be read off {list(physical)}")
    return tuple(sizes[d] if isinstance(d, str) else int(d) for d in shape)


# ----------------------------------------------------------------------------- conversions


def _pad(x: np.ndarray, sizes: Sequence[int]) -> np.ndarray:
    """``x`` zero-padded at the end of each axis to ``sizes`` (a view when nothing pads)."""
    if tuple(x.shape) == tuple(sizes):
        return x
    out = np.zeros(tuple(sizes), dtype=x.dtype)
    out[tuple(slice(0, d) for d in x.shape)] = x
    return out


def to_format(x: np.ndarray, fmt: str, out: np.ndarray | None = None) -> np.ndarray:
    """The physical array of the plain logical array ``x`` in ``fmt`` (padding zeros);
    written into ``out`` when given (it must have the physical shape and x's dtype: the
    runtime's arena), without a temporary for NC1HWC0 and NHWC."""
    if out is not None:
        return _into(x, fmt, out)
    if fmt == ND:
        return x
    check_hold(fmt, tuple(int(d) for d in x.shape))
    k = c0(x.dtype.name)
    if fmt == NHWC:
        return np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    if fmt in (NC1HWC0, NC1HWC0_C04):
        n, c, h, w = x.shape
        block = SMALL_C0 if fmt == NC1HWC0_C04 else k
        c1 = _ceil(c, block)
        p = _pad(x, (n, c1 * block, h, w)).reshape(n, c1, block, h, w)
        return np.ascontiguousarray(p.transpose(0, 1, 3, 4, 2))
    if fmt == FRACTAL_Z:
        n, c, h, w = x.shape
        n1, c1 = _ceil(n, FRACTAL), _ceil(c, k)
        p = _pad(x, (n1 * FRACTAL, c1 * k, h, w)).reshape(n1, FRACTAL, c1, k, h, w)
        return np.ascontiguousarray(p.transpose(2, 4, 5, 0, 1, 3)).reshape(
            c1 * h * w, n1, FRACTAL, k)
    if fmt == FRACTAL_Z_C04:
        n, c, h, w = x.shape
        n1, z1 = _ceil(n, k), _ceil(SMALL_C0 * h * w, k)
        rows = _pad(x, (n1 * k, SMALL_C0, h, w)).transpose(0, 2, 3, 1).reshape(n1 * k, -1)
        p = _pad(rows, (n1 * k, z1 * k)).reshape(n1, k, z1, k)
        return np.ascontiguousarray(p.transpose(2, 0, 1, 3))
    lead = x.shape[:-2]  # FRACTAL_NZ
    m, kk = x.shape[-2:]
    m1, k1 = _ceil(m, FRACTAL), _ceil(kk, k)
    p = _pad(x, (*lead, m1 * FRACTAL, k1 * k)).reshape(*lead, m1, FRACTAL, k1, k)
    r = len(lead)
    return np.ascontiguousarray(p.transpose(*range(r), r + 2, r, r + 1, r + 3))


LANE_COPIES = 16  # up to this many channels, NC1HWC0 is written one channel plane at a time


def _into(x: np.ndarray, fmt: str, out: np.ndarray) -> np.ndarray:
    """``to_format(x, fmt)`` written into ``out`` (see ``to_format``)."""
    if fmt in (NC1HWC0, NC1HWC0_C04) and x.ndim == 4:
        n, c, h, w = x.shape
        block = out.shape[-1]
        full, rest = divmod(c, block)
        if tuple(out.shape) != (n, full + (rest > 0), h, w, block):
            raise ShapeError(f"a {fmt} tensor of shape {list(x.shape)} cannot be written "
                             f"into {list(out.shape)}")
        blocks = out.transpose(0, 1, 4, 2, 3)  # a view: [N, C1, C0, H, W]
        if c <= LANE_COPIES:  # an image's few channels: one plane per lane (NumPy's loop
            for k in range(c):  # would step lane by lane, across whole planes, otherwise)
                np.copyto(blocks[:, k // block, k % block], x[:, k])
        else:
            np.copyto(blocks[:, :full], x[:, :full * block].reshape(n, full, block, h, w))
            if rest:
                np.copyto(blocks[:, full, :rest], x[:, full * block:])
        if rest:
            blocks[:, full, rest:] = 0
        return out
    if fmt == NHWC and x.ndim == 4 and tuple(out.shape) == (x.shape[0], *x.shape[2:],
                                                             x.shape[1]):
        np.copyto(out, x.transpose(0, 2, 3, 1))
        return out
    if fmt == FRACTAL_NZ and x.ndim >= 2 and out.flags.c_contiguous:
        return _nz_into(x, out)
    np.copyto(out, to_format(x, fmt))
    return out


def _nz_into(x: np.ndarray, out: np.ndarray) -> np.ndarray:
    """``to_format(x, FRACTAL_NZ)`` written into the contiguous ``out``: whole C0-element
    rows are moved (no temporary), the padding lanes zeroed."""
    r = x.ndim - 2
    m, kk = x.shape[-2:]
    k1, m1, frac, block = out.shape[r:] if out.ndim == r + 4 else (0, 0, 0, 0)
    if (out.ndim != r + 4 or tuple(out.shape[:r]) != tuple(x.shape[:r])
            or k1 != _ceil(kk, block) or m1 * frac < m or m1 != _ceil(m, frac)):
        raise ShapeError(f"a FRACTAL_NZ tensor of shape {list(x.shape)} cannot be written "
                         f"into {list(out.shape)}")
    rows = np.moveaxis(out.reshape(*x.shape[:r], k1, m1 * frac, block), r, r + 1)
    full, rest = divmod(kk, block)  # rows: a view [..., M1*16, K1, C0]
    np.copyto(rows[..., :m, :full, :], x[..., :full * block].reshape(*x.shape[:r], m, full,
                                                                      block))
    if rest:
        rows[..., :m, full, :rest] = x[..., full * block:]
        rows[..., :m, full, rest:] = 0
    rows[..., m:, :, :] = 0
    return out


def nz_plain_into(p: np.ndarray, shape: Sequence[int], buf: np.ndarray) -> np.ndarray:
    """``from_format(p, FRACTAL_NZ, shape)`` copied into ``buf`` (of the plain ``shape``,
    contiguous) by whole C0-element rows; returns ``buf``."""
    r = p.ndim - 4
    k1, m1, frac, block = p.shape[r:]
    m, kk = shape[-2:]
    if kk != k1 * block or not p.flags.c_contiguous:
        np.copyto(buf, from_format(p, FRACTAL_NZ, tuple(shape)))
        return buf
    rows = np.moveaxis(p.reshape(*p.shape[:r], k1, m1 * frac, block), r, r + 1)
    np.copyto(buf.reshape(*buf.shape[:-1], k1, block), rows[..., :m, :, :])
    return buf


def from_format(p: np.ndarray, fmt: str, shape: Shape) -> np.ndarray:
    """The plain logical array of ``shape`` held by the physical array ``p`` in ``fmt``
    (padding dropped). Raises ``ShapeError`` when ``p`` is not that physical shape."""
    if fmt == ND:
        return p
    dims = tuple(int(d) for d in shape)
    want = physical_shape(dims, p.dtype.name, fmt)
    if tuple(p.shape) != want:
        raise ShapeError(f"a {fmt} tensor of shape {list(dims)} is held as {list(want)}, "
                         f"got {list(p.shape)}")
    k = c0(p.dtype.name)
    if fmt == NHWC:
        return p.transpose(0, 3, 1, 2)
    if fmt in (NC1HWC0, NC1HWC0_C04):
        n, c, h, w = dims
        c1, block = p.shape[1], p.shape[4]
        return p.transpose(0, 1, 4, 2, 3).reshape(n, c1 * block, h, w)[:, :c]
    if fmt == FRACTAL_Z:
        n, c, h, w = dims
        c1, n1 = _ceil(c, k), p.shape[1]
        q = p.reshape(c1, h, w, n1, FRACTAL, k).transpose(3, 4, 0, 5, 1, 2)
        return q.reshape(n1 * FRACTAL, c1 * k, h, w)[:n, :c]
    if fmt == FRACTAL_Z_C04:
        n, c, h, w = dims
        z1, n1 = p.shape[0], p.shape[1]
        rows = p.transpose(1, 2, 0, 3).reshape(n1 * k, z1 * k)[:n, :SMALL_C0 * h * w]
        return rows.reshape(n, h, w, SMALL_C0).transpose(0, 3, 1, 2)[:, :c]
    m, kk = dims[-2:]  # FRACTAL_NZ
    r = len(dims) - 2
    k1, m1 = p.shape[r], p.shape[r + 1]
    q = p.transpose(*range(r), r + 1, r + 2, r, r + 3).reshape(*dims[:-2], m1 * FRACTAL,
                                                                k1 * k)
    return q[..., :m, :kk]


def transfer(p: np.ndarray, src: str, dst: str, shape: Shape) -> np.ndarray:
    """``p`` (a tensor of logical ``shape`` held in ``src``) held in ``dst``: GE's TransData.
    The result never shares memory with ``p`` unless both formats are ``ND``."""
    if src == dst:
        return p
    return np.ascontiguousarray(to_format(np.ascontiguousarray(from_format(p, src, shape)), dst))


def zero_lanes(p: np.ndarray, c: int) -> None:
    """The padding lanes of the NC1HWC0 array ``p`` (channels C.. of its last block, in
    place) set to zero: what a kernel computing on the blocks leaves there is not a value."""
    rest = c % p.shape[-1]
    if rest:
        p[:, -1, ..., rest:] = 0


def padding_bytes(shape: Shape, dtype: str, fmt: str) -> int:
    """Bytes ``fmt`` adds to a static tensor of ``shape`` (0 for plain formats)."""
    if fmt not in PADDED:
        return 0
    phys = physical_shape(shape, dtype, fmt)
    return (_numel(phys) - _numel(shape)) * itemsize(dtype)


def _numel(shape: Shape) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n
