"""Compiled rules on tiny e-graphs: goal tests (egg style) and numerical checks."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from gerules.dsl import CompiledRules, compile_library, load_compiled, parse_text
from gerules.dsl.loader import RuleLibrary
from gerules.engine import EGraph, ENode, Repeat, Ruleset, Runner, Saturate, Seq
from gerules.ir.graph import TensorType
from gerules.ir.registry import default_registry
from gerules.terms.terms import INPUT, TermContext, add_const, add_op, class_value

from .conftest import GOOD

RNG = np.random.default_rng(0)


@pytest.fixture(scope="module")
def library() -> CompiledRules:
    return load_compiled([GOOD])


def egraph(dtype: str = "float32", **inputs: tuple[int, ...]) -> tuple[EGraph, dict[str, int]]:
    ctx = TermContext(opset={"": 17, "ge": 1},
                      inputs={k: TensorType(dtype, v) for k, v in inputs.items()})
    eg = ctx.new_egraph()
    return eg, {k: eg.add(ENode(INPUT, (("name", k),), ())) for k in inputs}


def const(eg: EGraph, *shape: int, value: float | None = None) -> int:
    array = RNG.uniform(0.5, 1.5, shape) if value is None else np.full(shape, value)
    return add_const(eg, array.astype(np.float32))


def run(eg: EGraph, rules: CompiledRules | Sequence[Any], ruleset: str | None = None) -> Any:
    eg.rebuild()
    if isinstance(rules, CompiledRules):
        step = Saturate(rules.rulesets[ruleset]) if ruleset else rules.schedules["O3"]
        return Runner(eg).run(step)
    return Runner(eg).run(rules)


def ops(eg: EGraph, cid: int) -> set[str]:
    return {n.op for n in eg.nodes(cid)}


def compile_text(text: str) -> CompiledRules:
    lib = RuleLibrary((parse_text("commutative Add, Mul\nruleset s\n" + text, "t.ger"),))
    return compile_library(lib)


def kernel(op: str, inputs: list[np.ndarray | None], **attrs: Any) -> np.ndarray:
    schema = default_registry().get(op)
    return np.asarray(schema.kernel(inputs, schema.call(attrs))[0])


def test_conv_relu_becomes_fused_conv(library: CompiledRules) -> None:
    eg, v = egraph(x=(1, 3, 8, 8))
    conv = add_op(eg, "Conv", [v["x"], const(eg, 4, 3, 3, 3), const(eg, 4)],
                  {"pads": (1, 1, 1, 1)})
    relu = add_op(eg, "Relu", [conv])
    run(eg, library, "fuse_conv")
    fused = [n for n in eg.nodes(relu) if n.op == "ge.FusedConv"]
    assert len(fused) == 1
    assert fused[0].get("activation") == "Relu" and fused[0].get("pads") == (1, 1, 1, 1)
    assert fused[0].children == tuple(eg.find(c) for c in eg.nodes(conv)[0].children)


def test_two_transposes_that_cancel_vanish(library: CompiledRules) -> None:
    eg, v = egraph(x=(2, 3, 4))
    inner = add_op(eg, "Transpose", [v["x"]], {"perm": (1, 2, 0)})
    outer = add_op(eg, "Transpose", [inner], {"perm": (2, 0, 1)})
    run(eg, library, "simplify")
    assert eg.find(outer) == eg.find(v["x"])


def test_merge_transposes_composes_permutations(library: CompiledRules) -> None:
    eg, v = egraph(x=(2, 3, 4))
    inner = add_op(eg, "Transpose", [v["x"]], {"perm": (1, 2, 0)})
    outer = add_op(eg, "Transpose", [inner], {"perm": (1, 0, 2)})
    run(eg, library, "simplify")
    merged = [n for n in eg.nodes(outer) if n.op == "Transpose" and n.children == (v["x"],)]
    assert [n.get("perm") for n in merged] == [(2, 1, 0)]


def test_mul_one_respects_its_shape_guard(library: CompiledRules) -> None:
    eg, v = egraph(x=(3,), y=(2, 3))
    same = add_op(eg, "Mul", [v["y"], const(eg, 2, 3, value=1.0)])
    widened = add_op(eg, "Mul", [v["x"], const(eg, 2, 3, value=1.0)])
    not_one = add_op(eg, "Mul", [v["y"], const(eg, 2, 3, value=2.0)])
    report = run(eg, library, "simplify")
    assert eg.find(same) == eg.find(v["y"])
    assert eg.find(widened) != eg.find(v["x"])
    assert eg.find(not_one) != eg.find(v["y"])
    stats = report.rules["mul_one"]
    assert stats.rejected["shape(y) == shape(x)"] >= 1
    # y * 2 is no match for x * 1: a miss, not a rejection the report would list
    assert "pattern constant 1" not in stats.rejected and stats.misses["pattern constant 1"] >= 1


def test_fold_conv_bn_is_numerically_exact(library: CompiledRules) -> None:
    eg, v = egraph(x=(1, 3, 6, 6))
    w, b = const(eg, 4, 3, 3, 3), const(eg, 4)
    params = [const(eg, 4) for _ in range(4)]
    conv = add_op(eg, "Conv", [v["x"], w, b], {"strides": (2, 2)})
    bn = add_op(eg, "BatchNormalization", [conv, *params], {"epsilon": 1e-3})
    run(eg, library, "fuse_conv")
    (folded,) = [n for n in eg.nodes(bn) if n.op == "Conv"]
    w2, b2 = (class_value(eg, c) for c in folded.children[1:])
    x = RNG.standard_normal((1, 3, 6, 6)).astype(np.float32)
    values = [class_value(eg, c) for c in (w, b, *params)]
    expected = kernel("BatchNormalization", [kernel("Conv", [x, *values[:2]], strides=(2, 2)),
                                             *values[2:]], epsilon=1e-3)
    got = kernel("Conv", [x, w2, b2], strides=(2, 2))
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def test_guard_failure_reason_is_the_guard_text(library: CompiledRules) -> None:
    eg, v = egraph(x=(1, 3, 6, 6), w=(4, 3, 3, 3))
    conv = add_op(eg, "Conv", [v["x"], v["w"], const(eg, 4)])
    bn = add_op(eg, "BatchNormalization", [conv, *(const(eg, 4) for _ in range(4))])
    report = run(eg, library, "fuse_conv")
    assert "Conv" not in ops(eg, bn)
    assert report.rules["fold_conv_bn"].rejected == {
        "const(w, b, g, beta, mean, var) and bn.training_mode == 0": 1}


def test_layer_norm_subgraph_fuses_and_agrees(library: CompiledRules) -> None:
    eg, v = egraph(x=(2, 5, 8))
    x = v["x"]
    mean = add_op(eg, "ReduceMean", [x], {"axes": (-1,)})
    d = add_op(eg, "Sub", [x, mean])
    var = add_op(eg, "ReduceMean", [add_op(eg, "Pow", [d, const(eg, value=2.0)])],
                 {"axes": (-1,)})
    norm = add_op(eg, "Div", [d, add_op(eg, "Sqrt", [add_op(eg, "Add",
                                                             [var, const(eg, value=1e-5)])])])
    g, b = const(eg, 8), const(eg, 8)
    y = add_op(eg, "Add", [b, add_op(eg, "Mul", [g, norm])])  # operands in the other order
    run(eg, library, "fuse_norm")
    (ln,) = [n for n in eg.nodes(y) if n.op == "LayerNormalization"]
    assert ln.children == (x, g, b) and ln.get("epsilon") == pytest.approx(1e-5)
    data = RNG.standard_normal((2, 5, 8)).astype(np.float32)
    gv, bv = class_value(eg, g), class_value(eg, b)
    centered = data - data.mean(-1, keepdims=True)
    expected = centered / np.sqrt((centered**2).mean(-1, keepdims=True) + 1e-5) * gv + bv
    got = kernel("LayerNormalization", [data, gv, bv], epsilon=ln.get("epsilon"))
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)


def test_computed_root_becomes_a_constant(library: CompiledRules) -> None:
    eg, v = egraph(x=(2, 3))
    shape = add_op(eg, "Shape", [v["x"]])
    run(eg, library, "fold")
    np.testing.assert_array_equal(class_value(eg, shape), [2, 3])
    assert class_value(eg, shape).dtype == np.int64


def test_bidirectional_rule_gives_two_rewrites(library: CompiledRules) -> None:
    rule = library.rule("relu_transpose_commute")
    assert [rw.name for rw in rule.rewrites] == ["relu_transpose_commute",
                                                 "relu_transpose_commute/rev"]
    assert library.rule("relu_transpose_commute/rev") is rule
    eg, v = egraph(x=(2, 3))
    top = add_op(eg, "Transpose", [add_op(eg, "Relu", [v["x"]])], {"perm": (1, 0)})
    Runner(eg).run(list(rule.rewrites))
    assert "Relu" in ops(eg, top)


def test_right_side_literals_take_the_sibling_dtype() -> None:
    rules = compile_text("rule half: Div(x, 2) as y where shape(y) == shape(x) => Mul(x, 0.5)")
    eg, v = egraph("float16", x=(4,))
    div = add_op(eg, "Div", [v["x"], add_const(eg, np.full((), 2, np.float16))])
    run(eg, list(rules.rewrites()))
    (mul,) = [n for n in eg.nodes(div) if n.op == "Mul"]
    half = class_value(eg, mul.children[1])
    assert half.dtype == np.float16 and half.shape == () and half == 0.5


def test_literals_under_new_ops_take_the_root_dtype() -> None:
    rules = compile_text("rule r: Neg(x) => Mul(Identity(x), -1)")
    eg, v = egraph("float16", x=(4,))
    neg = add_op(eg, "Neg", [v["x"]])
    run(eg, list(rules.rewrites()))
    (mul,) = [n for n in eg.nodes(neg) if n.op == "Mul"]
    assert class_value(eg, mul.children[1]).dtype == np.float16


def test_right_side_errors_reject_instead_of_raising() -> None:
    rules = compile_text("rule bad: Relu(x) => Reshape(x, reshape(shape(x), [5]))")
    eg, v = egraph(x=(2, 3))
    add_op(eg, "Relu", [v["x"]])
    report = run(eg, list(rules.rewrites()))
    (reason,) = report.rules["bad"].rejected
    assert reason.startswith("right side: reshape(): cannot reshape")


def test_output_index_matches_projections() -> None:
    rules = compile_text("rule first: Identity(Split(x) {axis = 0}[1]) => Split(x) {axis = 0}[1]")
    (rw,) = rules.rewrites()
    assert rw.pattern.ast.children[0].op == "Proj"


def test_schedules_become_engine_steps(library: CompiledRules) -> None:
    o2 = library.schedules["O2"]
    assert isinstance(o2, Seq)
    first, second = o2.steps
    assert isinstance(first, Saturate) and isinstance(second, Repeat) and second.times == 3
    assert isinstance(library.rulesets["simplify"], Ruleset)
    assert library.contract("tanh_gelu_as_erf_gelu").atol == 1e-3
    assert library.rule("fold_conv_bn").span.file.endswith("fuse_conv.ger")


def test_unexpected_failures_reject_and_never_stop_the_run(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import dataclasses

    from gerules.dsl.builtins import FUNCTIONS

    def boom(x: object) -> int:
        raise RuntimeError("kernel exploded")

    monkeypatch.setitem(FUNCTIONS, "rank", dataclasses.replace(FUNCTIONS["rank"], fn=boom))
    rules = compile_text("rule r: Relu(x) where rank(x) == 2 => Relu(Relu(x))")
    eg, v = egraph(x=(2, 3))
    add_op(eg, "Relu", [v["x"]])
    report = run(eg, list(rules.rewrites()))
    assert report.rules["r"].rejected == {
        "rank(x) == 2 (unexpected RuntimeError: kernel exploded)": 1}
