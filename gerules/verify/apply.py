"""Apply one compiled rewrite to an instance through the engine and raise its right side.

The instance graph is lowered into an e-graph exactly as the optimizer lowers models; the
rewrite's own searcher finds the pattern at the instance's root; its own conditions (pattern
constants, ``where``/``let`` clauses, the right side's preparation) run in order; its applier
adds the right side. The new class is not merged with the root, so extracting it gives the
right side alone, which is raised back into a graph with the instance's inputs and output.

Invariants:
- What is verified is what the optimizer runs: the compiled searcher, conditions and applier,
  on the optimizer's lowering (with its constant analysis), never a re-implementation.
- ``Applied.graph`` is ``None`` exactly when the rule does not fire at the root; ``reason``
  then says why (no match, or the first condition's reason, as the optimizer reports it).
- The right side's graph is verified and declares the instance's output type, so a right
  side whose type differs fails verification here (``Applied.error``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..engine import EGraph, ENode, Reject, Rewrite, Subst, extract
from ..errors import GeError
from ..ir.graph import Graph
from ..ir.registry import Registry
from ..ir.verify import verify
from ..terms.lower import Lowered, lower
from ..terms.raise_graph import raise_graph


@dataclass(frozen=True)
class Applied:
    graph: Graph | None = None  # the right side, when the rule fired
    reason: str = ""  # why it did not fire
    error: str = ""  # the right side was built but is not a valid graph of the same type


def apply_rewrite(instance: Graph, rewrite: Rewrite, registry: Registry | None = None
                  ) -> Applied:
    low = lower(instance, explanations=False)
    egraph = low.egraph
    (out,) = instance.output_names
    root = egraph.find(low.roots[out])
    matches = [m for m in rewrite.search(egraph) if egraph.find(m[0]) == root]
    if not matches:
        return Applied(reason="the pattern does not match the instance")
    reason = ""
    for match in matches:
        outcome = _conditions(egraph, rewrite, match)
        if isinstance(outcome, Reject):
            reason = reason or outcome.reason
            continue
        rhs = rewrite.applier(egraph, int(match[0]), outcome)[0]
        return _raise(instance, low, egraph, rhs, registry)
    return Applied(reason=reason)


def _conditions(egraph: EGraph, rewrite: Rewrite, match: tuple[object, ...]) -> Subst | Reject:
    subst = Subst(rewrite.layout, match)
    for condition in rewrite.conditions:
        outcome = condition(egraph, int(match[0]), subst)  # type: ignore[call-overload]
        if isinstance(outcome, Reject):
            return outcome
        subst = outcome
    return subst


def _size(egraph: EGraph, cid: int, enode: ENode) -> float:
    return 1.0


def _raise(instance: Graph, low: Lowered, egraph: EGraph, rhs: int,
           registry: Registry | None) -> Applied:
    (out,) = instance.output_names
    ext = extract(egraph, [rhs], _size)
    lowered = dataclasses.replace(low, roots={out: egraph.find(rhs)})
    try:
        graph = raise_graph(instance, lowered, ext)
        return Applied(graph=verify(graph, registry))
    except GeError as e:
        return Applied(graph=None, error=f"the right side is not a valid graph: {e}")
