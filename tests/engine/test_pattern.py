"""The pattern language and the compiled matcher."""

from __future__ import annotations

import pytest

from gerules.engine import (
    WILDCARD,
    AttrVar,
    EGraph,
    ENode,
    Pattern,
    PatternError,
    POp,
    Var,
    add_term,
    parse_pattern,
)
from gerules.engine.sexpr import read


def search(eg: EGraph, text: str, commutative: tuple[str, ...] = ()) -> list[dict[str, object]]:
    pattern = Pattern(parse_pattern(text), commutative)
    return [dict(pattern.subst(m)) for m in pattern.search(eg)]


def test_repeated_variable_means_same_class() -> None:
    eg = EGraph()
    same, diff = add_term(eg, "(Sub a a)"), add_term(eg, "(Sub a b)")
    assert [m["x"] for m in search(eg, "(Sub ?x ?x)")] == [eg.find(add_term(eg, "a"))]
    eg.union(add_term(eg, "a"), add_term(eg, "b"))
    eg.rebuild()
    assert eg.find(same) == eg.find(diff)
    assert len(search(eg, "(Sub ?x ?x)")) == 1


def test_arity_must_match_exactly() -> None:
    eg = EGraph()
    add_term(eg, "(Conv x w b)")
    assert search(eg, "(Conv ?x ?w)") == []
    assert len(search(eg, "(Conv ?x ?w ?b)")) == 1
    assert len(search(eg, "(Conv _ _ _)")) == 1


def test_attribute_constants_variables_and_missing_attributes() -> None:
    eg = EGraph()
    add_term(eg, "(Transpose (Transpose x :perm [1 0]) :perm [1 0])")
    add_term(eg, "(Transpose (Transpose x :perm [1 0 2]) :perm [0 2 1])")
    add_term(eg, "(Transpose y)")
    assert len(search(eg, "(Transpose ?x :perm [1 0])")) == 2
    both = search(eg, "(Transpose (Transpose ?x :perm ?p) :perm ?p)")
    assert [m["p"] for m in both] == [(1, 0)]
    assert len(search(eg, "(Transpose (Transpose ?x :perm ?p) :perm ?q)")) == 2
    assert len(search(eg, "(Transpose ?x :perm ?p)")) == 4  # the bare Transpose has no perm


def test_binder_records_node_and_acts_as_class_variable() -> None:
    eg = EGraph()
    root = add_term(eg, "(Relu (Conv x w b :group 1))")
    pattern = Pattern(parse_pattern("(Relu (Conv ?x ?w ?b :as conv))"))
    (match,) = pattern.search(eg)
    subst = pattern.subst(match)
    assert subst.node("conv").op == "Conv" and subst.node("conv").get("group") == 1
    assert subst["conv"] == eg.nodes(root)[0].children[0]
    assert subst.root == root
    with pytest.raises(PatternError, match="not a node binder"):
        subst.node("x")


def test_dag_pattern_layer_norm_shape() -> None:
    """``Sub(x, ReduceMean(x)) as d`` used again as ``d``: a multi-node DAG pattern."""
    eg = EGraph()
    norm = "(Div (Sub x (ReduceMean x)) (Sqrt (ReduceMean (Pow (Sub {v} (ReduceMean {v})) 2))))"
    good = add_term(eg, norm.format(v="x"))
    add_term(eg, norm.format(v="y"))
    text = "(Div (Sub ?x (ReduceMean ?x) :as d) (Sqrt (ReduceMean (Pow ?d 2))))"
    matches = search(eg, text)
    assert len(matches) == 1 and matches[0]["x"] == eg.find(add_term(eg, "x"))
    assert Pattern(parse_pattern(text)).search(eg)[0][0] == good


def test_commutative_ops_match_both_orders_once() -> None:
    eg = EGraph()
    add_term(eg, "(Add (Mul a b) c)")
    add_term(eg, "(Add c (Mul a b))")
    add_term(eg, "(Add d d)")
    assert len(search(eg, "(Add (Mul ?x ?y) ?z)")) == 1
    assert len(search(eg, "(Add (Mul ?x ?y) ?z)", ("Add",))) == 2
    matches = Pattern(parse_pattern("(Add ?x ?y)"), ("Add",)).search(eg)
    assert len(matches) == 5  # two orders for each mixed Add, one for Add(d, d)
    assert len(set(matches)) == 5


def test_wildcard_root_and_variable_root() -> None:
    eg = EGraph()
    add_term(eg, "(f a)")
    assert len(Pattern(WILDCARD).search(eg)) == eg.class_count
    assert len(search(eg, "?x")) == 2


def test_semi_naive_search_keeps_only_matches_with_fresh_nodes() -> None:
    eg = EGraph()
    add_term(eg, "(f (g a))")
    pattern = Pattern(parse_pattern("(f (g ?x))"))
    tick = eg.tick()
    assert pattern.search(eg, since=tick) == []
    add_term(eg, "(f (g b))")
    fresh = pattern.search(eg, since=tick)
    assert [pattern.subst(m)["x"] for m in fresh] == [add_term(eg, "b")]
    assert len(pattern.search(eg)) == 2
    eg.union(add_term(eg, "(g a)"), add_term(eg, "(h c)"))  # moving nodes makes them fresh
    eg.rebuild()
    tick = eg.tick()
    eg.union(add_term(eg, "(g a)"), add_term(eg, "(g b)"))
    eg.rebuild()
    assert len(pattern.search(eg, since=tick)) >= 1


def test_candidates_restrict_roots() -> None:
    eg = EGraph()
    one, two = add_term(eg, "(f a)"), add_term(eg, "(f b)")
    pattern = Pattern(parse_pattern("(f ?x)"))
    assert [m[0] for m in pattern.search(eg, [two, add_term(eg, "a")])] == [two]
    assert {m[0] for m in pattern.search(eg)} == {one, two}


def test_pattern_errors() -> None:
    with pytest.raises(PatternError, match="both for classes and attributes"):
        Pattern(POp("f", (Var("p"),), (("k", AttrVar("p")),)))
    with pytest.raises(PatternError, match="two nodes"):
        Pattern(parse_pattern("(f (g ?x :as n) (g ?y :as n))"))
    with pytest.raises(PatternError, match="appliers"):
        Pattern(parse_pattern("(f ?x :copy n)"))


def test_height() -> None:
    assert Pattern(parse_pattern("?x")).height == 1
    assert Pattern(parse_pattern("(f ?x)")).height == 2
    assert Pattern(parse_pattern("(f (g ?x) a)")).height == 3


@pytest.mark.parametrize("text", ["(f", "(f))", "(f :k)", "", "(f ]", "([1] a)", '(f "x'])
def test_bad_sexpr_is_a_pattern_error(text: str) -> None:
    with pytest.raises(PatternError):
        parse_pattern(text)


def test_sexpr_values() -> None:
    assert read('(f "a b" [1 2])') == ["f", '"a b"', ["[", "1", "2"]]
    node = parse_pattern('(Cast ?x :to "float16" :alpha 0.5 :axes [0 1] :mode linear)')
    assert isinstance(node, POp)
    assert dict(node.attrs) == {"to": "float16", "alpha": 0.5, "axes": (0, 1), "mode": "linear"}
    assert ENode("Cast", node.attrs, (0,)).get("axes") == (0, 1)


def test_the_search_code_is_generated_only_once_a_root_exists(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from gerules.engine import machine

    built: list[int] = []
    real = machine._Codegen.build
    monkeypatch.setattr(machine._Codegen, "build", lambda self: built.append(1) or real(self))
    eg = EGraph()
    add_term(eg, "(Add a b)")
    pattern = Pattern(parse_pattern("(Mul ?x ?y)"))
    assert pattern.search(eg) == [] and built == []  # no Mul anywhere: nothing generated
    add_term(eg, "(Mul a b)")
    assert len(pattern.search(eg)) == 1 and len(pattern.search(eg)) == 1 and built == [1]
