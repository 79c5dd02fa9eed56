"""E-graph core: hash-consing, deferred unions, congruence, invariants under random edits."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gerules.engine import EGraph, EngineError, ENode, InvariantError, add_term, enode, make_attrs
from gerules.engine.unionfind import UnionFind


def test_unionfind_roots_and_compression() -> None:
    uf = UnionFind()
    ids = [uf.make_set() for _ in range(6)]
    assert ids == list(range(6))
    assert uf.union(0, 1) == 0  # the first root stays the root, and is returned
    assert uf.union(2, 3) == 2
    assert uf.union(0, 2) == 0
    assert {uf.find(i) for i in range(4)} == {0}
    assert uf.find(5) == 5 and uf.is_root(5) and not uf.is_root(3)


def test_hashcons_shares_identical_nodes() -> None:
    eg = EGraph()
    first = add_term(eg, "(Add (Mul x y) (Mul x y))")
    assert add_term(eg, "(Add (Mul x y) (Mul x y))") == first
    assert eg.node_count == 4  # x, y, Mul, Add
    assert eg.nodes(first)[0].children[0] == eg.nodes(first)[0].children[1]


def test_attrs_are_sorted_and_part_of_identity() -> None:
    a = ENode("Conv", make_attrs({"pads": (1, 1), "group": 1}), (0,))
    assert a.attrs == (("group", 1), ("pads", (1, 1)))
    assert a.get("group") == 1 and a.get("missing", "d") == "d" and a.has("pads")
    eg = EGraph()
    x = eg.add(ENode("x"))
    g1 = eg.add(enode("Conv", x, group=1))
    g2 = eg.add(enode("Conv", x, group=2))
    assert g1 != g2
    with pytest.raises(ValueError, match="twice"):
        make_attrs([("a", 1), ("a", 2)])


def test_union_is_deferred_until_rebuild_restores_congruence() -> None:
    eg = EGraph()
    fx, fy = add_term(eg, "(f x)"), add_term(eg, "(f y)")
    x, y = add_term(eg, "x"), add_term(eg, "y")
    assert eg.union(x, y, "xy") is True
    assert eg.union(x, y, "again") is False
    assert eg.find(fx) != eg.find(fy) and not eg.is_clean
    assert eg.rebuild() == 1
    assert eg.find(fx) == eg.find(fy)
    eg.check_invariants()
    assert eg.node_count == 3  # x|y, and one f node after deduplication


def test_check_invariants_refuses_a_dirty_graph() -> None:
    eg = EGraph()
    eg.union(add_term(eg, "a"), add_term(eg, "b"))
    with pytest.raises(InvariantError, match="rebuild"):
        eg.check_invariants()


def test_lookup_and_classes_with_op() -> None:
    eg = EGraph()
    root = add_term(eg, "(Relu (Conv x w b))")
    conv = eg.lookup(ENode("Conv", (), (eg.find(add_term(eg, "x")), add_term(eg, "w"),
                                        add_term(eg, "b"))))
    assert conv is not None and eg.classes_with_op("Conv") == {conv}
    assert eg.classes_with_op("Nope") == set()
    assert eg.lookup(ENode("Relu", (), (root,))) is None


@pytest.mark.parametrize("children", [(99,), (-1,), ("a",)])
def test_bad_child_ids_are_engine_errors(children: Any) -> None:
    eg = EGraph()
    eg.add(ENode("x"))
    with pytest.raises(EngineError, match="not e-class ids"):
        eg.add(ENode("f", (), children))


def test_unhashable_attribute_is_an_engine_error() -> None:
    with pytest.raises(EngineError, match="not hashable"):
        EGraph().add(ENode("Const", (("value", [1, 2]),), ()))  # type: ignore[arg-type]


def test_changed_since_tracks_stamps() -> None:
    eg = EGraph()
    a, b = add_term(eg, "a"), add_term(eg, "b")
    tick = eg.tick()
    assert eg.changed_since(tick) == []
    c = add_term(eg, "c")
    assert eg.changed_since(tick) == [c]
    eg.union(a, b)
    eg.rebuild()
    assert set(eg.changed_since(tick)) == {c, eg.find(a)}


# ----------------------------------------------------------------- hypothesis
OPS = {"a": 0, "b": 0, "c": 0, "f": 1, "g": 1, "h": 2}


class SizeAnalysis:
    """Smallest term size per class: make = 1 + sum, merge = min (a lattice, with cycles)."""

    name = "size"

    def make(self, egraph: EGraph, node: ENode) -> int:
        return 1 + sum(egraph.data(c, "size") for c in node.children)

    def merge(self, a: int, b: int) -> tuple[int, bool, bool]:
        return min(a, b), b < a, a < b

    def modify(self, egraph: EGraph, class_id: int) -> None:
        return None


def _reference_partition(terms: list[tuple[str, tuple[int, ...]]],
                         unions: list[tuple[int, int]]) -> list[int]:
    """Naive congruence closure over term indices (the oracle)."""
    parent = list(range(len(terms)))

    def find(i: int) -> int:
        while parent[i] != i:
            i = parent[i]
        return i

    for i, j in unions:
        parent[find(i)] = find(j)
    changed = True
    while changed:
        changed = False
        seen: dict[tuple[str, tuple[int, ...]], int] = {}
        for k, (op, kids) in enumerate(terms):
            key = (op, tuple(find(c) for c in kids))
            other = seen.setdefault(key, k)
            if find(other) != find(k):
                parent[find(other)] = find(k)
                changed = True
    return [find(k) for k in range(len(terms))]


@given(st.data())
def test_random_edits_keep_invariants_and_match_congruence_closure(data: st.DataObject) -> None:
    eg = EGraph([SizeAnalysis()])
    terms: list[tuple[str, tuple[int, ...]]] = []
    ids: list[int] = []
    unions: list[tuple[int, int]] = []
    for _ in range(data.draw(st.integers(1, 30), label="steps")):
        kind = data.draw(st.sampled_from(["add", "add", "union", "rebuild"]))
        if kind == "add":
            op = data.draw(st.sampled_from([o for o, n in OPS.items() if n == 0 or terms]))
            kids = tuple(data.draw(st.integers(0, len(terms) - 1)) for _ in range(OPS[op]))
            terms.append((op, kids))
            ids.append(eg.add(ENode(op, (), tuple(ids[k] for k in kids))))
        elif kind == "union" and terms:
            i, j = (data.draw(st.integers(0, len(terms) - 1)) for _ in range(2))
            unions.append((i, j))
            eg.union(ids[i], ids[j], "random")
        else:
            eg.rebuild()
            eg.check_invariants()
    eg.rebuild()
    eg.check_invariants()
    ref = _reference_partition(terms, unions)
    for i in range(len(terms)):
        for j in range(len(terms)):
            assert (ref[i] == ref[j]) == (eg.find(ids[i]) == eg.find(ids[j]))
    for eclass in eg.classes():  # the analysis reached its fixpoint
        best = min(1 + sum(eg.data(c) for c in n.children) for n in eclass.nodes)
        assert eg.data(eclass.id) == best
