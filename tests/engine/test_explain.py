"""Explanations: the chain of rules (and congruences) that made two classes equal."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gerules.engine import EGraph, EngineError, Runner, add_term, rewrite


def test_chain_of_rule_steps() -> None:
    eg = EGraph()
    a, b, c, d = (add_term(eg, t) for t in "abcd")
    eg.union(a, b, "r1")
    eg.union(c, d, "r3")
    eg.union(b, c, "r2")
    eg.rebuild()
    proof = eg.explain(a, d)
    assert proof.rules() == ["r1", "r2", "r3"]
    assert [(s.left, s.right) for s in proof.steps] == [(a, b), (b, c), (c, d)]
    assert eg.explain(d, a).rules() == ["r3", "r2", "r1"]
    assert eg.explain(a, a).steps == ()
    assert "by r2" in str(proof)


def test_congruence_steps_explain_their_children() -> None:
    eg = EGraph()
    fx, fy = add_term(eg, "(f x)"), add_term(eg, "(f y)")
    eg.union(add_term(eg, "x"), add_term(eg, "y"), "x_is_y")
    eg.rebuild()
    proof = eg.explain(fx, fy)
    (step,) = proof.steps
    assert step.is_congruence and proof.rules() == ["x_is_y"]
    assert [s.reason for s in proof.walk()] == ["congruence", "x_is_y"]


def test_explain_after_a_run_names_the_rules() -> None:
    eg = EGraph()
    start = add_term(eg, "(Mul (Add a 0) 1)")
    goal = add_term(eg, "a")
    Runner(eg).run([rewrite("add_zero", "(Add ?x 0)", "?x"),
                    rewrite("mul_one", "(Mul ?x 1)", "?x")])
    assert sorted(eg.explain(start, goal).rules()) == ["add_zero", "mul_one"]


def test_explain_errors() -> None:
    eg = EGraph()
    a, b = add_term(eg, "a"), add_term(eg, "b")
    with pytest.raises(EngineError, match="not equal"):
        eg.explain(a, b)
    off = EGraph(explanations=False)
    x = add_term(off, "x")
    with pytest.raises(EngineError, match="explanations are off"):
        off.explain(x, x)


@given(st.lists(st.tuples(st.integers(0, 9), st.integers(0, 9)), max_size=25))
def test_random_unions_always_have_a_connected_proof(pairs: list[tuple[int, int]]) -> None:
    eg = EGraph()
    ids = [add_term(eg, f"leaf{i}") for i in range(10)]
    made = set()
    for k, (i, j) in enumerate(pairs):
        if eg.union(ids[i], ids[j], f"u{k}"):
            made.add(f"u{k}")
    eg.rebuild()
    for a in ids:
        for b in ids:
            if eg.find(a) != eg.find(b):
                continue
            proof = eg.explain(a, b)
            ends = [a] + [s.right for s in proof.steps]
            assert ends[-1] == b
            assert all(s.left == ends[i] for i, s in enumerate(proof.steps))
            assert set(proof.rules()) <= made
            assert len(proof.steps) == len({frozenset((s.left, s.right)) for s in proof.steps})
