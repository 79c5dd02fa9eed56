"""E-class analyses: data attached to every e-class, kept up to date by the e-graph.

Invariants:
- An analysis has a ``name``, ``make(egraph, enode)`` (data of a new e-node, reading its
  children's data through ``egraph.data``), ``merge(a, b) -> (joined, a_changed, b_changed)``
  and ``modify(egraph, class_id)`` (may add e-nodes and unions to the class).
- ``merge`` reports change itself: the e-graph never compares data with ``==`` (data may be NumPy
  arrays), it re-propagates exactly when ``merge`` says a side changed.
- Several analyses run on one e-graph: class data is a tuple with one entry per analysis, in the
  order given; ``egraph.data(id, name)`` picks one. A ``make`` may read any analysis' data of the
  node's children.
- A merge that cannot join raises ``AnalysisConflict``; ``AnalysisSet.merge`` turns it into
  ``UnsoundRewrite`` naming the union's reason (the rule) and both data.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from .enode import ENode
from .errors import AnalysisConflict, EngineError, UnsoundRewrite

if TYPE_CHECKING:
    from .egraph import EGraph

Merged = tuple[Any, bool, bool]


class Analysis(Protocol):
    """The plug-in protocol (egg's ``Analysis`` trait)."""

    name: str

    def make(self, egraph: EGraph, enode: ENode) -> Any: ...

    def merge(self, a: Any, b: Any) -> Merged: ...

    def modify(self, egraph: EGraph, class_id: int) -> None: ...


def _same(a: Any, b: Any) -> bool:
    """Identity, else ``==`` when it yields a plain bool (never an array's elementwise result)."""
    if a is b:
        return True
    try:
        result = a == b
    except Exception:  # noqa: BLE001 - an incomparable pair is simply "not the same"
        return False
    return result if isinstance(result, bool) else False


class ShapeAnalysis:
    """Shape+dtype per class: ``infer`` makes it, ``join`` merges it and raises on a conflict.

    ``join(a, b)`` returns the joined type (e.g. a symbolic dim refined by a static one) or raises
    one of ``conflicts`` when the types are incompatible. ``same(x, y)`` decides whether the join
    changed a side; the default is identity or a plain-``bool`` ``==``.
    """

    def __init__(
        self,
        infer: Callable[[EGraph, ENode], Any],
        join: Callable[[Any, Any], Any],
        *,
        name: str = "shape",
        same: Callable[[Any, Any], bool] = _same,
        conflicts: tuple[type[BaseException], ...] = (AnalysisConflict,),
    ) -> None:
        self.name = name
        self._infer = infer
        self._join = join
        self._same = same
        self._conflicts = conflicts

    def make(self, egraph: EGraph, enode: ENode) -> Any:
        return self._infer(egraph, enode)

    def merge(self, a: Any, b: Any) -> Merged:
        try:
            joined = self._join(a, b)
        except self._conflicts as exc:
            raise AnalysisConflict(str(exc)) from exc
        return joined, not self._same(joined, a), not self._same(joined, b)

    def modify(self, egraph: EGraph, class_id: int) -> None:
        return None


class ConstantAnalysis:
    """Constant folding: a class whose value is known and small gets a constant e-node.

    ``evaluate(egraph, enode)`` returns the node's value or ``None`` (it reads the children's
    values with ``egraph.data(child, name)``). Values of nodes other than ``const_op`` larger
    than ``max_bytes`` (per ``nbytes``) are dropped, so nothing above the cap is ever folded.
    ``modify`` adds ``make_const(value)`` to a class with a value and no ``const_op`` node.
    Two values of one class are assumed equal (the union is sound); the first is kept.
    """

    def __init__(
        self,
        evaluate: Callable[[EGraph, ENode], Any],
        make_const: Callable[[Any], ENode],
        nbytes: Callable[[Any], int],
        *,
        max_bytes: int = 1 << 16,
        name: str = "const",
        const_op: str = "Const",
    ) -> None:
        self.name = name
        self.max_bytes = max_bytes
        self.const_op = const_op
        self._evaluate = evaluate
        self._make_const = make_const
        self._nbytes = nbytes

    def make(self, egraph: EGraph, enode: ENode) -> Any:
        value = self._evaluate(egraph, enode)
        if value is None or enode.op == self.const_op:
            return value
        return value if self._nbytes(value) <= self.max_bytes else None

    def merge(self, a: Any, b: Any) -> Merged:
        if a is None:
            return b, b is not None, False
        return a, False, b is None

    def modify(self, egraph: EGraph, class_id: int) -> None:
        value = egraph.data(class_id, self.name)
        if value is None or any(n.op == self.const_op for n in egraph.nodes(class_id)):
            return
        const = egraph.add(self._make_const(value))
        egraph.union(class_id, const, reason=f"analysis:{self.name}")


class AnalysisSet:
    """Several analyses run as one: class data is a tuple, one entry per analysis."""

    __slots__ = ("items", "_index")

    def __init__(self, analyses: Sequence[Analysis] = ()) -> None:
        self.items: tuple[Analysis, ...] = tuple(analyses)
        self._index = {a.name: i for i, a in enumerate(self.items)}
        if len(self._index) != len(self.items):
            raise EngineError(f"analysis names must differ: {[a.name for a in self.items]}")

    def __bool__(self) -> bool:
        return bool(self.items)

    def index(self, name: str | None) -> int:
        """Position of analysis ``name`` in the data tuple (``None``: the only analysis)."""
        found = self._index.get(name) if name is not None else (0 if len(self.items) == 1 else None)
        if found is None:
            known = ", ".join(self._index) or "none"
            raise EngineError(f"no analysis named {name!r} (analyses: {known})")
        return found

    def make(self, egraph: EGraph, enode: ENode) -> tuple[Any, ...]:
        return tuple([a.make(egraph, enode) for a in self.items])

    def merge(self, a: tuple[Any, ...], b: tuple[Any, ...], reason: str) -> Merged:
        """Join two data tuples; ``UnsoundRewrite`` names ``reason`` when one conflicts."""
        joined: list[Any] = []
        changed_a = changed_b = False
        for analysis, x, y in zip(self.items, a, b, strict=True):
            try:
                value, ca, cb = analysis.merge(x, y)
            except AnalysisConflict as exc:
                raise UnsoundRewrite(reason, analysis.name, x, y, str(exc)) from exc
            joined.append(value)
            changed_a, changed_b = changed_a or ca, changed_b or cb
        return tuple(joined), changed_a, changed_b

    def modify(self, egraph: EGraph, class_id: int) -> None:
        for analysis in self.items:
            analysis.modify(egraph, egraph.find(class_id))

