"""The compile-time expression language: values, operators and built-ins."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from gerules.dsl import parse_text
from gerules.dsl.builtins import CONSTANTS, FUNCTIONS
from gerules.dsl.evaluate import evaluate
from gerules.dsl.values import DType, EvalError, Tensor
from gerules.ir.graph import TensorType

W = np.arange(24, dtype=np.float32).reshape(2, 3, 2, 2)
ENV: dict[str, Any] = {
    "w": Tensor("w", TensorType("float32", (2, 3, 2, 2)), W),
    "g": Tensor("g", TensorType("float32", (2,)), np.array([4.0, 9.0], np.float32)),
    "x": Tensor("x", TensorType("float16", ("N", 3))),
    "c": Tensor("c", TensorType("float32", (3,)), np.zeros(3, np.float32)),
    "p": (1, 2, 0),
    "q": (2, 1, 0),
}


class Env:
    def lookup(self, name: str) -> Any:
        return ENV[name]

    def node_attr(self, binder: str, attr: str) -> Any:
        return {"epsilon": 1e-5, "axis": -1}.get(attr)


def ev(text: str) -> Any:
    rule = parse_text(f"rule r: A() => a where {text}").rules[0]
    return evaluate(rule.clauses[0].expr, Env())


@pytest.mark.parametrize(("text", "expected"), [
    ("1 + 2 * 3", 7),
    ("7 // 2", 3),
    ("7 / 2", 3.5),
    ("2 ** 10", 1024),
    ("-3 % 2", 1),
    ("shape(w)", (2, 3, 2, 2)),
    ("rank(w)", 4),
    ("numel(w)", 24),
    ("shape(w)[0]", 2),
    ("shape(w)[1:]", (3, 2, 2)),
    ("shape(w)[-1]", 2),
    ('shape(x) == ["N", 3]', True),
    ("shape(w) == shape(w)", True),
    ("shape(w) != [2, 3]", True),
    ("static(shape(x))", False),
    ("static(w)", True),
    ("dtype(x) == f16", True),
    ("dtype(w) in (f16, f32)", True),
    ("f32 == 1", True),
    ("0 not in shape(w)", True),
    ("p[q]", (0, 2, 1)),
    ("p == iota(3)", False),
    ("iota(len(p))", (0, 1, 2)),
    ("inverse(p)", (2, 0, 1)),
    ("const(w, g)", True),
    ("const(w, x)", False),
    ("const(x) and all(x == 0)", False),
    ("const(c) and all(c == 0)", True),
    ("splat(c)", True),
    ("item(c)", 0.0),
    ("any(w > 22)", True),
    ("broadcastable([2, 1, 3], [4, 3])", True),
    ("broadcastable([2, 3], [4, 3])", False),
    ('broadcastable(["N", 3], [1, 3])', True),
    ("approx(sqrt(2), 1.41421, rtol=1e-5)", True),
    ("min(shape(w))", 2),
    ("max(3, 7, 5)", 7),
    ("concat(shape(w)[:2], [6])", (2, 3, 6)),
    ("norm_axis(-1, 4)", 3),
    ("int(2.9)", 2),
    ("float(item(g[:1]))", 4.0),
    ("n.epsilon < 1e-4", True),
    ("n.missing == none", True),
    ("true and not false", True),
    ("pi > 3.14 and pi < 3.15", True),
])
def test_values(text: str, expected: Any) -> None:
    got = ev(text)
    assert got == expected and type(got) is type(expected)


def test_arrays_keep_their_dtype() -> None:
    s = ev("g / sqrt(g + n.epsilon)")
    assert s.dtype == np.float32 and s.shape == (2,)
    scaled = ev("w * bcast(g, rank(w), axis=0)")
    assert scaled.dtype == np.float32
    np.testing.assert_array_equal(scaled[1], W[1] * 9.0)
    assert ev("reshape(g, [2, 1])").shape == (2, 1)
    assert ev("cast(0.5, dtype(x))").dtype == np.float16


def test_elementwise_comparison_is_an_array() -> None:
    got = ev("w == 3")
    assert got.dtype == np.bool_ and got.shape == W.shape and got.sum() == 1


@pytest.mark.parametrize(("text", "message"), [
    ("2 ** 100", "integer overflow"),
    ("10 ** 10 * 10 ** 10", "integer overflow"),
    ("1 / 0", "division by zero"),
    ("numel(x)", "not static"),
    ("all(x == 0)", "x is not a constant"),
    ("w == 1 and true", "wrap it in all"),
    ("shape(w)[9]", "out of range"),
    ("iota(100_000_000)", "out of range"),
    ("reshape(g, [5])", "cannot reshape"),
    ("rank(w) and true", "must be true or false"),
    ("bcast(g, 2, axis=5)", "out of range"),
    ("item(w)", "all equal"),
    ("inverse([0, 0])", "not a permutation"),
    ("cast(1, 3)", "element type"),
    ("reshape(iota(5000), [5000, 1]) * iota(5000)", "more than"),
])
def test_errors_are_eval_errors(text: str, message: str) -> None:
    with pytest.raises(EvalError, match=message):
        ev(text)


def test_every_builtin_has_a_doc_and_a_signature() -> None:
    for b in FUNCTIONS.values():
        assert b.doc and b.signature.startswith(f"{b.name}(")
    assert FUNCTIONS["bcast"].kwargs == ("axis",) and FUNCTIONS["bcast"].min_args == 2
    assert FUNCTIONS["const"].max_args is None
    assert CONSTANTS["f32"][0] == DType("float32")


def test_rules_md_documents_every_builtin() -> None:
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "RULES.md").read_text()
    for b in FUNCTIONS.values():
        assert f"| `{b.signature}` | {b.doc} |" in doc, b.name
    for name in CONSTANTS:
        assert name in doc


def test_array_arithmetic_runs_the_registry_kernels(monkeypatch: pytest.MonkeyPatch) -> None:
    from gerules.ir.registry import default_registry

    seen: list[str] = []
    registry = default_registry()
    real_get = registry.get

    def spy(op: str, domain: str = "", version: int | None = None) -> Any:
        seen.append(op)
        return real_get(op, domain, version)

    monkeypatch.setattr(registry, "get", spy)
    ev("w * bcast(g / sqrt(g + 1e-5), rank(w), axis=0) - w ** 2")
    assert {"Mul", "Div", "Sqrt", "Add", "Sub", "Pow"} <= set(seen)
    seen.clear()
    assert ev("2 * 3 + 1") == 7 and seen == []  # plain numbers stay Python's


def test_integer_arrays_promote_with_float_scalars() -> None:
    assert ev("shape(w) * 0.5").dtype == np.float64
    assert ev("iota(3) + 1").dtype == np.int64


def test_transdata_computes_a_deferred_constant_held_in_a_blocked_format() -> None:
    """A folded weight stays deferred in the e-graph, in a blocked format too: transdata()
    reads its elements (it once failed on the unevaluated constant)."""
    from gerules.dsl.builtins import transdata
    from gerules.ir import formats
    from gerules.ir.weights import Deferred

    held = formats.to_format(W, "NC1HWC0")
    t = TensorType("float32", W.shape, "NC1HWC0")
    deferred = Deferred(np.float32, held.shape, lambda: held.copy(), [], "held")
    plain = transdata(Tensor("h", t, deferred), "NCHW")
    assert np.array_equal(plain, W)
    assert np.array_equal(plain, transdata(Tensor("h", t, held), "NCHW"))
