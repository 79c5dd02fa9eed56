"""Multi-patterns: several roots joined on shared classes (egg's MultiPattern)."""

from __future__ import annotations

import pytest

from gerules.engine import EGraph, ENode, MultiPattern, PatternError, Rewrite, Runner, add_term
from gerules.engine import machine as machine_module
from gerules.engine.sexpr import parse_pattern

MATMULS = ["(MatMul ?x ?w1)", "(MatMul ?x ?w2)", "(MatMul ?x ?w3)"]


def multi(*texts: str, **options: object) -> MultiPattern:
    return MultiPattern([parse_pattern(t) for t in texts], **options)  # type: ignore[arg-type]


def roots(eg: EGraph, pattern: MultiPattern) -> list[tuple[int, ...]]:
    return [tuple(eg.find(m[r]) for r in pattern.layout.roots) for m in pattern.search(eg)]


def test_roots_join_on_the_shared_class() -> None:
    eg = EGraph()
    mm = [add_term(eg, f"(MatMul x w{k})") for k in range(3)]
    add_term(eg, "(MatMul y w0)")  # shares w0, not x: never joined with the others
    eg.rebuild()
    assert len(roots(eg, multi(*MATMULS))) == 6  # every order of the three
    assert roots(eg, multi(*MATMULS, ordered=True)) == [tuple(sorted(mm))]  # once per set
    pairs = roots(eg, multi(*MATMULS[:2], ordered=True))
    assert len(pairs) == 3 and all(len(set(p)) == 2 for p in pairs)


def test_the_join_searches_only_the_parents_of_the_shared_class(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A hundred unrelated MatMuls: the later roots are searched at the three parents of x."""
    eg = EGraph()
    for k in range(100):
        add_term(eg, f"(MatMul a{k} b{k})")
    for k in range(3):
        add_term(eg, f"(MatMul x w{k})")
    eg.rebuild()
    pattern = multi(*MATMULS, ordered=True)
    seen: list[int] = []
    real = machine_module.Pattern.search

    def counting(self, egraph, candidates=None, since=-1):  # noqa: ANN001, ANN202
        found = real(self, egraph, candidates, since)
        if candidates is not None:
            seen.append(len(list(candidates)))
        return found

    monkeypatch.setattr(machine_module.Pattern, "search", counting)
    assert len(pattern.search(eg)) == 1
    assert seen and max(seen) <= 3  # candidates are x's parents, never all 103 MatMuls


def test_shared_names_are_compared_and_commutative_paths_are_walked() -> None:
    eg = EGraph()
    add_term(eg, "(Mul w x)")
    add_term(eg, "(Mul x v)")
    eg.rebuild()
    pattern = multi("(Mul ?x ?a)", "(Mul ?x ?b)", commutative=("Mul",), ordered=True)
    assert len(roots(eg, pattern)) == 1
    pattern = multi("(Mul ?x ?a)", "(Mul ?x ?a)", commutative=("Mul",))
    assert roots(eg, pattern) == []  # a is w in one and v in the other


def test_a_rewrite_unions_each_root_with_its_right_side() -> None:
    eg = EGraph()
    mm = [add_term(eg, f"(MatMul x w{k})") for k in range(2)]
    eg.rebuild()

    def split(egraph: EGraph, root: int, subst: object) -> tuple[int, ...]:
        joined = egraph.add(ENode("Fused", (), tuple(egraph.find(m) for m in mm)))
        return tuple(egraph.add(ENode("Proj", (("index", k),), (joined,))) for k in range(2))

    rewrite = Rewrite("horizontal", multi(*MATMULS[:2], ordered=True), split)
    assert not rewrite.incremental and not rewrite.pure
    Runner(eg).run([rewrite])
    for k, m in enumerate(mm):
        assert any(n.op == "Proj" and n.get("index") == k for n in eg.nodes(m))


@pytest.mark.parametrize(("texts", "message"), [
    (["(MatMul ?x ?w)"], "two or more op patterns"),
    (["(MatMul ?x ?w)", "?x"], "two or more op patterns"),
    (["(MatMul ?x ?w)", "(MatMul ?y ?v)"], "shares no variable"),
    (["(Relu ?x :as r)", "(Tanh ?x :as r)"], "binder 'r' is used in two root patterns"),
])
def test_malformed_multi_patterns(texts: list[str], message: str) -> None:
    with pytest.raises(PatternError, match=message):
        multi(*texts)
