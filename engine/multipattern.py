"""Multi-patterns: several root patterns matched together, joined on the classes they share.

``MultiPattern([p0, p1, ...])`` finds tuples of distinct root classes where every pattern
matches at its root and every name shared by two patterns is the same class (or, for an
attribute variable, the same value). egg's ``MultiPattern`` is the model.

The join never enumerates a cross product: pattern 0 is searched like any pattern (by its
root op); for each of its matches, pattern ``k`` is searched only at the classes reached from
a class it shares with the earlier patterns by walking up ``k``'s path to that variable
(parents with the path's op, arity and child position), and the candidates of one shared
class are computed once per search.

Invariants:
- A match is the concatenation of the parts' matches (pattern 0's registers first);
  ``layout.roots`` holds the register of each root, ``layout.slots`` the first register of
  every name; register 0 is root 0.
- Every pattern after the first shares a class variable with an earlier one, and the roots
  are op patterns; binders are unique across patterns. ``PatternError`` otherwise.
- The roots of a match are distinct classes; with ``ordered=True`` (patterns that are the
  same up to the names they do not share, so every order of a set of roots matches) they are
  also increasing, so each set of roots is found once.
- ``since`` is ignored: a rewrite over a multi-pattern searches everywhere each time.
- Each root's matched e-node is in ``layout.nodes`` (under its binder, or ``#root<k>``), in
  ``root_nodes`` order, so a rewrite can tell which nodes it matched.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from .errors import PatternError
from .machine import Pattern
from .pattern import Layout, Match, PatternNode, POp, Var

if TYPE_CHECKING:
    from .egraph import EGraph

Step = tuple[str, int, int]  # (op, arity, child index) from a root down to a variable


def path_to(node: PatternNode, name: str) -> list[Step] | None:
    """The steps from ``node`` down to a ``Var(name)`` (or the node bound ``as name``)."""
    if isinstance(node, Var):
        return [] if node.name == name else None
    if not isinstance(node, POp):
        return None
    if node.binder == name:
        return []
    for i, child in enumerate(node.children):
        below = path_to(child, name)
        if below is not None:
            return [(node.op, len(node.children), i), *below]
    return None


class MultiPattern:
    """Several patterns matched together (see the module docstring)."""

    def __init__(self, roots: Sequence[PatternNode], commutative: Iterable[str] = (), *,
                 ordered: bool = False) -> None:
        ops = [r for r in roots if isinstance(r, POp)]
        if len(roots) < 2 or len(ops) != len(roots):
            raise PatternError("a multi-pattern has two or more op patterns as its roots")
        self.commutative = frozenset(commutative)
        self.ast: tuple[POp, ...] = tuple(
            r if r.binder else dataclasses.replace(r, binder=f"#root{k}")
            for k, r in enumerate(ops))
        self.parts = tuple(Pattern(r, self.commutative) for r in self.ast)
        self.ordered = ordered
        self.root_op = self.parts[0].root_op
        self.height = max(p.height for p in self.parts)
        self._layout()
        self._joins()

    def _layout(self) -> None:
        slots: dict[str, int] = {}
        nodes: dict[str, int] = {}
        classes: list[str] = []
        offsets: list[int] = []
        size = 0
        for part in self.parts:
            offsets.append(size)
            for name, reg in part.layout.slots.items():
                slots.setdefault(name, size + reg)
            for name, reg in part.layout.nodes.items():
                if name in nodes:
                    raise PatternError(f"binder '{name}' is used in two root patterns")
                nodes[name] = size + reg
            classes += [n for n in part.layout.classes if n not in classes]
            size += part.layout.size
        self.offsets = tuple(offsets)
        self.layout = Layout(slots, nodes, tuple(classes), size, tuple(offsets))
        self.root_nodes = tuple(nodes[r.binder] for r in self.ast if r.binder is not None)

    def _joins(self) -> None:
        """Per pattern after the first: the shared names to compare, and one shared class
        with the path down to it (how candidate roots are found)."""
        # (register in the part, combined register, holds a class)
        self.compare: list[list[tuple[int, int, bool]]] = []
        self.paths: list[tuple[int, list[Step]]] = []  # (combined register, path)
        seen: set[str] = set(self.parts[0].layout.slots)
        for k, part in enumerate(self.parts[1:], 1):
            shared = [n for n in part.layout.slots if n in seen]
            self.compare.append([(part.layout.slots[n], self.layout.slots[n],
                                  n in part.layout.classes) for n in shared])
            joins = [(n, path_to(self.ast[k], n)) for n in shared
                     if n in part.layout.classes]
            usable = [(n, p) for n, p in joins if p]
            if not usable:
                raise PatternError(f"root pattern {k} shares no variable with the ones before "
                                   "it (a multi-pattern joins on shared classes)")
            name, path = min(usable, key=lambda np: len(np[1]))
            self.paths.append((self.layout.slots[name], path))
            seen |= set(part.layout.slots)

    def search(self, egraph: EGraph, candidates: Iterable[int] | None = None,
               since: int = -1) -> list[Match]:
        """Matches whose first root is among ``candidates`` (default: every class)."""
        results = self.parts[0].search(egraph, candidates)
        for k, part in enumerate(self.parts[1:], 1):
            reg, path = self.paths[k - 1]
            compare = self.compare[k - 1]
            found: dict[int, list[Match]] = {}
            grown: list[Match] = []
            for m in results:
                cls = egraph.find(m[reg])
                if cls not in found:
                    found[cls] = part.search(egraph, self._up(egraph, cls, path))
                roots = [egraph.find(m[self.offsets[j]]) for j in range(k)]
                for mk in found[cls]:
                    root = egraph.find(mk[0])
                    if root in roots or (self.ordered and root <= roots[-1]):
                        continue
                    if all(egraph.find(mk[a]) == egraph.find(m[b]) if is_class
                           else mk[a] == m[b] for a, b, is_class in compare):
                        grown.append(m + mk)
            results = grown
        return results

    def _up(self, egraph: EGraph, cls: int, path: list[Step]) -> list[int]:
        """The classes ``path`` leads up to from ``cls`` (parents by op, arity, position)."""
        level = {cls}
        for op, arity, index in reversed(path):
            swap = op in self.commutative and index < 2 and arity >= 2
            up: set[int] = set()
            for c in level:
                for node, parent in egraph.parents(c):
                    if node.op != op or len(node.children) != arity:
                        continue
                    at = {egraph.find(node.children[index])}
                    if swap:
                        at.add(egraph.find(node.children[1 - index]))
                    if c in at:
                        up.add(egraph.find(parent))
            level = up
        return sorted(level)

    def __repr__(self) -> str:
        return f"MultiPattern({self.ast!r})"

