"""Explanations: why two e-classes are equal (egg's proof forest, simplified).

Invariants:
- The forest has one node per e-class id ever created (the id of the e-node that created it).
- Every effective union ``union(a, b, reason)`` adds exactly one edge between the two ids it was
  given, after re-rooting ``a``'s tree at ``a``; so two ids are in one tree exactly when the
  e-graph's union-find says they are equal, and the tree path between them is a proof.
- An edge is either a rule step (its reason is the rule name, or an analysis name) or a
  congruence step (the two ids' creating e-nodes have the same op and attrs and pairwise equal
  children; the explanation recurses into those children).
- Explaining never mutates the forest; recursion through congruence is cut at pairs already being
  explained (a cyclic proof), so ``explain`` always terminates.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from .enode import ENode
from .errors import EngineError

CONGRUENCE = "congruence"


@dataclass(frozen=True, slots=True)
class Step:
    """One edge of a proof: ``left`` and ``right`` became equal by ``reason``."""

    left: int
    right: int
    reason: str
    congruence: tuple[Explanation, ...] = ()

    @property
    def is_congruence(self) -> bool:
        return self.reason == CONGRUENCE


@dataclass(frozen=True, slots=True)
class Explanation:
    """A chain of steps from ``left`` to ``right`` (empty when they are the same id)."""

    left: int
    right: int
    steps: tuple[Step, ...]

    def rules(self) -> list[str]:
        """Rule names in proof order, congruence steps replaced by their children's rules."""
        return [step.reason for step in self.walk() if not step.is_congruence]

    def walk(self) -> Iterator[Step]:
        """Every step, congruence steps followed by the steps of their sub-explanations."""
        for step in self.steps:
            yield step
            for sub in step.congruence:
                yield from sub.walk()

    def lines(self, indent: int = 0) -> list[str]:
        out: list[str] = []
        for step in self.steps:
            out.append(" " * indent + f"#{step.left} = #{step.right}  by {step.reason}")
            for sub in step.congruence:
                out.extend(sub.lines(indent + 4))
        return out

    def __str__(self) -> str:
        return "\n".join(self.lines()) or f"#{self.left} and #{self.right} are the same class"


class ProofForest:
    """Edges between e-class ids, each labelled with the reason of the union that added it."""

    __slots__ = ("_parent", "_reason")

    def __init__(self) -> None:
        self._parent: list[int] = []
        self._reason: list[str] = []

    def add(self) -> int:
        new = len(self._parent)
        self._parent.append(new)
        self._reason.append("")
        return new

    def union(self, a: int, b: int, reason: str) -> None:
        """Record that ``a`` and ``b`` (in different trees) were made equal by ``reason``.

        The endpoint nearer to its root is re-rooted and linked under the other, so the cost is
        twice the shorter of the two depths."""
        parent, near, far = self._parent, a, b
        while parent[near] != near and parent[far] != far:
            near, far = parent[near], parent[far]
        source, target = (a, b) if parent[near] == near else (b, a)
        self._reroot(source)
        parent[source] = target
        self._reason[source] = reason

    def _reroot(self, x: int) -> None:
        """Reverse the path from ``x`` to its root in place, so that ``x`` becomes the root."""
        parent, why = self._parent, self._reason
        node, nxt, label = x, parent[x], why[x]
        parent[x], why[x] = x, ""
        while nxt != node:
            after, after_label = parent[nxt], why[nxt]
            parent[nxt], why[nxt] = node, label
            if after == nxt:
                break
            node, nxt, label = nxt, after, after_label

    def _path(self, x: int) -> list[int]:
        path = [x]
        while (parent := self._parent[path[-1]]) != path[-1]:
            path.append(parent)
        return path

    def explain(self, a: int, b: int, id_node: Callable[[int], ENode]) -> Explanation:
        """The proof that ``a`` equals ``b``; raises ``EngineError`` when they are not equal."""
        return self._explain(a, b, id_node, set())

    def _explain(
        self, a: int, b: int, id_node: Callable[[int], ENode], active: set[tuple[int, int]]
    ) -> Explanation:
        path_a, path_b = self._path(a), self._path(b)
        if path_a[-1] != path_b[-1]:
            raise EngineError(f"classes #{a} and #{b} are not equal: nothing to explain")
        on_b = {node: i for i, node in enumerate(path_b)}
        cut = next(i for i, node in enumerate(path_a) if node in on_b)
        up = [(path_a[i], path_a[i + 1], self._reason[path_a[i]]) for i in range(cut)]
        down = [(path_b[i + 1], path_b[i], self._reason[path_b[i]])
                for i in reversed(range(on_b[path_a[cut]]))]
        active = active | {(a, b)}
        steps = tuple(self._step(u, v, why, id_node, active) for u, v, why in up + down)
        return Explanation(a, b, steps)

    def _step(
        self, u: int, v: int, reason: str, id_node: Callable[[int], ENode],
        active: set[tuple[int, int]],
    ) -> Step:
        if reason != CONGRUENCE:
            return Step(u, v, reason)
        pairs = zip(id_node(u).children, id_node(v).children, strict=True)
        subs = tuple(self._explain(x, y, id_node, active)
                     for x, y in pairs if x != y and (x, y) not in active)
        return Step(u, v, reason, subs)
