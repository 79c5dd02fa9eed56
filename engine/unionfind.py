"""Union-find over dense integer ids.

Invariants:
- Ids are ``0 .. len(self) - 1``, handed out by ``make_set`` in order.
- ``parents[x] == x`` exactly when ``x`` is a root (the canonical id of its set).
- ``find`` compresses paths (halving); it never changes which root a set has.
- ``union(a, b)`` takes two *roots* and makes ``a`` the root of the merged set; the caller
  decides which root survives (the e-graph keeps the class with more parents).
"""

from __future__ import annotations


class UnionFind:
    """Disjoint sets of integer ids, with path halving."""

    __slots__ = ("parents",)

    def __init__(self) -> None:
        self.parents: list[int] = []

    def __len__(self) -> int:
        return len(self.parents)

    def make_set(self) -> int:
        """Create a singleton set; returns its id."""
        new = len(self.parents)
        self.parents.append(new)
        return new

    def find(self, x: int) -> int:
        """The root of ``x``'s set."""
        parents = self.parents
        while (parent := parents[x]) != x:
            grand = parents[parent]
            parents[x] = grand
            x = grand
        return x

    def union(self, root_a: int, root_b: int) -> int:
        """Merge two sets given by their roots; ``root_a`` stays the root."""
        self.parents[root_b] = root_a
        return root_a

    def is_root(self, x: int) -> bool:
        return self.parents[x] == x
