"""E-nodes: an operator, its attributes and its child e-class ids.

Invariants:
- An ``ENode`` is an immutable, hashable value (a ``NamedTuple``: C-speed hashing and equality,
  which the hashcons and the matcher hit millions of times).
- ``attrs`` is a tuple of ``(name, value)`` pairs *sorted by name* with unique names; values are
  hashable (ints, floats, strings, tuples, or opaque objects hashed by content). Build it with
  ``make_attrs`` (or ``enode``) so that equal attribute sets hash equally.
- ``children`` is a tuple of e-class ids. The e-graph stores nodes whose children are canonical
  (roots of the union-find) once rebuilt.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Any, NamedTuple

Attrs = tuple[tuple[str, Hashable], ...]


class ENode(NamedTuple):
    """``op(children...) {attrs}``; multi-output ops use a tuple class plus ``Proj{index}``."""

    op: str
    attrs: Attrs = ()
    children: tuple[int, ...] = ()

    def get(self, name: str, default: Any = None) -> Any:
        """The value of attribute ``name`` (a short linear scan: nodes carry few attributes)."""
        for key, value in self.attrs:
            if key == name:
                return value
        return default

    def has(self, name: str) -> bool:
        return any(key == name for key, _ in self.attrs)

    def with_children(self, children: Iterable[int]) -> ENode:
        return ENode(self.op, self.attrs, tuple(children))

    def map_children(self, fn: Callable[[int], int]) -> ENode:
        return ENode(self.op, self.attrs, tuple(map(fn, self.children)))

    def __str__(self) -> str:
        attrs = ", ".join(f"{k}={v!r}" for k, v in self.attrs)
        kids = ", ".join(f"#{c}" for c in self.children)
        return f"{self.op}({kids})" + (f"{{{attrs}}}" if attrs else "")


def make_attrs(attrs: Mapping[str, Hashable] | Iterable[tuple[str, Hashable]] = ()) -> Attrs:
    """Attributes as a name-sorted tuple of pairs; rejects duplicate names."""
    pairs = list(attrs.items()) if isinstance(attrs, Mapping) else list(attrs)
    pairs.sort(key=lambda pair: pair[0])
    for (a, _), (b, _) in zip(pairs, pairs[1:], strict=False):
        if a == b:
            raise ValueError(f"attribute '{a}' given twice")
    return tuple(pairs)


def enode(op: str, *children: int, **attrs: Hashable) -> ENode:
    """Convenience constructor: ``enode("Conv", x, w, b, group=1)``."""
    return ENode(op, make_attrs(attrs), children)


def attrs_sorted(attrs: Attrs) -> bool:
    """True when ``attrs`` is sorted by name with unique names (what ``make_attrs`` returns)."""
    return all(a[0] < b[0] for a, b in zip(attrs, attrs[1:], strict=False))
