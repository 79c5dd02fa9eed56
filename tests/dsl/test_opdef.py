"""Op definitions in `.ger`: checked at their place, resolved into composite ops that rules
use like any op (and that use each other)."""

from __future__ import annotations

import numpy as np
import pytest

from gerules.dsl import RuleLibrary, build_library, parse_text
from gerules.ir.graph import TensorType


def built(text: str):  # noqa: ANN201 - a dsl.Built
    return build_library(RuleLibrary((parse_text(text, "t.ger"),)))


def test_ops_use_earlier_ops_and_rules_use_both() -> None:
    lib = built("op my.SiLU(x) = Mul(x, Sigmoid(x))\n"
                "op my.Gated(x, g) {scale: float = 2.0} = Mul(my.SiLU(g), Mul(x, scale))\n"
                "ruleset s\nrule r: Mul(Mul(x, 2.0), my.SiLU(g)) as y where shape(y) == "
                "shape(x) and shape(g) == shape(x) => my.Gated(x, g)\n")
    assert lib.errors == []
    silu, gated = lib.program.ops
    assert gated.uses == (silu,) and gated.all_uses() == [silu, gated]
    schema = lib.compiled.registry.get("Gated", "my")
    x, g = np.ones((2, 3), np.float32), np.full((2, 3), 0.5, np.float32)
    (y,) = schema.kernel([x, g], schema.call({}))
    np.testing.assert_allclose(y, 0.5 / (1 + np.exp(-0.5)) * 2.0, rtol=1e-6)
    assert schema.infer([TensorType("float32", ("N", 3))] * 2, [None, None],
                        schema.call({}))[0].shape == ("N", 3)


def test_an_attribute_that_becomes_an_input_is_written_at_the_bodys_opset() -> None:
    """ReduceMean's axes next to an op of opset 18+: the body is read at 18, axes an input."""
    lib = built("op my.MeanThenMish(x) = Mish(ReduceMean(x) {axes = [-1]})\n")
    (op,) = lib.program.ops
    assert op.opset == 18
    mean = next(n for n in op.nodes if n.op == "ReduceMean")
    assert len(mean.inputs) == 2 and "axes" not in mean.attrs


@pytest.mark.parametrize(("text", "message"), [
    ("op Relu2(x) = Relu(x)\n", "an op you define needs a domain, such as ge.Relu2"),
    ("op ge.FusedConv(x) = Relu(x)\n", "ge.FusedConv is a built-in op"),
    ("op my.A(x) = Relu(x)\nop my.A(x) = Tanh(x)\n", "op my.A is defined twice"),
    ("op my.A(x) = Relu(y)\n", "unknown name 'y'"),
    ("op my.A(x, x) = Relu(x)\n", "input 'x' is declared twice"),
    ("op my.A(x) {k: flot = 1} = Relu(x)\n", "unknown kind 'flot' (did you mean float?)"),
    ("op my.A(x) {k: int = 0.5} = Relu(x)\n", "the default of 'k' must be a int literal"),
    ("op my.A(x) {k: string} = LeakyRelu(x) {alpha = k}\n", "'k' is string; attribute "
                                                             "'alpha' of LeakyRelu takes float"),
    ("op my.A(x) = x\n", "each output of the body is a different op's result, not an input"),
    ("op my.A(x) = my.A(x)\n", "my.A cannot use itself"),
    ("op my.A(x) = Rleu(x)\n", "unknown op Rleu (did you mean Relu?)"),
    ("op my.A(x) = Relu(x, x)\n", "Relu takes 1 input, got 2"),
    ("op my.A(x) {s: string = \"a\"} = Add(x, s)\n", "'s' is string: a tensor input needs"),
])
def test_definition_mistakes_are_placed(text: str, message: str) -> None:
    errors = [str(e) for e in built(text).errors]
    assert any(message in e for e in errors), errors
    assert all(e.startswith("t.ger:") for e in errors)
