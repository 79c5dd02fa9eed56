"""The verifier explores what authors write: the instance search solves the guards random
instances miss (slices, splits, gathers of ranges, reshape chains, rank 6, guards relating
several shapes), still catches a wrong rule among them, takes author examples, and when no
instance is found names the guard that rejected most candidates and what to add."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gerules.dsl import load_compiled, load_library
from gerules.dsl.compile import CompiledRules
from gerules.dsl.instances import SHAPE, Draw, Search
from gerules.verify import COUNTEREXAMPLE, NO_INSTANCE, RuleResult, Settings, verify_rule

EXPLORE = Path(__file__).parent / "fixtures" / "explore.ger"


@pytest.fixture(scope="module")
def rules() -> CompiledRules:
    return load_compiled([EXPLORE], soundness=False)


@pytest.fixture(scope="module")
def results(rules: CompiledRules) -> dict[str, RuleResult]:
    return {r.name: verify_rule(r, Settings(examples=4)) for r in rules.rules}


@pytest.mark.parametrize("name", [
    "concat_of_two_slices", "split_then_concat", "gather_of_range", "triple_reshape",
    "transpose_rank6_identity", "matmul_bias_shapes", "wide_relu_twice_example",
    "scaled_twice",
])
def test_rules_random_instances_miss_are_verified(name: str,
                                                  results: dict[str, RuleResult]) -> None:
    r = results[name]
    assert r.ok and r.examples == 4, r.detail


def test_the_wrong_rule_among_them_is_caught(results: dict[str, RuleResult]) -> None:
    r = results["concat_of_two_slices_swapped"]
    assert r.status == COUNTEREXAMPLE and "the two sides differ" in r.detail


def test_no_instance_names_the_guard_and_what_to_add(results: dict[str, RuleResult]) -> None:
    r = results["wide_relu_twice"]
    assert r.status == NO_INSTANCE
    first = r.detail.splitlines()[0]
    assert "the guard `numel(x) >= 512` rejected most candidates" in first
    assert "@example(x: f" in r.detail and "v == E" in r.detail


def test_the_search_pins_what_a_guard_asks_for(rules: CompiledRules) -> None:
    """``p[q] == iota(6)``: the first transpose's perm is solved as the inverse of the
    second's, on rank 6 drawn directly."""
    direction = rules.rule("transpose_rank6_identity").directions[0]
    search = Search(direction, rules.registry)
    found = search.find(lambda: Draw(np.random.default_rng([3, 1]), probe=SHAPE), 1)
    assert found.instance is not None and found.blocker == ""
    p, q = (np.asarray(found.instance.attrs[k]) for k in ("p", "q"))
    assert found.instance.tensors["x"].value.ndim == 6
    assert list(p[q]) == list(range(6)) and "p" in (found.pins or {})


def test_an_example_pins_the_type(rules: CompiledRules) -> None:
    rule = rules.rule("scaled_twice")
    assert rule.resolved.examples[0]["c"] == 0.5
    search = Search(rule.directions[0], rules.registry, rule.resolved.examples)
    found = search.find(lambda: Draw(np.random.default_rng(0)), 0)
    assert found.instance is not None
    x, c = found.instance.tensors["x"], found.instance.tensors["c"]
    assert x.type is not None and (x.type.dtype, x.type.shape) == ("float16", (4, 32))
    assert c.const and c.value is not None and float(c.value) == 0.5


def test_bounds_and_arguments_of_one_function_are_solved() -> None:
    """``item(e) >= shape(a)[c] + shape(b)[c]`` pins e on the bound, and
    ``norm_axis(item(ax), r) == norm_axis(c, r)`` pins ax to c (examples/rules/slices.ger)."""
    path = Path(__file__).resolve().parents[2] / "examples" / "rules" / "slices.ger"
    rules = load_library([path]).compiled
    assert rules is not None
    direction = rules.rule("slice_second_part_of_concat").directions[0]
    search = Search(direction, rules.registry)
    founds = [search.find(lambda a=a: Draw(np.random.default_rng([5, a])), a) for a in range(8)]
    solved = [f for f in founds if f.instance is not None and f.blocker == ""]
    pinned = set().union(*(set(f.pins or {}) for f in solved))
    assert {"e", "ax"} <= pinned, (pinned, [f.blocker for f in founds])
    for found in solved:
        t = found.instance.tensors  # type: ignore[union-attr]
        c = found.instance.attrs["c"]  # type: ignore[union-attr]
        a, b = t["a"].value, t["b"].value
        assert int(t["e"].value.reshape(-1)[0]) >= a.shape[c] + b.shape[c]
