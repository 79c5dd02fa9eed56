"""Op classes and op variables (one rule over several ops) and opset variants (one rule over
the attribute and the input form of an op's argument)."""

from __future__ import annotations

import numpy as np
import pytest

from gerules.dsl import RuleLibrary, build_library, parse_text
from gerules.engine import ENode, Runner
from gerules.ir.graph import TensorType
from gerules.onnx_io import load_model
from gerules.opt.optimize import OptimizeOptions, optimize
from gerules.terms.terms import INPUT, TermContext, add_const, add_op, class_value
from gerules.testing.models import transformer_encoder

HEAD = "commutative Add, Mul\nopclass act = Relu | Tanh\nopclass more = act | Sigmoid\n"


def built(text: str):  # noqa: ANN201 - a dsl.Built
    return build_library(RuleLibrary((parse_text(HEAD + "ruleset s\n" + text, "t.ger"),)))


def errors(text: str) -> list[str]:
    return [e.message for e in built(text).errors]


def test_one_rule_over_a_class_is_one_rewrite_per_op() -> None:
    lib = built("rule drop_double: for F in more\n    F(F(x)) => F(x)\nschedule O1: s\n")
    (rule,) = lib.compiled.rules
    assert [rw.name for rw in rule.rewrites] == ["drop_double[F=Relu]", "drop_double[F=Tanh]",
                                                 "drop_double[F=Sigmoid]"]
    assert [d.root.qualified for d in rule.directions] == ["Relu", "Tanh", "Sigmoid"]
    assert lib.program.rulesets == {"s": ("drop_double",)}  # the author sees one rule


def test_an_op_variable_is_also_a_value() -> None:
    """``G`` in a guard is the name of the op it stands for in that variant."""
    (rule,) = built('rule r: for G in (Exp, Log)\n    G(x) where G == "Log" => x\n'
                    ).compiled.rules
    ctx = TermContext(inputs={"x": TensorType("float32", (3,))})
    eg = ctx.new_egraph()
    x = eg.add(ENode(INPUT, (("name", "x"),), ()))
    exp, log = add_op(eg, "Exp", [x]), add_op(eg, "Log", [x])
    eg.rebuild()
    report = Runner(eg).run(list(rule.rewrites))
    exp_stats = report.rules["r[G=Exp]"]
    assert exp_stats.applied == 0 and set(exp_stats.rejected) == {'G == "Log"'}
    assert report.rules["r[G=Log]"].applied == 1
    assert eg.find(log) == eg.find(x) != eg.find(exp)


@pytest.mark.parametrize(("text", "message"), [
    ("rule r: for F in nope\n    F(x) => x\n", "unknown opclass 'nope'"),
    ("rule r: for Relu in act\n    Relu(x) => x\n", "Relu is an op; name the op variable"),
    ("rule r: for F in act\n    Relu(x) => x\n", "op variable F is not used in the rule"),
    ("rule r: for F in (Relu, Add)\n    F(x) => x\n", "(for F=Add) Add takes 2 inputs, got 1"),
    ("rule r: for F in (Relu, Rleu)\n    F(x) => x\n", "unknown op Rleu (did you mean Relu?)"),
    ("opclass a = b\nopclass b = a\nrule r: Relu(x) => x\n", "opclass cycle: a -> b -> a"),
    ("rule r: Relu(X) => X\n", "'X' is not a variable: variables start with a lowercase"),
])
def test_class_mistakes_are_placed(text: str, message: str) -> None:
    found = errors(text)
    assert any(message in e for e in found), found


def test_opset_variants_of_one_rule() -> None:
    """``{axes = a}`` on ReduceMean: an attribute before opset 18, an input from 18."""
    lib = built("rule r: ReduceMean(x) {axes = a, keepdims = 1} as y\n"
                "    where len(a) == 1 => ReduceMax(x) {axes = a, keepdims = 1}\n")
    (rule,) = lib.compiled.rules
    names = [d.name for d in rule.directions]
    assert names == ["r[opset<18]", "r[opset>=18]"]
    old, new = rule.directions
    assert len(old.root.args) == 1 and len(new.root.args) == 2
    assert new.root.schema.since_version == 18


@pytest.mark.parametrize("opset", [17, 18])
def test_a_right_side_attribute_becomes_an_input_where_the_opset_has_it(opset: int) -> None:
    (rule,) = built("rule r: ReduceMax(x) {axes = a, keepdims = 1} => "
                    "ReduceMean(x) {axes = a, keepdims = 1}\n").compiled.rules
    ctx = TermContext(opset={"": opset}, inputs={"x": TensorType("float32", (2, 3))})
    eg = ctx.new_egraph()
    x = eg.add(ENode(INPUT, (("name", "x"),), ()))
    if opset < 18:
        root = add_op(eg, "ReduceMax", [x], {"axes": (1,), "keepdims": 1})
    else:
        root = add_op(eg, "ReduceMax", [x, add_const(eg, np.array([1]))], {"keepdims": 1})
    eg.rebuild()
    Runner(eg).run(list(rule.rewrites))
    means = [n for n in eg.nodes(root) if n.op == "ReduceMean"]
    assert len(means) == 1
    if opset >= 18:
        assert len(means[0].children) == 2
        assert class_value(eg, means[0].children[1]).tolist() == [1]
    else:
        assert means[0].get("axes") == (1,)


@pytest.mark.parametrize("opset", [17, 18])
def test_the_one_layer_norm_rule_fuses_both_opset_forms(opset: int) -> None:
    graph = load_model(transformer_encoder(opset=opset, layers=2).model.SerializeToString())
    out, report = optimize(graph, OptimizeOptions(target="onnx"))
    assert report.rules["fuse_layer_norm"]["applied"] >= 1
    assert "ReduceMean" not in out.op_counts()
