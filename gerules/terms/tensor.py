"""``ConstTensor``: a constant weight as a hashable e-node attribute.

Invariants:
- The weight is a read-only array or a ``Deferred`` constant (``ir.weights``), and nobody
  mutates it: a writeable array is *taken*, made read-only in place rather than copied
  (every caller hands over an array it has just computed: a folded value, a rule's computed
  constant), so folding a model's weights costs no second copy of them.
- Equality goes by content: the ``fingerprint`` (dtype, shape, a few sampled elements; a
  deferred constant's label and operands) first, then ``weights.same`` (for arrays the
  ``content_key``, SHA-256 computed once per array; for deferred constants their operands,
  never their values) only when two fingerprints are equal; the hash is the fingerprint's.
  So two initializers with the same bytes are one ``ConstTensor`` and one e-class, and
  lowering a model costs time in its node count, not its weight bytes (weights are hashed
  only when they look alike).
"""

from __future__ import annotations

import numpy as np

from ..ir.weights import Deferred, Weight, content_key, fingerprint, same


class ConstTensor:
    """An immutable weight compared by content; the ``value`` attribute of ``Const`` e-nodes."""

    __slots__ = ("array", "fingerprint", "_hash")

    def __init__(self, array: Weight) -> None:
        arr = array if isinstance(array, Deferred) else np.asarray(array)
        if isinstance(arr, np.ndarray) and arr.flags.writeable:
            arr.setflags(write=False)
        self.array: Weight = arr
        self.fingerprint = fingerprint(arr)
        self._hash = hash(self.fingerprint)

    @property
    def key(self) -> str:
        """The content key (SHA-256; computed on first use, then kept with the weight)."""
        return content_key(self.array)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ConstTensor) and (
            self is other or self.array is other.array
            or (self.fingerprint == other.fingerprint and same(self.array, other.array)))

    def __lt__(self, other: ConstTensor) -> bool:  # attrs tuples sort deterministically
        if self.fingerprint != other.fingerprint:
            return self.fingerprint < other.fingerprint
        return self.key < other.key

    @property
    def nbytes(self) -> int:
        return int(self.array.nbytes)

    def __repr__(self) -> str:
        a = self.array
        if isinstance(a, Deferred):
            return repr(a)
        if a.size <= 4:
            return f"const({a.tolist()!r}:{a.dtype.name})"
        return f"const<{a.dtype.name}{list(a.shape)}#{self.key[:8]}>"
