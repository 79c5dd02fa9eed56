"""What replaced what: the fusions an optimization made, with the rule that made each.

Invariants:
- A *fusion* is a node of the optimized graph that was not in the source graph and that some
  rule created; ``replaced`` lists the source nodes that computed, between the new node's inputs
  and its output, tensors the optimized graph no longer computes (so an unchanged neighbour is
  never listed).
- Everything here reads the e-graph after the run; nothing changes it.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..engine import Application, ENode, Extraction
from ..ir.graph import Graph, Node
from .lower import Lowered
from .terms import LEAVES, PROJ


@dataclass(frozen=True, slots=True)
class Fusion:
    rule: str
    node: str  # name of the new node
    op: str  # its qualified op
    replaced: tuple[tuple[str, str], ...]  # (source node name, qualified op)

    def to_json(self) -> dict[str, object]:
        return {"rule": self.rule, "node": self.node, "op": self.op,
                "replaced": [{"node": n, "op": o} for n, o in self.replaced]}


def creators(low: Lowered, applications: list[Application]) -> dict[ENode, str]:
    """Canonical e-node -> the first rule whose application added it."""
    eg = low.egraph
    out: dict[ENode, str] = {}
    for app in applications:
        for nid in app.added:
            out.setdefault(eg.canonical(eg.id_node(nid)), app.rule)
    return out


def fusions(source: Graph, low: Lowered, ext: Extraction, result: Graph,
            applications: list[Application]) -> list[Fusion]:
    eg = low.egraph
    made_by = creators(low, applications)
    original = {eg.canonical(e) for _, e, _ in low.node_enodes}
    computed = {cid for cid, n in ext.choices.items() if n.op not in LEAVES}
    by_output = {o: n for n in result.nodes for o in n.outputs}
    out: list[Fusion] = []
    for cid in ext.order:
        enode = ext.choices[cid]
        if enode.op in LEAVES or enode.op == PROJ or enode in original:
            continue
        rule = made_by.get(enode)
        if rule is None:
            continue
        inputs = {eg.find(c) for c in enode.children}
        replaced = _cone(low, cid, inputs, computed)
        node = _result_node(low, cid, by_output, result)
        out.append(Fusion(rule, node.name if node else "?", enode.op, replaced))
    return out


def _result_node(low: Lowered, cid: int, by_output: dict[str, Node], result: Graph
                 ) -> Node | None:
    for name, c in low.tensors.items():
        if low.egraph.find(c) == cid and name in by_output:
            return by_output[name]
    return None


def _cone(low: Lowered, root: int, stop: set[int], computed: set[int]
          ) -> tuple[tuple[str, str], ...]:
    """Source nodes between ``stop`` classes and ``root`` whose outputs are gone."""
    eg = low.egraph
    start = [t for t, c in low.tensors.items() if eg.find(c) == root]
    seen: set[str] = set()
    found: dict[str, Node] = {}
    stack = list(start)
    while stack:
        tensor = stack.pop()
        if tensor in seen:
            continue
        seen.add(tensor)
        cls = eg.find(low.tensors[tensor])
        node = low.producers.get(tensor)
        if node is None or (cls in stop and tensor not in start):
            continue
        if cls != root and cls in computed:
            continue
        found[node.label] = node
        stack.extend(i for i in node.present_inputs() if i in low.tensors)
    return tuple((n.label, n.qualified_op) for n in found.values())
