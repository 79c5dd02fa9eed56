"""Deliberately wrong rules are caught with a counterexample that shows the graph, the input
shapes and the error; a rule whose guard never holds is reported; right rules pass."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gerules.dsl import load_compiled
from gerules.dsl.compile import CompiledRules
from gerules.verify import (
    COUNTEREXAMPLE,
    NO_INSTANCE,
    VERIFIED,
    RuleResult,
    Settings,
    verify_rule,
)

WRONG = Path(__file__).parent / "fixtures" / "wrong.ger"


@pytest.fixture(scope="module")
def results() -> dict[str, RuleResult]:
    rules: CompiledRules = load_compiled([WRONG], soundness=False)
    return {r.name: verify_rule(r, Settings(examples=6)) for r in rules.rules}


def test_swapped_matmul_operands(results: dict[str, RuleResult]) -> None:
    r = results["swap_matmul"]
    assert r.status == COUNTEREXAMPLE
    assert "left side:" in r.detail and re.search(r"= MatMul\(a, b\)", r.detail)
    assert re.search(r"inputs: a: float\d+\[[\d, ]+\][^,]*, b: float\d+\[[\d, ]+\]", r.detail)


def test_conv_bn_folding_without_epsilon(results: dict[str, RuleResult]) -> None:
    r = results["fold_conv_bn_without_epsilon"]
    assert r.status == COUNTEREXAMPLE, r.detail
    assert "the two sides differ" in r.detail
    assert re.search(r"BatchNormalization\(%t0, g, beta, mean, var\) \{epsilon=", r.detail)
    assert re.search(r"= Conv\(x, const_\d+, const_\d+\)", r.detail)  # the folded right side
    assert re.search(r"max abs error (inf|[\d.e+-]+), max rel error", r.detail)
    assert re.search(r"inputs: x: float\d+\[\d+, \d+, \d+, \d+\]", r.detail)


def test_an_approximation_held_to_a_tolerance_it_misses(results: dict[str, RuleResult]
                                                         ) -> None:
    r = results["gelu_tanh_for_erf"]
    assert r.status == COUNTEREXAMPLE and "not close" in r.detail
    assert results["gelu_tanh_for_erf_loose"].status == VERIFIED


def test_a_rule_that_never_fires_is_a_failure(results: dict[str, RuleResult]) -> None:
    r = results["never_fires"]
    assert r.status == NO_INSTANCE and not r.ok
    assert "rank(x) == 9" in r.detail and r.examples == 0


def test_right_rules_pass(results: dict[str, RuleResult]) -> None:
    r = results["relu_twice"]
    assert r.ok and r.examples == 6 and r.line().endswith("verified on 6 instance(s)")
    both = results["neg_sub_both_ways"]  # <=>: each direction from its own left side
    assert both.ok and both.examples == 12


def test_results_are_reproducible() -> None:
    (rule,) = [r for r in load_compiled([WRONG], soundness=False).rules
               if r.name == "fold_conv_bn_without_epsilon"]
    first, again = (verify_rule(rule, Settings(examples=3, seed=5)) for _ in range(2))
    assert first.detail == again.detail and first.attempts == again.attempts
