"""``ConstTensor``: a constant array as a hashable e-node attribute.

Invariants:
- The array is a read-only copy (or an already read-only array) that nobody mutates.
- Equality and hashing go by content (dtype, shape, bytes) through ``content_key``, computed
  once; two initializers with the same bytes are one ``ConstTensor`` and so one e-class.
"""

from __future__ import annotations

import numpy as np

from ..ir.graph import content_key


class ConstTensor:
    """An immutable array with a content hash; the ``value`` attribute of ``Const`` e-nodes."""

    __slots__ = ("array", "key", "_hash")

    def __init__(self, array: np.ndarray) -> None:
        arr = np.asarray(array)
        if arr.flags.writeable:
            arr = arr.copy()
            arr.setflags(write=False)
        self.array = arr
        self.key = content_key(arr)
        self._hash = hash(self.key)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ConstTensor) and self.key == other.key

    def __lt__(self, other: ConstTensor) -> bool:  # attrs tuples sort deterministically
        return self.key < other.key

    @property
    def nbytes(self) -> int:
        return int(self.array.nbytes)

    def __repr__(self) -> str:
        a = self.array
        if a.size <= 4:
            return f"const({a.tolist()!r}:{a.dtype.name})"
        return f"const<{a.dtype.name}{list(a.shape)}#{self.key[:8]}>"
