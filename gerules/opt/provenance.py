"""What replaced what: the fusions an optimization made, with the rule that made each.

Invariants:
- A *fusion* is a node of the optimized graph that was not in the source graph and that some
  rule created; ``replaced`` lists the source nodes that computed, between the new node's inputs
  and its output, tensors the optimized graph no longer computes (so an unchanged neighbour is
  never listed). A TransData node is no fusion (the layout figures count them) and is
  transparent here: a node computing in a blocked format replaced what computed the same
  values in the plain one.
- ``applied`` and ``kept`` count places (distinct e-classes at the end of the run, so a
  match found again in a later iteration counts once): where a rule changed the e-graph, and
  where the extracted graph shows its work (a rule may apply and still lose at extraction:
  its result costs more, or the target forbids it).
- Everything here reads the e-graph after the run; nothing changes it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..engine import Application, ENode, Extraction, Pattern, POp, Var
from ..ir.graph import Graph, Node
from ..terms.lower import Lowered
from ..terms.terms import LEAVES, PROJ

TRANSDATA = "ge.TransData"


@dataclass(frozen=True, slots=True)
class Fusion:
    rule: str
    node: str  # name of the new node
    op: str  # its qualified op
    replaced: tuple[tuple[str, str], ...]  # (source node name, qualified op)
    chain: tuple[str, ...] = ()  # every rule behind the new node, earliest first

    def to_json(self) -> dict[str, object]:
        return {"rule": self.rule, "node": self.node, "op": self.op,
                "replaced": [{"node": n, "op": o} for n, o in self.replaced],
                "chain": list(self.chain)}


def creators(low: Lowered, applications: list[Application]) -> dict[ENode, Application]:
    """Canonical e-node -> the first application that added it."""
    eg = low.egraph
    out: dict[ENode, Application] = {}
    for app in applications:
        for nid in app.added:
            out.setdefault(eg.canonical(eg.id_node(nid)), app)
    return out


def _chain(low: Lowered, app: Application, made_by: dict[ENode, Application]
           ) -> tuple[str, ...]:
    """The rules behind a new node, earliest first: the rules that created the nodes its
    rule matched (``as`` binders), recursively, then its own rule."""
    eg = low.egraph
    rules: list[str] = []
    seen: set[int] = set()

    def visit(a: Application) -> None:
        if id(a) in seen:
            return
        seen.add(id(a))
        for _, bound in a.nodes:
            earlier = made_by.get(eg.canonical(bound))
            if earlier is not None and earlier is not a:
                visit(earlier)
        rules.append(a.rule)

    visit(app)
    return tuple(dict.fromkeys(rules))


def fusions(source: Graph, low: Lowered, ext: Extraction, result: Graph,
            applications: list[Application],
            rule_of: Callable[[str], str] = lambda name: name) -> list[Fusion]:
    """The fusions of ``result``; ``rule_of`` names the source rule of a rewrite."""
    eg = low.egraph
    made_by = creators(low, applications)
    original = {eg.canonical(e) for _, e, _ in low.node_enodes}
    computed = {cid for cid, n in ext.choices.items() if n.op not in LEAVES}
    emitted = [c for c in ext.order if ext.choices[c].op not in LEAVES
               and ext.choices[c].op != PROJ]
    node_of = dict(zip(emitted, result.nodes, strict=False))  # raise_graph's order
    projections: dict[int, set[int]] = {}
    for cid, n in ext.choices.items():
        if n.op == PROJ:
            projections.setdefault(eg.find(n.children[0]), set()).add(cid)
    out: list[Fusion] = []
    for cid in ext.order:
        enode = ext.choices[cid]
        if enode.op in LEAVES or enode.op in (PROJ, TRANSDATA) or enode in original:
            continue
        app = made_by.get(enode)
        if app is None:
            continue
        inputs = _twins(eg, {eg.find(c) for c in enode.children})
        roots = _twins(eg, projections.get(cid, {cid}))  # a tuple's values: its projections
        replaced = _cone(low, roots, inputs, computed)
        node = node_of.get(cid)
        chain = tuple(dict.fromkeys(rule_of(r) for r in _chain(low, app, made_by)))
        out.append(Fusion(rule_of(app.rule), node.name if node else "?", enode.op, replaced,
                          chain))
    return out


def composed(first: list[Fusion], second: list[Fusion], result: Graph) -> list[Fusion]:
    """The fusions of two optimizations in a row, against the first one's source: a node of
    the second that replaced a fusion of the first replaced what that fusion replaced (its
    chain starts with that fusion's); fusions of the first whose node no longer exists are
    inside a later one."""
    by_node = {f.node: f for f in first}
    names = {n.name for n in result.nodes}
    out = [f for f in first if f.node in names and all(f.node not in {n for n, _ in g.replaced}
                                                     for g in second)]
    for f in second:
        replaced: list[tuple[str, str]] = []
        chain: list[str] = []
        for name, op in f.replaced:
            earlier = by_node.get(name)
            replaced += earlier.replaced if earlier is not None else [(name, op)]
            chain += earlier.chain if earlier is not None else []
        out.append(Fusion(f.rule, f.node, f.op, tuple(dict.fromkeys(replaced)),
                          tuple(dict.fromkeys([*chain, *f.chain]))))
    return out


def _twins(eg: Any, classes: set[int]) -> set[int]:
    """``classes`` and every class holding the same values in another format: reached along
    TransData e-nodes either way."""
    out, stack = set(classes), list(classes)
    while stack:
        c = stack.pop()
        near = [eg.find(n.children[0]) for n in eg.nodes(c) if n.op == TRANSDATA]
        near += [eg.find(p) for n, p in eg.parents(c) if n.op == TRANSDATA]
        for t in near:
            if t not in out:
                out.add(t)
                stack.append(t)
    return out


def _cone(low: Lowered, roots: set[int], stop: set[int], computed: set[int]
          ) -> tuple[tuple[str, str], ...]:
    """Source nodes between ``stop`` classes and the ``roots`` whose outputs are gone."""
    eg = low.egraph
    start = [t for t, c in low.tensors.items() if eg.find(c) in roots]
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
        if cls not in roots and cls in computed:
            continue
        found[node.label] = node
        stack.extend(i for i in node.present_inputs() if i in low.tensors)
    return tuple((n.label, n.qualified_op) for n in found.values())


def kept(low: Lowered, ext: Extraction, applications: list[Application],
         patterns: Mapping[str, Pattern]) -> Counter[str]:
    """Rule -> at how many distinct e-classes the extracted graph still shows its work.

    An application that added e-nodes is kept when one of them is the chosen node of its
    class. One that only merged classes (``x + 0 => x``) is kept when its root class is
    extracted to a node other than the one it rewrote away: not the pattern's root op over
    the matched children (children the match did not name compare as equal). An application
    that created a node a kept application matched (its chain, as in ``Fusion.chain``) is kept
    too: its work lives on inside the later fusion.
    """
    eg = low.egraph
    chosen = ext.choices
    made_by = creators(low, applications)
    done: set[int] = set()
    stack: list[Application] = []
    for app in applications:
        if app.added:
            hit = any(chosen.get(eg.find(i)) == eg.canonical(eg.id_node(i)) for i in app.added)
        else:
            node = chosen.get(eg.find(app.root))
            hit = node is not None and not _rewritten_away(node, app, patterns.get(app.rule), eg)
        if hit:
            stack.append(app)
    places: set[tuple[str, int]] = set()
    while stack:
        app = stack.pop()
        if id(app) in done:
            continue
        done.add(id(app))
        places.add((app.rule, eg.find(app.root)))
        for _, bound in app.nodes:
            earlier = made_by.get(eg.canonical(bound))
            if earlier is not None and id(earlier) not in done:
                stack.append(earlier)
    return Counter(rule for rule, _ in places)


def applied(low: Lowered, applications: list[Application]) -> Counter[str]:
    """Rule -> the distinct e-classes (at the end of the run) it changed the e-graph at."""
    find = low.egraph.find
    return Counter(rule for rule, _ in {(a.rule, find(a.root)) for a in applications})


def _rewritten_away(node: ENode, app: Application, pattern: Pattern | None, eg: Any) -> bool:
    """``node`` has the shape the rule's left side matched at its root."""
    ast = pattern.ast if pattern is not None else None
    if not isinstance(ast, POp) or node.op != ast.op or len(node.children) != len(ast.children):
        return False
    classes = dict(app.classes)
    want = [eg.find(classes[c.name]) if isinstance(c, Var) and c.name in classes else None
            for c in ast.children]
    orders = [tuple(node.children)]
    if ast.op in pattern.commutative and len(node.children) >= 2:  # type: ignore[union-attr]
        orders.append((node.children[1], node.children[0], *node.children[2:]))
    return any(all(w is None or w == eg.find(c) for w, c in zip(want, kids, strict=True))
               for kids in orders)
