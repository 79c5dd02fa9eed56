"""The e-graph's documented invariants, checked through its public API only.

Invariants: ``check`` never changes the e-graph; it raises ``InvariantError`` with a one-line
message naming the class or node at fault. It needs a clean (rebuilt) e-graph. It costs
O(nodes + parent entries) and is meant for tests and debugging (egg's ``check_goals``/
``check_memo``), not for every run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .errors import InvariantError

if TYPE_CHECKING:
    from .egraph import EClass, EGraph


def check(egraph: EGraph) -> None:
    if not egraph.is_clean:
        raise InvariantError("e-graph has pending unions: call rebuild() first")
    _check_classes(egraph)
    _check_index(egraph)
    _check_parents(egraph)


def _check_classes(egraph: EGraph) -> None:
    seen = 0
    for eclass in egraph.classes():
        cid = eclass.id
        if egraph.find(cid) != cid:
            raise InvariantError(f"class #{cid} is not a root of the union-find")
        if len(set(eclass.nodes)) != len(eclass.nodes):
            raise InvariantError(f"class #{cid} holds a node twice")
        _check_stamps(eclass)
        for node in eclass.nodes:
            if egraph.canonical(node) != node:
                raise InvariantError(f"class #{cid}: {node} has non-canonical children")
            if egraph.lookup(node) != cid:
                raise InvariantError(f"class #{cid}: {node} is not in the hashcons under it")
        seen += len(eclass.nodes)
    if seen != egraph.node_count:
        raise InvariantError(f"node count {egraph.node_count} but classes hold {seen} nodes")
    roots = sum(1 for i in range(egraph.id_count) if egraph.find(i) == i)
    if roots != egraph.class_count:
        raise InvariantError(f"{roots} union-find roots but {egraph.class_count} classes")


def _check_stamps(eclass: EClass) -> None:
    if not len(eclass.nodes) == len(eclass.stamps) == len(eclass.forms):
        raise InvariantError(f"class #{eclass.id}: node and stamp lists differ in length")
    pairs = zip(eclass.stamps, eclass.forms, strict=True)
    if any(not form <= stamp <= eclass.stamp for stamp, form in pairs):
        raise InvariantError(f"class #{eclass.id}: a node stamp is out of order")
    if eclass.ops != {n.op for n in eclass.nodes}:
        raise InvariantError(f"class #{eclass.id}: its op set disagrees with its nodes")


def _check_index(egraph: EGraph) -> None:
    expected: dict[str, set[int]] = {}
    for eclass in egraph.classes():
        for node in eclass.nodes:
            expected.setdefault(node.op, set()).add(eclass.id)
    actual = {op: set(egraph.classes_with_op(op)) for op in egraph.ops()}
    if expected != actual:
        raise InvariantError("classes_with_op disagrees with the classes' nodes")


def _check_parents(egraph: EGraph) -> None:
    listed = {eclass.id: {(egraph.canonical(n), egraph.find(p)) for n, p in eclass.parents}
              for eclass in egraph.classes()}
    for eclass in egraph.classes():
        for node in eclass.nodes:
            for child in set(node.children):
                if (node, eclass.id) not in listed[child]:
                    raise InvariantError(f"{node} in #{eclass.id} missing from parents of "
                                         f"#{child}")
