"""The pieces of the verifier: guard hints, proposals, instances, tolerances."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gerules.dsl import RuleLibrary, load_compiled, parse_text
from gerules.dsl.contract import Contract
from gerules.dsl.instances import Draw, Hints, InstanceBuilder
from gerules.dsl.instances.proposals import broadcast_variant, reshape_target
from gerules.dsl.library import build_library
from gerules.dsl.program import Direction
from gerules.ir.verify import verify
from gerules.verify import tolerance


def _rule(text: str) -> Direction:
    """The forward direction of one rule."""
    lib = RuleLibrary((parse_text("ruleset r\n" + text, "t.ger"),))
    (rule,) = build_library(lib, soundness=False).program.rules
    return rule.directions[0]


def test_hints_read_the_guards_that_pin_variables() -> None:
    rule = _rule("rule a: Mul(Mul(x, c), d) where const(c, d) and approx(c, sqrt(2 / pi)) "
                 "and splat(d) and numel(d) == 1 and rank(x) == 3 => x\n")
    hints = Hints.of(rule)
    assert hints.constants == {"c", "d"} and hints.splats == {"d"} and hints.scalars == {"d"}
    assert hints.values["c"] == pytest.approx(math.sqrt(2 / math.pi))
    assert hints.ranks == {"x": 3}


def test_broadcast_variants_broadcast_and_reshape_targets_keep_the_count() -> None:
    draw = Draw(np.random.default_rng(0))
    for _ in range(200):
        shape = draw.shape(draw.integer(0, 4))
        assert np.broadcast_shapes(broadcast_variant(draw, shape), shape) == shape
        target = [int(d) for d in reshape_target(draw, shape).value]  # type: ignore[union-attr]
        assert np.zeros(shape).reshape([d if d else shape[0] for d in target]).size == \
            math.prod(shape)


def test_instances_of_every_shipped_rule_verify_and_replay() -> None:
    """Every shipped rule's left side gets instances; the same seed rebuilds the same graph."""
    for compiled in load_compiled().rules:
        builder = InstanceBuilder(compiled.directions[0], compiled.registry)
        graphs = [builder.build(Draw(np.random.default_rng(s))) for s in range(12)]
        built = [g for g in graphs if g is not None]
        assert built, compiled.name
        verify(built[0].graph)
        again = builder.build(Draw(np.random.default_rng(graphs.index(built[0]))))
        assert again is not None and again.graph.nodes == built[0].graph.nodes


def test_instance_opset_follows_the_op_versions_of_the_pattern() -> None:
    old = _rule("rule a: ReduceMean(x) {axes = a1, keepdims = 1} => x\n")
    new = _rule("rule b: ReduceMean(x, a) {keepdims = 1} => x\n")
    assert InstanceBuilder(old).opset == 17
    assert InstanceBuilder(new).opset >= 18


def test_tolerances() -> None:
    big = np.array([1000.0, 1.0], np.float32)
    assert tolerance(Contract(), "float32", big) == (1e-4, pytest.approx(0.1))
    assert tolerance(Contract(), "float32", np.array([0.5], np.float32)) == (1e-4, 1e-4)
    assert tolerance(Contract(), "int64", np.array([3])) == (0.0, 0.0)
    assert tolerance(Contract(False, 1e-3, 0.0), "float64", np.ones(1)) == (1e-3, 1e-9)
    assert tolerance(Contract(False, 1e-6, 0.0), "float16", np.ones(1, np.float16))[0] == 1e-2
