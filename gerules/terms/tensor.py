"""``ConstTensor``: a constant array as a hashable e-node attribute.

Invariants:
- The array is read-only and nobody mutates it: a writeable array is *taken*, made
  read-only in place rather than copied (every caller hands over an array it has just
  computed: a folded value, a rule's computed constant), so folding a model's weights costs
  no second copy of them.
- Equality goes by content (dtype, shape, bytes): the ``fingerprint`` (dtype, shape, a few
  sampled elements) first, then ``content_key`` (SHA-256, computed once per array) only when
  two fingerprints are equal; the hash is the fingerprint's. So two initializers with the
  same bytes are one ``ConstTensor`` and one e-class, and lowering a model costs time in its
  node count, not its weight bytes (weights are hashed only when they look alike).
"""

from __future__ import annotations

import numpy as np

from ..ir.graph import content_key, fingerprint


class ConstTensor:
    """An immutable array compared by content; the ``value`` attribute of ``Const`` e-nodes."""

    __slots__ = ("array", "fingerprint", "_hash")

    def __init__(self, array: np.ndarray) -> None:
        arr = np.asarray(array)
        if arr.flags.writeable:
            arr.setflags(write=False)
        self.array = arr
        self.fingerprint = fingerprint(arr)
        self._hash = hash(self.fingerprint)

    @property
    def key(self) -> str:
        """The content key (SHA-256; computed on first use, then kept with the array)."""
        return content_key(self.array)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ConstTensor) and (
            self is other or self.array is other.array
            or (self.fingerprint == other.fingerprint and self.key == other.key))

    def __lt__(self, other: ConstTensor) -> bool:  # attrs tuples sort deterministically
        if self.fingerprint != other.fingerprint:
            return self.fingerprint < other.fingerprint
        return self.key < other.key

    @property
    def nbytes(self) -> int:
        return int(self.array.nbytes)

    def __repr__(self) -> str:
        a = self.array
        if a.size <= 4:
            return f"const({a.tolist()!r}:{a.dtype.name})"
        return f"const<{a.dtype.name}{list(a.shape)}#{self.key[:8]}>"
