"""The checker: scoping, opset versions, and the shape/dtype soundness check."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from gerules.dsl import RuleError, check_library, parse_text
from gerules.dsl.loader import RuleLibrary


def errors(text: str, soundness: bool = True) -> list[str]:
    lib = RuleLibrary((parse_text("ruleset s\n" + text, "t.ger"),))
    return [e.message for e in check_library(lib, soundness=soundness)]


def test_clean_rule_has_no_errors() -> None:
    assert errors("rule r: Relu(Relu(x)) => Relu(x)") == []


def test_pattern_ops_match_any_opset_version() -> None:
    # ReduceMean takes axes as an attribute before opset 18 and as an input from 18 on
    assert errors("rule a: ReduceMean(x) {axes = [-1]} as m => m") == []
    assert errors("rule b: ReduceMean(x, [-1]) as m => m") == []
    assert errors("rule c: ReduceMean(x) {axis = [-1]} as m => m") == [
        "ReduceMean has no attribute 'axis' (did you mean axes?)"]


def test_lets_run_in_order_and_are_visible_on_the_right() -> None:
    assert errors("rule r: Mul(x, c) where const(c) let k = c * 2 => Mul(x, k)",
                  soundness=False) == []
    assert errors("rule r: Mul(x, c) where k > 0 let k = 2 => x") == [
        "unknown name 'k' in a where clause"]


def test_clauses_after_the_right_side() -> None:
    assert errors("rule r: Transpose(x) {perm = p} => x where p == iota(len(p))") == []


def test_binder_is_also_a_tensor_variable() -> None:
    text = ("rule r: Div(Sub(x, ReduceMean(x) {axes = [-1]}) as d, Pow(d, 2)) as y "
            "where shape(y) == shape(d) => d")
    assert errors(text) == []


def test_binder_attribute_reads_use_schema_defaults() -> None:
    assert errors("rule r: BatchNormalization(x, g, b, m, v) as bn where bn.epsilon > 0 => x",
                  soundness=False) == []


def test_attribute_variables_and_tensor_variables_stay_apart() -> None:
    assert errors("rule r: Transpose(x) {perm = x} => x") == [
        "'x' is a tensor variable; an attribute variable needs its own name"]


def test_none_marks_only_optional_inputs() -> None:
    assert errors("rule r: ge.FusedConv(x, w, none, z) as f => f") == []
    assert errors("rule r: Conv(none, w) => w")[0].startswith(
        "input 0 (X) of Conv is required")


def test_right_side_literal_and_computed_inputs() -> None:
    assert errors("rule r: Pow(x, 3) as y where shape(y) == shape(x) => Mul(x, Mul(x, x))") == []
    assert errors("rule r: Relu(x) => Relu(x) {alpha = 1}") == [
        "Relu has no attribute 'alpha'"]


def test_builtin_arity_and_keywords() -> None:
    assert errors("rule r: Relu(x) where rank(x, x) == 1 => x") == [
        "rank(x) takes 1 argument, got 2"]
    assert errors("rule r: Relu(x) where approx(1, 1, tol=1) => x") == [
        "approx(a, b, rtol=1e-05, atol=1e-08) has no argument 'tol' (did you mean rtol?)"]


def test_commutative_declaration_names_real_commutative_ops() -> None:
    lib = RuleLibrary((parse_text("commutative Add, Mul, Equal, Max\n", "c.ger"),))
    assert check_library(lib) == []
    lib = RuleLibrary((parse_text("commutative Div\n", "c.ger"),))
    assert [e.message for e in check_library(lib)] == [
        "Div is not commutative (the op registry does not mark it so)"]


def test_bidirectional_rules_check_both_sides() -> None:
    assert errors("rule r: Relu(Neg(x)) <=> Neg(Relu(x))") == []
    assert errors("rule r: Relu(x) <=> Neg(x) let k = 1") == [
        "a '<=>' rule cannot have let clauses"]


@pytest.mark.parametrize("rule", [
    "rule r: Transpose(Transpose(x) {perm = p}) {perm = q} => Transpose(x) {perm = p[q]}",
    "rule r: Mul(x, 1) as y where shape(y) == shape(x) => x",
    "rule r: Add(x, Neg(y)) => Sub(x, y)",
    "rule r: Relu(Conv(x, w, b) as c) => ge.FusedConv(x, w, b) {..c, activation = \"Relu\"}",
    "rule r: Shape(x) as s where static(shape(x)) and s.start == 0 => shape(x)",
])
def test_sound_rules_pass(rule: str) -> None:
    assert errors(rule) == []


def _dims(text: str) -> list[int]:
    return [int(d) for d in text.split("[", 1)[1].split("]", 1)[0].split(",") if d]


@pytest.mark.parametrize(("rule", "left", "right", "relation"), [
    ("rule r: Transpose(x) {perm = [1, 0]} => x where rank(x) == 2", "float32[", "float32[",
     lambda a, b: a == b[::-1]),
    ("rule r: Transpose(Transpose(x) {perm = p}) {perm = q} => Transpose(x) {perm = q[p]}",
     "float32[", "float32[", lambda a, b: sorted(a) == sorted(b)),
    ("rule r: Mul(x, 1) => x", "float32[", "float32[",
     lambda a, b: list(np.broadcast_shapes(a, b)) == a),
    ("rule r: ReduceSum(x, [0]) => x", "float32[", "float32[", None),
    ("rule r: Cast(x) {to = f16} => x", "float16", "float32", None),
    ("rule r: Shape(x) => shape(x)[1:]", "int64[", "int64[", lambda a, b: a[0] == b[0] + 1),
    ("rule r: Neg(x) <=> Neg(Expand(x, [2, 1, 1, 1]))", "float32[", "float32[", None),
])
def test_unsound_rules_are_reported_with_both_types(rule: str, left: str, right: str,
                                                    relation: Any) -> None:
    """The witness is an instance of the left side on which both sides' types differ."""
    (message,) = errors(rule)
    assert message.startswith("rule is shape-unsound: the left side is ")
    lhs, rhs = message.split(" but the right side is ")
    assert left in lhs and right in rhs and " (when x: " in rhs
    a, b = lhs.rsplit(" ", 1)[1], rhs.split(" ", 1)[0]
    assert a != b
    assert relation is None or relation(_dims(a), _dims(b)), message


def test_soundness_can_be_skipped() -> None:
    assert errors("rule r: Mul(x, 1) => x", soundness=False) == []


def test_rule_error_is_a_ge_error_with_one_line() -> None:
    from gerules.errors import GeError

    with pytest.raises(RuleError) as info:
        parse_text("rule r: Relu(x) =>", "e.ger")
    assert isinstance(info.value, GeError) and info.value.exit_code == 1
    assert str(info.value) == "e.ger:1:19: unexpected end of file; expected an expression"
