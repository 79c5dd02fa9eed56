"""Weights: how they are named by content, and how they stay out of memory until needed.

A weight (``Weight``) is a read-only NumPy array or a ``Deferred`` constant.

Invariants:
- Content keys: ``content_key`` is SHA-256 over dtype, shape and the bytes (read through a
  memoryview, no copy). A read-only array's key is computed once and kept beside it (a table
  keyed by the array's identity, whose entry goes when the array does), so dedupe, planning
  and the ``.om`` writer never hash a weight twice; and they hash only arrays whose
  ``fingerprint`` (dtype, shape and a few sampled elements, O(1), kept the same way) equals
  another's, so most weights are never hashed at all.
- Mapped weights: a model file is memory-mapped (``fileio.map_input``) and its weights are
  read-only views of the mapping. ``release(array)`` gives the pages under such a view back
  (``MADV_DONTNEED``: the file's pages stay in the page cache and are mapped again, with the
  same bytes, when next read), so a pass over every weight (computing folded weights,
  writing the ``.om``) holds one weight at a time, not the whole file. Any other array is
  left alone. Releasing never changes a value.
- Deferred constants: ``Deferred(dtype, shape, compute, operands, label)`` is the constant
  ``compute(*operands)``, computed only when its bytes are needed. ``materialize`` computes
  it afresh each time (nothing is kept), checks the result against the declared ``dtype``
  and ``shape`` (which its maker took from the registry's inference), and releases the mapped
  operands it read. So a folded weight is held only while something reads its values (a
  rule's guard, which drops it again) and the ``.om`` writer computes each deferred weight
  the extracted graph keeps when it writes it. ``label`` names the
  computation (op and attributes): two deferred constants with the same label and the same
  operands (``same``) are the same constant.
- Aligned copies: ``packed`` copies arrays into one new buffer, each at a multiple of
  ``CACHE_LINE`` bytes; ``aligned`` gives an array there (itself when it already is). The
  runtimes run BLAS on such copies of weights read in place from a file (or derived from
  them): BLAS packs an operand that starts off a cache line several per cent slower.
- ``np.asarray(deferred)`` materializes it (``__array__``), so code that needs values works
  on any weight; code that only needs the type reads ``dtype``, ``shape`` and ``nbytes``.
"""

from __future__ import annotations

import contextlib
import hashlib
import mmap
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Any, Union

import numpy as np
from numpy.lib.array_utils import byte_bounds

Weight = Union[np.ndarray, "Deferred"]
Fingerprint = tuple[str, tuple[int, ...], bytes]

FINGERPRINT_SAMPLES = 32
DEFER_BYTES = 64 << 10  # computed constants larger than this are deferred
_PAGE = mmap.PAGESIZE
_DONTNEED = getattr(mmap, "MADV_DONTNEED", None)


class Deferred:
    """A constant computed when its bytes are needed (see the module docstring)."""

    __slots__ = ("dtype", "shape", "operands", "label", "_compute", "_fingerprint",
                 "__weakref__")

    def __init__(self, dtype: np.dtype[Any] | str, shape: Sequence[int],
                 compute: Callable[..., np.ndarray], operands: Sequence[Weight | None],
                 label: str) -> None:
        self.dtype = np.dtype(dtype)
        self.shape = tuple(int(d) for d in shape)
        self.operands = tuple(operands)
        self.label = label
        self._compute = compute
        parts = [label, self.dtype.str, repr(self.shape)]
        parts += ["-" if o is None else repr(fingerprint(o)) for o in self.operands]
        self._fingerprint = hashlib.sha256("\n".join(parts).encode()).digest()

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def materialize(self) -> np.ndarray:
        """The value, computed now (a new read-only array)."""
        args = [None if o is None else materialize(o) for o in self.operands]
        out = np.asarray(self._compute(*args))
        for o in self.operands:
            if isinstance(o, np.ndarray):
                release(o)
        if out.dtype != self.dtype or out.shape != self.shape:
            raise AssertionError(f"deferred {self.label} gave {out.dtype}{list(out.shape)}, "
                                 f"declared {self.dtype}{list(self.shape)}")
        if out.flags.writeable:
            out.setflags(write=False)
        return out

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        out = self.materialize()
        return out if dtype is None else out.astype(dtype)

    def __repr__(self) -> str:
        return f"deferred<{self.label}:{self.dtype.name}{list(self.shape)}>"


def materialize(weight: Weight) -> np.ndarray:
    """An array's own self; a deferred constant's value, computed now."""
    return weight.materialize() if isinstance(weight, Deferred) else weight


def arrays(weights: Mapping[str, Weight]) -> dict[str, np.ndarray]:
    """Name -> array for running a graph: deferred weights computed now."""
    return {k: materialize(v) for k, v in weights.items()}


def same(a: Weight, b: Weight) -> bool:
    """Whether two weights hold the same value: arrays by content, deferred constants by
    their label and operands (never computed)."""
    if a is b:
        return True
    if isinstance(a, Deferred) or isinstance(b, Deferred):
        if not (isinstance(a, Deferred) and isinstance(b, Deferred)):
            return False
        return (a.label == b.label and a.dtype == b.dtype and a.shape == b.shape
                and len(a.operands) == len(b.operands)
                and all(x is y or (x is not None and y is not None and same(x, y))
                        for x, y in zip(a.operands, b.operands, strict=True)))
    return fingerprint(a) == fingerprint(b) and content_key(a) == content_key(b)


# ----------------------------------------------------------------------------- content keys

# id(weight) -> (a weak reference to it, its fingerprint, its key or None); an entry leaves
# when its weight is freed.
_KEYS: dict[int, tuple[weakref.ref[Any], Fingerprint, str | None]] = {}


def _known(weight: Weight) -> tuple[Fingerprint, str | None] | None:
    hit = _KEYS.get(id(weight))
    return (hit[1], hit[2]) if hit is not None and hit[0]() is weight else None


def _keep(weight: Weight, fp: Fingerprint, key: str | None) -> None:
    ident = id(weight)
    if ident not in _KEYS:
        ref = weakref.ref(weight, lambda _: _KEYS.pop(ident, None))
    else:
        ref = _KEYS[ident][0]
    _KEYS[ident] = (ref, fp, key)


def _kept(weight: Weight) -> bool:
    """Whether facts about ``weight`` may be kept: it cannot change (read-only)."""
    return isinstance(weight, Deferred) or not weight.flags.writeable


def content_key(weight: Weight) -> str:
    """A content address for a weight: SHA-256 over dtype, shape and bytes (a deferred
    constant's over its label and its operands' keys, never computed).

    Read-only arrays and deferred constants are hashed once: the key is kept while they live.
    A writeable array is hashed on every call, since its bytes may change.
    """
    if not _kept(weight):
        return _digest(weight)  # type: ignore[arg-type]
    known = _known(weight)
    if known is not None and known[1] is not None:
        return known[1]
    key = _deferred_key(weight) if isinstance(weight, Deferred) else _digest(weight)
    _keep(weight, known[0] if known is not None else fingerprint(weight), key)
    return key


def _digest(array: np.ndarray) -> str:
    h = hashlib.sha256()
    h.update(array.dtype.str.encode())
    h.update(repr(tuple(array.shape)).encode())
    if array.size:  # hashed in place: no copy unless the array is not contiguous
        h.update(byte_array(array).data)
        release(array)
    return h.hexdigest()


def _deferred_key(d: Deferred) -> str:
    parts = ["deferred", d.label, d.dtype.str, repr(d.shape)]
    parts += ["-" if o is None else content_key(o) for o in d.operands]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def byte_array(array: np.ndarray) -> np.ndarray:
    """``array``'s bytes as a flat uint8 array in C order, a view when it is contiguous."""
    return np.ascontiguousarray(array).reshape(-1).view(np.uint8)


def fingerprint(weight: Weight) -> Fingerprint:
    """dtype, shape and ``FINGERPRINT_SAMPLES`` evenly spaced elements (a deferred constant:
    a digest of its label and its operands' fingerprints): equal contents give equal
    fingerprints; different fingerprints mean different contents (``content_key`` decides
    between equal ones)."""
    if isinstance(weight, Deferred):
        return weight.dtype.str, weight.shape, weight._fingerprint
    if not _kept(weight):
        return _sample(weight)
    known = _known(weight)
    if known is not None:
        return known[0]
    fp = _sample(weight)
    _keep(weight, fp, None)
    release(weight)  # the sampled pages (and their neighbours the kernel mapped)
    return fp


def _sample(array: np.ndarray) -> Fingerprint:
    flat = array.reshape(-1)
    if flat.size > FINGERPRINT_SAMPLES:
        flat = flat[_sample_at(flat.size)]
    return array.dtype.str, tuple(array.shape), np.ascontiguousarray(flat).tobytes()


@lru_cache(maxsize=4096)
def _sample_at(size: int) -> np.ndarray:
    """The ``FINGERPRINT_SAMPLES`` evenly spaced positions in ``size`` elements (a model's
    weights come in few sizes)."""
    at = np.linspace(0, size - 1, FINGERPRINT_SAMPLES).astype(np.intp)
    at.setflags(write=False)
    return at


def unique_arrays(arrays: Iterable[Weight]) -> tuple[list[Weight], dict[int, int]]:
    """The weights with content duplicates removed (first occurrences kept, in order), and
    ``id(weight) -> position`` in that list for every weight given. Only weights whose
    fingerprint equals another's are hashed (``content_key``)."""
    distinct = list({id(a): a for a in arrays}.values())
    groups: dict[Fingerprint, list[Weight]] = {}
    for a in distinct:
        groups.setdefault(fingerprint(a), []).append(a)
    first: dict[int, Weight] = {}  # id(weight) -> the first weight with its content
    for group in groups.values():
        seen: dict[str, Weight] = {}
        for a in group:
            first[id(a)] = seen.setdefault(content_key(a), a) if len(group) > 1 else a
    unique = [a for a in distinct if first[id(a)] is a]
    where = {id(a): k for k, a in enumerate(unique)}
    return unique, {ident: where[id(rep)] for ident, rep in first.items()}


# ----------------------------------------------------------------------------- aligned copies

CACHE_LINE = 64  # bytes: a cache line, and AVX-512's vector


def packed(arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Read-only C-order copies of ``arrays`` (any dtype that holds no objects: numbers,
    ml_dtypes' bfloat16 and float8, fixed-width strings) in one new buffer, each starting at a
    multiple of ``CACHE_LINE`` bytes (one allocation: NumPy backs a large one with huge pages
    where the system allows it)."""
    ends = [-(-a.nbytes // CACHE_LINE) * CACHE_LINE for a in arrays]
    raw = np.empty(sum(ends) + CACHE_LINE, np.uint8)
    at = -raw.ctypes.data % CACHE_LINE
    copies = []
    for a, size in zip(arrays, ends, strict=True):
        copy = raw[at:at + a.nbytes].view(a.dtype).reshape(a.shape)
        np.copyto(copy, a)
        copy.flags.writeable = False
        copies.append(copy)
        at += size
    return copies


def aligned(array: np.ndarray) -> np.ndarray:
    """``array`` when it is C-contiguous and starts on a cache line (or holds objects, which
    no BLAS reads), else ``packed``'s copy."""
    if array.dtype.hasobject or (array.flags.c_contiguous
                                 and not array.ctypes.data % CACHE_LINE):
        return array
    return packed([array])[0]


# ----------------------------------------------------------------------------- mapped pages

def mapping_of(array: np.ndarray) -> mmap.mmap | None:
    """The memory map ``array`` is a view of, if any."""
    base: Any = array
    while isinstance(base, np.ndarray):
        base = base.base
    if isinstance(base, memoryview):
        base = base.obj
    return base if isinstance(base, mmap.mmap) else None


_STARTS: weakref.WeakKeyDictionary[mmap.mmap, int] = weakref.WeakKeyDictionary()


def release_mapping(mapped: mmap.mmap) -> None:
    """Give back every page of ``mapped`` this process touched (see ``release``)."""
    if _DONTNEED is not None and not mapped.closed and len(mapped):
        with contextlib.suppress(OSError, ValueError):
            mapped.madvise(_DONTNEED)


def release(array: np.ndarray) -> None:
    """Give back the pages under ``array`` when it is a view of a mapped file (see the module
    docstring); otherwise do nothing."""
    mapped = mapping_of(array)
    if mapped is None or _DONTNEED is None or array.size == 0 or mapped.closed:
        return
    start = _STARTS.get(mapped)
    if start is None:
        start = _STARTS[mapped] = np.frombuffer(mapped, np.uint8, 1).ctypes.data
    low, high = byte_bounds(array)
    first = (low - start) // _PAGE * _PAGE
    last = min(len(mapped), high - start)
    if 0 <= first < last:
        with contextlib.suppress(OSError, ValueError):
            mapped.madvise(_DONTNEED, first, last - first)
