"""``@example(x: f32[2, 4], c = 0.5)``: author examples are checked with the rule (they name
its variables), and ``show`` quotes guards back as rule text."""

from __future__ import annotations

import pytest

from gerules.dsl import RuleLibrary, ast, build_library, parse_text
from gerules.dsl.show import show
from gerules.ir.graph import TensorType


def built(text: str):  # noqa: ANN201 - a dsl.Built
    return build_library(RuleLibrary((parse_text("ruleset s\n" + text, "t.ger"),)),
                         soundness=False)


def test_examples_are_resolved_per_variable() -> None:
    lib = built("@example(x: f16[2, 4], c = 0.5)\n@example(x: f32[3])\n"
                "rule r: Mul(x, c) {} where const(c) => x\n")
    assert lib.errors == []
    (rule,) = lib.program.rules
    assert rule.examples == ({"x": TensorType("float16", (2, 4)), "c": 0.5},
                             {"x": TensorType("float32", (3,))})


@pytest.mark.parametrize(("decorator", "message", "col"), [
    ("@example(z: f32[2])", "@example: 'z' is not a variable of the left side", 10),
    ("@example(x: q32[2])", "@example: unknown element type 'q32'", 10),
    ("@example(xx = 1)", "'xx' is not a variable of the left side (did you mean x?)", 10),
    ("@example(x = c)", "@example: a value is a literal", 14),
    ("@example(2)", "@example names its variables", 10),
    ("@exact(x: f32[2])", "@exact takes no typed arguments", 8),
])
def test_example_mistakes_are_placed(decorator: str, message: str, col: int) -> None:
    lib = built(f"{decorator}\nrule r: Relu(x) => x\n")
    found = [(e.message, e.span.col) for e in lib.errors]
    assert any(message in m and c == col for m, c in found), found


@pytest.mark.parametrize("text", [
    "all(e1 == s2) and p[q] == iota(6)",
    "(a + b) * c == -d ** 2",
    "not x in (1, 2) or shape(y)[-1] % 16 == 0",
    "not (a or b) and (-a) ** 2 == 2 ** -a",
    "a - (b - c) == n.axis and approx(v, sqrt(2 / pi), rtol=0.001)",
    "s[1:] == [2, 3] and 0 not in shape(y)",
])
def test_show_gives_back_the_rule_text(text: str) -> None:
    assert show(guard(text)) == text


def guard(text: str) -> ast.Expr:
    rule = parse_text(f"ruleset s\nrule r: Relu(x) where {text} => x\n", "t.ger").rules[0]
    (clause,) = rule.clauses
    assert isinstance(clause, ast.Where)
    return clause.expr
