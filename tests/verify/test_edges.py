"""The verifier probes the edges a rule's guards allow: tolerances, layouts, zeros and
magnitudes that overflow float16; wrong rules that are right on typical instances are caught
at the defaults, shrunk, and printed as a regression test that replays them; a left side
that cannot run, or outputs that are never finite, prove nothing; multi-output and
idempotent rules verify; several seeds run several searches."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import numpy as np
import pytest

from gerules.dsl import load_compiled
from gerules.dsl.compile import CompiledRules
from gerules.dsl.instances import GUARDS, LAYOUT, Draw, Search, values
from gerules.errors import KernelError
from gerules.runtime.executor import Executor
from gerules.verify import (
    COUNTEREXAMPLE,
    NO_INSTANCE,
    VERIFIED,
    RuleResult,
    Settings,
    check_instance,
    verify_rule,
)

EDGES = Path(__file__).parent / "fixtures" / "edges.ger"
WRONG = ["div_mul_overflow", "gelu_tanh_loose_guard", "conv_add_bias_any_axis",
         "second_projection_wrong"]
RIGHT = ["div_mul_overflow_avoided", "relu_idempotent", "relu_of_top_k"]


@pytest.fixture(scope="module")
def rules() -> CompiledRules:
    return load_compiled([EDGES], soundness=False)


@pytest.fixture(scope="module")
def results(rules: CompiledRules) -> dict[str, RuleResult]:
    return {r.name: verify_rule(r, Settings()) for r in rules.rules}


@pytest.mark.parametrize("name", WRONG)
def test_wrong_only_at_an_edge_is_caught_at_the_defaults(
        name: str, results: dict[str, RuleResult]) -> None:
    r = results[name]
    assert r.status == COUNTEREXAMPLE, r.detail
    assert "the two sides differ" in r.detail and r.regression


@pytest.mark.parametrize("name", RIGHT)
def test_right_at_the_edges_verifies(name: str, results: dict[str, RuleResult]) -> None:
    r = results[name]
    assert r.status == VERIFIED and r.examples == 10, r.detail


def test_every_output_is_compared(results: dict[str, RuleResult]) -> None:
    assert "the two sides differ in output %out1" in results["second_projection_wrong"].detail


def test_overflow_is_shown_and_shrunk_to_one_element(results: dict[str, RuleResult]) -> None:
    """x * 1000 overflows float16: the counterexample is one element, names the node that
    overflows and gives the input's value."""
    detail = results["div_mul_overflow"].detail
    assert "input x: float16[1]" in detail and "const c: float16[1] = [1.e+03]" in detail
    assert "expected inf, got" in detail and "shrunk in" in detail
    assert "the left side first makes an infinity or NaN at %t0 = Mul(x, c)" in detail
    assert "inputs: x: float16[1] = [" in detail


def test_a_per_channel_guard_is_probed_with_tied_dims(results: dict[str, RuleResult]) -> None:
    """Without its per-channel conjunct the fold takes a constant along H for the bias: the
    layout probe ties C, H and W, so a vector of m values fits every axis."""
    detail = results["conv_add_bias_any_axis"].detail
    assert "= Conv(x, w)" in detail and "= Add(%t0, c)" in detail


def test_the_regression_test_replays_the_failure_until_the_rule_is_fixed(
        results: dict[str, RuleResult], tmp_path: Path) -> None:
    text = results["div_mul_overflow"].regression
    assert "def test_div_mul_overflow_counterexample() -> None:" in text
    compile(text, "regression.py", "exec")
    namespace: dict[str, object] = {}
    exec(text, namespace)  # noqa: S102 - the verifier's own output, run as pytest would
    with pytest.raises(AssertionError, match="counterexample"):
        namespace["test_div_mul_overflow_counterexample"]()  # type: ignore[operator]
    fixed = tmp_path / "fixed.ger"  # a guard keeps the rule away from float16
    fixed.write_text(EDGES.read_text().replace(
        "where const(c) and approx(c, 1000.0)  =>  x",
        "where const(c) and approx(c, 1000.0) and dtype(x) != f16  =>  x", 1))
    again: dict[str, object] = {}
    exec(text.replace(repr(str(EDGES)), repr(str(fixed))), again)  # noqa: S102
    again["test_div_mul_overflow_counterexample"]()  # type: ignore[operator]


def test_check_instance_judges_one_given_instance(rules: CompiledRules) -> None:
    from gerules import GraphBuilder

    rule = rules.rule("div_mul_overflow")
    g = GraphBuilder("i", opset=21)
    x = g.input("x", [2], "float16")
    g.output(g.op("Div", g.op("Mul", x, np.array([1000.0], np.float16)),
                  np.array([1000.0], np.float16)))
    graph = g.build()
    small = {"x": np.array([1.0, -2.0], np.float16)}
    large = {"x": np.array([100.0, 1.0], np.float16)}
    assert check_instance(rule, graph, small).status == VERIFIED
    assert check_instance(rule, graph, [small, large]).status == COUNTEREXAMPLE
    other = GraphBuilder("j", opset=21)
    other.output(other.op("Relu", other.input("x", [2], "float16")))
    assert check_instance(rule, other.build(), small).status == NO_INSTANCE


def test_a_left_side_that_cannot_run_is_never_a_pass(
        rules: CompiledRules, monkeypatch: pytest.MonkeyPatch) -> None:
    """The left side's Relu fails when the graph runs (the instances still build, their
    kernels are run directly): no instance, never "verified"."""
    run = Executor.run

    def failing(self: Executor, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        if [n.op for n in self.graph.nodes] == ["Relu"]:
            raise KernelError("kernel failed: broken on purpose", node="n0_Relu")
        return run(self, feeds)

    monkeypatch.setattr(Executor, "run", failing)
    r = verify_rule(rules.rule("relu_idempotent"), Settings(examples=2, attempts=6))
    assert r.status == NO_INSTANCE and r.examples == 0
    assert "the left side does not run" in r.detail and "broken on purpose" in r.detail


def test_outputs_that_are_never_finite_prove_nothing(tmp_path: Path) -> None:
    path = tmp_path / "vacuous.ger"
    path.write_text("ruleset v\n@exact\nrule log_of_zero:\n"
                    "    Log(Mul(x, 0)) as y  where shape(y) == shape(x)  =>  Log(Mul(x, 0))\n")
    (rule,) = load_compiled([path], soundness=False).rules
    r = verify_rule(rule, Settings(examples=2, attempts=6))
    assert r.status == NO_INSTANCE and "every output compared was infinite or NaN" in r.detail


def test_several_seeds_are_several_searches(rules: CompiledRules) -> None:
    rule = rules.rule("relu_idempotent")
    one = verify_rule(rule, Settings(examples=3, seed=0))
    three = verify_rule(rule, Settings(examples=3, seed=(0, 1, 2)))
    assert (one.examples, three.examples) == (3, 9) and three.attempts > one.attempts


def test_the_guards_probe_pins_a_tolerance_at_its_edge(rules: CompiledRules) -> None:
    """``approx(c, sqrt(2 / pi), rtol=5e-2)``: c lands 0.9 of the tolerance away from the
    centre (inside), or 1.5 of it (just past) for one conjunct now and then."""
    rule = rules.rule("gelu_tanh_loose_guard")
    search = Search(rule.directions[0], rules.registry)
    centre = np.sqrt(2 / np.pi)
    offsets: dict[str, set[float]] = {"inside": set(), "past": set()}
    for attempt in range(16):
        found = search.find(partial(_guards_draw, attempt), attempt)
        if found.instance is None or (found.blocker and "approx" not in found.blocker):
            continue  # another guard failed: the probe leaves such instances alone
        c = float(np.asarray(found.instance.tensors["c"].value).reshape(-1)[0])
        offset = round(abs(c - centre) / (5e-2 * centre), 2)
        offsets["past" if found.blocker else "inside"].add(offset)
    assert offsets == {"inside": {0.9}, "past": {1.5}}, offsets


def _guards_draw(attempt: int) -> Draw:
    return Draw(np.random.default_rng([attempt, 7]), "float64", probe=GUARDS)


def test_the_layout_probe_ties_dims_and_lays_constants_along_one_axis(
        rules: CompiledRules) -> None:
    rule = rules.rule("conv_add_bias_any_axis")
    search = Search(rule.directions[0], rules.registry)
    layouts = set()
    for attempt in range(20):
        found = search.find(lambda a=attempt: Draw(np.random.default_rng([a, 3]),
                                                   probe=LAYOUT), attempt)
        if found.instance is None:
            continue
        y = found.instance.tensors["y"].shape
        assert len(set(y[1:])) == 1  # channels, height and width alike
        layouts.add(found.instance.tensors["c"].shape)
    assert {(1, 1, 1), (1, 1, 1, 1)} & layouts or len(layouts) >= 2
    assert any(s.count(1) == len(s) - 1 and s[-1] == 1 and s[0] == 1 for s in layouts if
               len(s) >= 3), layouts  # a vector along a middle axis: [1, m, 1]


def test_edge_values_hold_zeros_and_float16_overflowing_magnitudes() -> None:
    rng = np.random.default_rng(0)
    big = values(rng, (64,), "float16", edge=True, theme="big")
    zero = values(rng, (64,), "float32", 0.01, 2.0, edge=True, theme="zero")
    assert big.dtype == np.float16 and 65.5 < float(np.abs(big).max()) <= 1024
    assert (zero == 0).any() and (zero >= 0).all()
    plain = values(rng, (64,), "float32")
    assert np.isfinite(plain).all() and float(np.abs(plain).max()) < 10


WRONG_LAYOUT = '''include "gerules:ops.ger"
ruleset wrong_layout

@exact
rule sub_across_transdata_swapped:  # wrong: Sub's operands swapped
    Sub(ge.TransData(a) {src_format = "NCHW", dst_format = "NC1HWC0"}, b)
    where not const(b)
    where rank(b) == rank(a) and format(b) == "NC1HWC0" and fits("NCHW", a, b)
    =>  ge.TransData(Sub(ge.TransData(b) {src_format = "NC1HWC0", dst_format = "NCHW"}, a))
        {src_format = "NCHW", dst_format = "NC1HWC0"}
'''


def test_a_layout_rule_counterexample_replays_with_its_blocked_input(tmp_path: Path) -> None:
    """An instance whose input is held in NC1HWC0 is shrunk without cutting the physical
    array's dims and written as a test that declares the input's format and feeds it
    physically, so the test fails as the verifier did."""
    path = tmp_path / "wrong_layout.ger"
    path.write_text(WRONG_LAYOUT)
    (rule,) = load_compiled([path], soundness=False).rules
    result = verify_rule(rule, Settings())
    assert result.status == COUNTEREXAMPLE, result.detail
    text = result.regression
    assert "format='NC1HWC0'" in text
    namespace: dict[str, object] = {}
    exec(text, namespace)  # noqa: S102 - the verifier's own output, run as pytest would
    with pytest.raises(AssertionError, match="counterexample"):
        namespace["test_sub_across_transdata_swapped_counterexample"]()  # type: ignore[operator]


def test_a_left_side_holding_a_deferred_weight_is_judged_by_its_values(
        rules: CompiledRules) -> None:
    """A graph of the compiler's (``optimize(..., deferred=True)``) holds folded weights not
    computed yet: the sides still run, and a mismatch is judged against the left side
    widened to float64, which computes the deferred weight (it once failed on it)."""
    from gerules import GraphBuilder
    from gerules.ir.weights import Deferred

    rng = np.random.default_rng(0)
    wa, wb = (rng.standard_normal((3, 2)).astype(np.float32) for _ in range(2))
    g = GraphBuilder("i", opset=17)
    x = g.input("x", [2, 3], "float32")
    g.output(g.op("MatMul", x, g.const(wa, name="wa")))
    g.output(g.op("MatMul", x, g.const(wb, name="wb")))
    graph = g.build()
    held = dict(graph.initializers)
    held["wb"] = Deferred(np.float32, wb.shape, lambda: wb.copy(), [], "wb")
    graph = graph.replace(initializers=held)
    feeds = {"x": rng.standard_normal((2, 3)).astype(np.float32)}
    result = check_instance(rules.rule("second_projection_wrong"), graph, feeds)
    assert result.status == COUNTEREXAMPLE, result.detail
    assert "the two sides differ in output" in result.detail
