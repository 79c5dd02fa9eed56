"""egg-style goal tests: from a start term, the given rules reach a goal term."""

from __future__ import annotations

from collections.abc import Sequence

from gerules.engine import (
    EGraph,
    ENode,
    Guard,
    Let,
    Limits,
    POp,
    Rewrite,
    Runner,
    StopReason,
    Subst,
    Var,
    add_term,
    birewrite,
    extract,
    parse_pattern,
    rewrite,
)


def lookup_term(eg: EGraph, text: str) -> int | None:
    """The class of a term *without adding it* (None when some subterm is absent)."""

    def look(node: object) -> int | None:
        assert isinstance(node, POp)
        kids = [look(child) for child in node.children]
        if any(k is None for k in kids):
            return None
        return eg.lookup(ENode(node.op, node.attrs, tuple(k for k in kids if k is not None)))

    return look(parse_pattern(text))


def reaches(start: str, goal: str, rules: Sequence[Rewrite], limits: Limits | None = None) -> bool:
    eg = EGraph()
    root = add_term(eg, start)
    Runner(eg, limits=limits or Limits(iterations=20, nodes=20_000)).run(rules)
    found = lookup_term(eg, goal)
    return found is not None and eg.find(found) == eg.find(root)


# ------------------------------------------------------------------ arithmetic
def _literal(eg: EGraph, cid: int) -> float | None:
    for node in eg.nodes(cid):
        try:
            return float(node.op)
        except ValueError:
            continue
    return None


ARITH = [
    rewrite("comm_add", "(Add ?a ?b)", "(Add ?b ?a)"),
    rewrite("comm_mul", "(Mul ?a ?b)", "(Mul ?b ?a)"),
    rewrite("add_zero", "(Add ?a 0)", "?a"),
    rewrite("mul_one", "(Mul ?a 1)", "?a"),
    rewrite("factor", "(Add (Mul ?a ?b) (Mul ?a ?c))", "(Mul ?a (Add ?b ?c))"),
    rewrite("div_assoc", "(Div (Mul ?a ?b) ?c)", "(Mul ?a (Div ?b ?c))"),
    rewrite("div_self", "(Div ?a ?a)", "1", conditions=[
        Guard("a != 0", lambda eg, root, s: _literal(eg, s["a"]) not in (None, 0.0))]),
]


def test_arithmetic_identities() -> None:
    assert reaches("(Mul (Add a 0) 1)", "a", ARITH)
    assert reaches("(Add (Mul x y) (Mul x z))", "(Mul x (Add y z))", ARITH)


def test_division_needs_its_guard() -> None:
    assert reaches("(Div (Mul a 2) 2)", "a", ARITH)
    assert not reaches("(Div (Mul a z) z)", "a", ARITH)  # z may be 0: the guard refuses


# -------------------------------------------------------------- tensor language
def _compose(p: tuple[int, ...], q: tuple[int, ...]) -> tuple[int, ...]:
    """Transpose(Transpose(x, p), q) == Transpose(x, r) with r[i] = p[q[i]]."""
    return tuple(p[i] for i in q)


def _perm(s: Subst) -> tuple[int, ...]:
    return _compose(s["p"], s["q"])


TENSOR = [
    rewrite("cancel_transposes", "(Transpose (Transpose ?x :perm ?p) :perm ?q)", "?x",
            conditions=[Guard("p[q] is the identity",
                              lambda eg, root, s: _perm(s) == tuple(range(len(_perm(s)))))]),
    rewrite("merge_transposes", "(Transpose (Transpose ?x :perm ?p) :perm ?q)",
            "(Transpose ?x :perm ?r)", conditions=[
                Guard("p[q] is not the identity",
                      lambda eg, root, s: _perm(s) != tuple(range(len(_perm(s))))),
                Let("r", lambda eg, root, s: _perm(s))]),
    *birewrite("matmul_assoc", "(MatMul (MatMul ?a ?b) ?c)", "(MatMul ?a (MatMul ?b ?c))"),
]


def test_transpose_cancellation_and_merging() -> None:
    assert reaches("(Relu (Transpose (Transpose x :perm [1 0 2]) :perm [1 0 2]))",
                   "(Relu x)", TENSOR)
    assert reaches("(Transpose (Transpose x :perm [1 2 0]) :perm [1 2 0])",
                   "(Transpose x :perm [2 0 1])", TENSOR)
    assert reaches("(Transpose (Transpose (Transpose x :perm [1 2 0]) :perm [1 2 0]) "
                   ":perm [1 2 0])", "x", TENSOR)


def test_matmul_associativity_both_ways() -> None:
    assert reaches("(MatMul (MatMul (MatMul a b) c) d)", "(MatMul a (MatMul b (MatMul c d)))",
                   TENSOR)
    assert reaches("(MatMul a (MatMul b (MatMul c d)))", "(MatMul (MatMul a b) (MatMul c d))",
                   TENSOR)


FUSE = [
    Rewrite(
        "fold_conv_bn",
        parse_pattern("(BatchNormalization (Conv ?x ?w ?b :as conv) ?g ?beta ?m ?v :as bn)"),
        parse_pattern("(Conv ?x (FoldW ?w ?g ?v :eps ?eps) (FoldB ?b ?g ?beta ?m ?v :eps ?eps) "
                      ":copy conv)"),
        conditions=[Let("eps", lambda eg, root, s: s.node("bn").get("epsilon", 1e-5))],
    ),
    rewrite("fuse_conv_relu", "(Relu (Conv ?x ?w ?b :as conv))",
            POp("ge.FusedConv", (Var("x"), Var("w"), Var("b")), (("activation", "Relu"),),
                copy="conv")),
]


def _npu_cost(eg: EGraph, cid: int, node: ENode) -> float:
    return {"Conv": 10.0, "BatchNormalization": 5.0, "Relu": 5.0, "ge.FusedConv": 10.0,
            "FoldW": 0.0, "FoldB": 0.0}.get(node.op, 1.0)


def test_conv_bn_relu_becomes_one_fused_conv() -> None:
    eg = EGraph()
    start = "(Relu (BatchNormalization (Conv x w b :group 1 :pads [1 1 1 1]) g beta m v " \
            ":epsilon 0.001))"
    root = add_term(eg, start)
    report = Runner(eg).run(FUSE)
    assert report.stop_reason is StopReason.SATURATED
    goal = ("(ge.FusedConv x (FoldW w g v :eps 0.001) (FoldB b g beta m v :eps 0.001) "
            ":activation Relu :group 1 :pads [1 1 1 1])")
    found = lookup_term(eg, goal)
    assert found is not None and eg.find(found) == eg.find(root)
    best = extract(eg, root, _npu_cost)
    assert best.choices[eg.find(root)].op == "ge.FusedConv"
    assert best.cost == 10.0 + 7 * 1.0  # fused conv, x w b g beta m v leaves, free folds
