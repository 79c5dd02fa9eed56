"""Multi-root rules (several roots joined on shared variables) and right-side nodes
(``let m = Split(...)``, ``m[k]``)."""

from __future__ import annotations

import numpy as np
import pytest

from gerules.dsl import RuleLibrary, build_library, parse_text
from gerules.engine import ENode, Runner
from gerules.ir.graph import TensorType
from gerules.terms.terms import INPUT, PROJ, TermContext, add_const, add_op

HORIZONTAL = """
rule h: MatMul(x, wa), MatMul(x, wb)
    where const(wa, wb) and rank(wa) == 2 and rank(wb) == 2 and shape(wa)[0] == shape(wb)[0]
    =>  m[0], m[1]
    let m = Split(MatMul(x, Concat(wa, wb) {axis = 1}), [shape(wa)[1], shape(wb)[1]])
              {axis = -1}
"""


def built(text: str):  # noqa: ANN201 - a dsl.Built
    return build_library(RuleLibrary((parse_text("ruleset s\n" + text, "t.ger"),)))


def test_two_projections_become_one_product_split_in_two() -> None:
    lib = built(HORIZONTAL)
    assert lib.errors == []
    (rule,) = lib.compiled.rules
    (direction,) = rule.directions
    assert len(direction.roots) == 2 and [let.name for let in direction.lets] == ["m"]
    assert direction.lets[0].outputs == 2
    ctx = TermContext(inputs={"x": TensorType("float32", (3, 4))})
    eg = ctx.new_egraph()
    x = eg.add(ENode(INPUT, (("name", "x"),), ()))
    rng = np.random.default_rng(0)
    mm = [add_op(eg, "MatMul", [x, add_const(eg, rng.standard_normal((4, n)).astype(
        np.float32))]) for n in (5, 2)]
    eg.rebuild()
    report = Runner(eg).run(list(rule.rewrites))
    assert report.rules["h"].applied == 1  # once for the pair, not once per order
    for k, m in enumerate(mm):
        assert any(n.op == PROJ and n.get("index") == k for n in eg.nodes(m))


@pytest.mark.parametrize(("text", "message"), [
    ("rule r: Relu(x), Tanh(y) => x, y\n", "each root of a multi-root rule shares a variable"),
    ("rule r: Relu(x), Tanh(x) => x\n", "the right side gives 1 result for 2 roots"),
    ("rule r: Relu(x), Tanh(x) <=> Tanh(x), Relu(x)\n", "one each"),
    ("rule r: Relu(x), Tanh(x) where m == 1 => m, m\n    let m = Sigmoid(x)\n",
     "'m' is a node the right side builds; it has no value in a where clause"),
    ("rule r: Relu(x), Tanh(x) => m, m[0]\n    let m = Split(x, [1, 1])\n",
     "'m' is used whole and by output index"),
])
def test_multi_root_mistakes_are_placed(text: str, message: str) -> None:
    errors = [e.message for e in built(text).errors]
    assert any(message in e for e in errors), errors
