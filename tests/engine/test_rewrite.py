"""Rewrites: conditions in order, custom appliers, attribute copying, bidirectional rules."""

from __future__ import annotations

import pytest

from gerules.engine import (
    EGraph,
    EngineError,
    ENode,
    Guard,
    Let,
    Limits,
    PatternError,
    Reject,
    Rewrite,
    Runner,
    Subst,
    add_term,
    birewrite,
    parse_pattern,
    rewrite,
)


def test_lets_feed_later_guards_and_the_applier() -> None:
    eg = EGraph()
    root = add_term(eg, "(Scale x :k 3)")
    rule = rewrite(
        "double_scale", "(Scale ?x :k ?k)", "(Scale ?x :k ?k2)",
        conditions=[Let("k2", lambda eg, r, s: s["k"] * 2),
                    Guard("k2 < 10", lambda eg, r, s: s["k2"] < 10)])
    report = Runner(eg).run([rule])
    assert add_term(eg, "(Scale x :k 6)") == eg.find(root)
    assert report.rules["double_scale"].rejected == {"k2 < 10": 1}  # k=6 would give 12
    assert eg.lookup(ENode("Scale", (("k", 12),), (add_term(eg, "x"),))) is None


def test_let_may_reject_with_its_own_reason() -> None:
    eg = EGraph()
    add_term(eg, "(f a)")
    rule = rewrite("r", "(f ?x)", "(g ?x ?y)",
                   conditions=[Let("y", lambda eg, r, s: Reject("no y for this x"))])
    assert Runner(eg).run([rule]).rejected() == {"r": {"no y for this x": 1}}


def test_custom_applier_adds_nodes_and_returns_classes() -> None:
    eg = EGraph()
    root = add_term(eg, "(Split x :parts 2)")

    def unpack(egraph: EGraph, root_id: int, subst: Subst) -> list[int]:
        parts = subst.node("s").get("parts")
        tup = egraph.add(ENode("Tuple", (), tuple(
            egraph.add(ENode("Slice", (("index", i),), (subst["x"],))) for i in range(parts))))
        return [tup]

    rule = Rewrite("unpack_split", parse_pattern("(Split ?x :as s)"), unpack)
    Runner(eg).run([rule])
    assert {n.op for n in eg.nodes(root)} == {"Split", "Tuple"}


def test_copy_attributes_with_overrides() -> None:
    eg = EGraph()
    root = add_term(eg, "(Relu (Conv x w :group 2 :pads [1 1]))")
    rule = rewrite("fuse", "(Relu (Conv ?x ?w :as c))", "(FusedConv ?x ?w :copy c :group 4)")
    Runner(eg).run([rule])
    fused = next(n for n in eg.nodes(root) if n.op == "FusedConv")
    assert fused.attrs == (("group", 4), ("pads", (1, 1)))


def test_birewrite_builds_two_named_rewrites() -> None:
    fwd, back = birewrite("assoc", "(M (M ?a ?b) ?c)", "(M ?a (M ?b ?c))")
    assert (fwd.name, back.name) == ("assoc", "assoc/rev")
    eg = EGraph()
    root = add_term(eg, "(M a (M b c))")
    Runner(eg).run([fwd, back])
    assert add_term(eg, "(M (M a b) c)") == eg.find(root)


def test_commutative_declaration_applies_to_searchers() -> None:
    eg = EGraph()
    root = add_term(eg, "(Add (Mul a b) c)")
    rule = rewrite("fma", "(Add ?z (Mul ?x ?y))", "(Fma ?x ?y ?z)", commutative=["Add"])
    Runner(eg).run([rule])
    assert add_term(eg, "(Fma a b c)") == eg.find(root)


def test_rewrite_construction_errors() -> None:
    with pytest.raises(PatternError, match=r"unbound \['y'\]"):
        rewrite("bad", "(f ?x)", "(g ?y)")
    with pytest.raises(PatternError, match="wildcard"):
        rewrite("bad", "(f ?x)", "(g _)")
    with pytest.raises(PatternError, match="binds nodes in patterns"):
        rewrite("bad", "(f ?x)", "(g ?x :as n)")
    with pytest.raises(PatternError, match="pattern or a callable"):
        Rewrite("bad", parse_pattern("(f ?x)"), 3)  # type: ignore[arg-type]
    assert rewrite("ok", "(f ?x)", "(g ?x ?y)", conditions=[Let("y", lambda e, r, s: 1)])


def test_unbound_name_in_a_custom_condition_rule_fails_at_apply() -> None:
    eg = EGraph()
    add_term(eg, "(f a)")
    rule = rewrite("late", "(f ?x)", "(g ?y)", conditions=[lambda eg, r, s: s])
    with pytest.raises(EngineError, match="rule 'late': applier read unbound name 'y'"):
        Runner(eg).run([rule])


def test_a_conditional_match_is_checked_until_applied_then_skipped() -> None:
    """Conditions run on a match until it is applied; afterwards a later iteration that finds
    the same match (the same canonical classes, nodes and attributes) skips it, its right side
    being in the root's class already. A rejected match is checked again (the e-graph may
    have grown what the condition reads)."""
    eg = EGraph()
    root = add_term(eg, "(f a)")
    a = add_term(eg, "a")
    checks: dict[int, int] = {}

    def guard(egraph: EGraph, r: int, s: Subst) -> bool:
        x = egraph.find(s["x"])
        checks[x] = checks.get(x, 0) + 1
        return checks[x] > 1  # refuses each match the first time it is asked only

    fold = rewrite("f_to_g", "(f ?x)", "(g ?x)", conditions=[Guard("second time", guard)])
    grow = rewrite("grow", "(f ?x)", "(f (s ?x))")  # a new f node in the root's class each
    report = Runner(eg, limits=Limits(iterations=6)).run([fold, grow])  # iteration
    assert len(report.iterations) >= 5  # (f a) was found in every one of them
    assert checks[eg.find(a)] == 2  # rejected, applied, then skipped
    assert add_term(eg, "(g a)") == eg.find(root)
    match = next(m for m in fold.search(eg) if eg.find(m[fold.layout.slots["x"]]) == eg.find(a))
    assert fold.apply_match(eg, match) is False and checks[eg.find(a)] == 2
