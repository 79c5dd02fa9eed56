"""Apply one compiled rewrite to an instance through the engine, as the optimizer would.

The instance graph is lowered into an e-graph exactly as the optimizer lowers models; the
rewrite's own searcher finds the pattern at the instance's roots; its own conditions (pattern
constants, ``where``/``let`` clauses, the right side's preparation) run in order; its applier
adds the right side. The new classes are not merged with the roots, so their types can be
compared with the left side's, and extracting them gives the right side alone, raised back
into a graph with the instance's inputs and outputs.

The shape soundness check (types only) and the verifier (types and values) both run rules
through here.

Invariants:
- What is tried is what the optimizer runs: the compiled searcher, conditions and applier,
  on the optimizer's lowering (with its constant analysis), never a re-implementation.
- ``Applied.fired`` is false exactly when the rule does not fire at the roots; ``reason``
  then says why (no match, or the first condition's reason, as the optimizer reports it).
- ``Applied.error`` says when the right side does not have the left side's type (dtype, rank
  or a known dim differs) or, with ``graphs=True``, is not a valid graph.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..engine import AnalysisConflict, EGraph, ENode, Reject, Rewrite, Subst, extract
from ..errors import GeError
from ..ir.graph import Graph, TensorType, Value
from ..ir.registry import Registry
from ..ir.verify import verify
from ..terms.lower import Lowered, lower
from ..terms.raise_graph import raise_graph
from ..terms.terms import TermContext, class_type, join_types
from .instances.builder import OUTPUT


@dataclass(frozen=True)
class Applied:
    fired: bool = False
    graph: Graph | None = None  # the right side (``graphs=True``), when the rule fired
    reason: str = ""  # why it did not fire
    error: str = ""  # the right side has another type, or is not a valid graph
    left: tuple[TensorType, ...] = ()  # the roots' types
    right: tuple[object, ...] = ()  # the right sides' types


def apply_rewrite(instance: Graph, rewrite: Rewrite, registry: Registry | None = None, *,
                  graphs: bool = True) -> Applied:
    """Apply ``rewrite`` at the roots of ``instance`` (its outputs, in order)."""
    ctx = TermContext(registry, instance.opset, {v.name: v.type for v in instance.inputs})
    low = lower(instance, ctx, explanations=False)
    egraph = low.egraph
    roots = tuple(egraph.find(low.roots[v.name]) for v in _rooted(instance))
    matches = [m for m in rewrite.search(egraph)
               if sorted(_roots(egraph, rewrite, m)) == sorted(roots)]
    if not matches:
        return Applied(reason="the pattern does not match the instance")
    reason = ""
    for match in matches:
        outcome = _conditions(egraph, rewrite, match)
        if isinstance(outcome, Reject):
            reason = reason or outcome.reason
            continue
        rhs = dict(zip(_roots(egraph, rewrite, match),
                       rewrite.applier(egraph, int(match[0]), outcome), strict=True))
        return _result(instance, low, tuple(rhs[r] for r in roots), registry, graphs)
    return Applied(reason=reason)


def _rooted(instance: Graph) -> tuple[Value, ...]:
    """The outputs that are the pattern's roots: in a built instance the ``%out`` ones (the
    others are the further outputs of a node the pattern matches by output, ``Op(..)[0]``,
    kept as they are); in a graph given as an instance (``check_instance``), all of them."""
    named = tuple(v for v in instance.outputs if v.name.startswith(OUTPUT))
    return named or instance.outputs


def _roots(egraph: EGraph, rewrite: Rewrite, match: tuple[object, ...]) -> tuple[int, ...]:
    """The match's root classes (a multi-pattern has several, in any order)."""
    return tuple(egraph.find(int(match[r])) for r in rewrite.layout.roots)


def _conditions(egraph: EGraph, rewrite: Rewrite, match: tuple[object, ...]) -> Subst | Reject:
    subst = Subst(rewrite.layout, match)
    for condition in rewrite.conditions:
        outcome = condition(egraph, int(match[0]), subst)  # type: ignore[call-overload]
        if isinstance(outcome, Reject):
            return outcome
        subst = outcome
    return subst


def _result(instance: Graph, low: Lowered, rhs: tuple[int, ...], registry: Registry | None,
            graphs: bool) -> Applied:
    egraph = low.egraph
    rooted = _rooted(instance)
    left = tuple(v.type for v in rooted)
    right = tuple(class_type(egraph, c) for c in rhs)
    for have, got in zip(left, right, strict=True):
        try:
            join_types(have, got)
        except AnalysisConflict:
            return Applied(True, None, "", f"the left side is {have} but the right side is "
                                           f"{got}", left, right)
    if not graphs:
        return Applied(True, left=left, right=right)
    kept = {v.name: egraph.find(low.roots[v.name]) for v in instance.outputs
            if v not in rooted}
    ext = extract(egraph, [*rhs, *kept.values()], _size)
    lowered = dataclasses.replace(low, roots={**kept, **{v.name: egraph.find(c) for v, c in
                                                         zip(rooted, rhs, strict=True)}})
    try:
        # folded weights computed now: the verifier reads every constant of a right side
        graph = verify(raise_graph(instance, lowered, ext).materialized(), registry)
    except GeError as e:
        return Applied(True, None, "", f"the right side is not a valid graph: {e}", left, right)
    return Applied(True, graph, left=left, right=right)


def _size(egraph: EGraph, cid: int, enode: ENode) -> float:
    return 1.0
