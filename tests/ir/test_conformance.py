"""ONNX backend node tests run through our importer and executor, for every op we register.

The cases are built in memory by onnx's test generators (no download). A case runs when all
its nodes are registered ops (single-node tests and the ``_expanded`` function bodies);
it must then match onnx's expected outputs (its rtol/atol, same dtype and shape), and the
shape inference must agree with the kernel on the dtype and every static dim of every
tensor in the graph. Per-op pass counts print with ``-s``, with one summary line.

Exclusions are explicit: ``EXCLUDED`` names each case with its reason, and two rules cover
whole families that the IR cannot hold (element types NumPy has no dtype for; sequence and
optional values). Every ``EXCLUDED`` case is still run and must still fail, so the table
cannot go stale. Cases are loaded through ``gerules.onnx_io.load_model``.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
import warnings
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import numpy as np
import onnx
import pytest

from gerules.ir.dtypes import DTYPES, ONNX_NAMES
from gerules.ir.graph import Graph, Value
from gerules.ir.registry import default_registry
from gerules.onnx_io import load_model
from gerules.runtime.executor import run_graph

# onnx test modules not imported: they only test ops we do not register and take seconds
# to build their expected outputs with Python loops.
SKIP_MODULES = {"lppool": "LpPool is not registered; its reference pooling takes ~2 s"}

# Case name -> why it is not expected to pass. Each one is still run and must still fail.
EXCLUDED: dict[str, str] = {
    "test_batchnorm_example_training_mode": "training-mode BatchNormalization (not supported)",
    "test_batchnorm_epsilon_training_mode": "training-mode BatchNormalization (not supported)",
    "test_training_dropout": "training-mode Dropout draws a random mask (not supported)",
    "test_training_dropout_default": "training-mode Dropout draws a random mask",
    "test_training_dropout_mask": "training-mode Dropout draws a random mask",
    "test_training_dropout_default_mask": "training-mode Dropout draws a random mask",
    "test_attention_4d_causal_fp16_expanded": (
        "float16 chain: our MatMul/Softmax compute in float32 and round once, onnx's "
        "reference rounds every step in float16; 2 of 192 values differ by one float16 ulp "
        "(4.9e-4 at 0.47), just over rtol 1e-3"),
}


@dataclass
class Outcome:
    op: str
    passed: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)
    excluded: list[tuple[str, str]] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)  # excluded but passing


# ----------------------------------------------------------------------------- loading


@cache
def node_cases() -> tuple[Any, ...]:
    """onnx's node test cases, built in memory (each module once per process)."""
    import onnx.backend.test.case.node as pkg

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _, name, _ in pkgutil.iter_modules(pkg.__path__):
            if name not in SKIP_MODULES:
                importlib.import_module(f"{pkg.__name__}.{name}")
    from onnx.backend.test.case.node import _NodeTestCases

    return tuple(_NodeTestCases)


def _domain(raw: str) -> str:
    return "" if raw in ("", "ai.onnx") else raw


def runnable(model: onnx.ModelProto) -> bool:
    reg = default_registry()
    return all(reg.has(n.op_type, _domain(n.domain)) for n in model.graph.node)


def _elem_types(model: onnx.ModelProto) -> set[int]:
    g = model.graph
    codes = {v.type.tensor_type.elem_type for v in [*g.input, *g.output]
             if v.type.HasField("tensor_type")}
    for n in g.node:
        for a in n.attribute:
            if a.name == "to" and n.op_type == "Cast":
                codes.add(a.i)
            if a.type == onnx.AttributeProto.TENSOR:
                codes.add(a.t.data_type)
    return codes


def rule_exclusion(model: onnx.ModelProto) -> str | None:
    """The family rule that excludes ``model``, if any."""
    g = model.graph
    for v in [*g.input, *g.output]:
        if not v.type.HasField("tensor_type"):
            return f"'{v.name}' is a {v.type.WhichOneof('value')} (only tensors in the IR)"
    odd = sorted(ONNX_NAMES.get(c, str(c)) for c in _elem_types(model) if c not in DTYPES)
    if odd:
        return f"element type {', '.join(odd)} has no NumPy dtype in the runtime"
    return None


def case_op(case: Any, singles: dict[str, str]) -> str:
    """The op a case tests: its node, or for ``_expanded`` the op of its base case."""
    if "_expanded" in case.name:
        base = re.sub(r"_expanded(_ver\d+)?$", "", case.name)
        return singles.get(base, "(expanded)")
    return case.model.graph.node[0].op_type


# ----------------------------------------------------------------------------- running


def check_inference(graph: Graph, values: dict[str, np.ndarray]) -> None:
    """Every inferred type must agree with the computed array (dtype, rank, static dims)."""
    for name, arr in values.items():
        t = graph.value_info.get(name)
        if t is None:
            continue
        assert t.dtype == arr.dtype.name, f"{name}: inferred {t.dtype}, kernel {arr.dtype}"
        if t.shape is None:
            continue
        assert len(t.shape) == arr.ndim, f"{name}: inferred {t.type}, kernel {arr.shape}"
        for want, got in zip(t.shape, arr.shape, strict=True):
            assert not isinstance(want, int) or want == got, (
                f"{name}: inferred {t.type}, kernel {list(arr.shape)}")


def as_array(value: Any) -> np.ndarray:
    if isinstance(value, onnx.TensorProto):
        return onnx.numpy_helper.to_array(value)
    return np.asarray(value)


def run_case(case: Any) -> None:
    """Raise AssertionError (or our error) unless the case passes."""
    from onnx.backend.test.runner import Runner

    model = case.model
    graph = load_model(model.SerializeToString())
    inputs, expected = (list(map(as_array, part)) for part in case.data_sets[0])
    feeds = {v.name: x for v, x in zip(model.graph.input, inputs, strict=True)}
    every = [Value(n, t.type) for n, t in graph.value_info.items()]
    wanted = graph.output_names
    probe = graph.replace(outputs=tuple(every) + tuple(v for v in graph.outputs
                                                       if v.name not in graph.value_info))
    values = run_graph(probe, feeds)
    check_inference(graph, values)
    got = [values[name] for name in wanted]
    Runner.assert_similar_outputs(expected, got, rtol=case.rtol, atol=case.atol)


def _message(err: BaseException) -> str:
    text = " ".join(str(err).split())
    return f"{type(err).__name__}: {text[:300]}"


@cache
def outcomes() -> dict[str, Outcome]:
    cases = node_cases()
    singles = {c.name: c.model.graph.node[0].op_type for c in cases
               if len(c.model.graph.node) == 1}
    result: dict[str, Outcome] = defaultdict(lambda: Outcome(""))
    for case in cases:
        if not runnable(case.model):
            continue
        op = case_op(case, singles)
        out = result.setdefault(op, Outcome(op))
        rule = rule_exclusion(case.model)
        if rule is not None:
            out.excluded.append((case.name, rule))
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                run_case(case)
        except Exception as e:  # noqa: BLE001 - every failure is reported per case
            if case.name in EXCLUDED:
                out.excluded.append((case.name, EXCLUDED[case.name]))
            else:
                out.failed.append((case.name, _message(e)))
            continue
        (out.stale if case.name in EXCLUDED else out.passed).append(case.name)
    return dict(result)


# ----------------------------------------------------------------------------- tests

ONNX_OPS = sorted(op for domain, op in default_registry().ops("") if domain == "")


@pytest.mark.parametrize("op", ONNX_OPS)
def test_node_cases_pass(op: str) -> None:
    out = outcomes().get(op)
    if out is None:
        return  # onnx ships no node test that uses only registered ops for this one
    assert not out.failed, f"{op}: {len(out.failed)} failing case(s):\n" + "\n".join(
        f"  {name}: {msg}" for name, msg in out.failed)
    assert not out.stale, f"{op}: excluded but passing, remove from EXCLUDED: {out.stale}"


def test_expanded_cases_of_unregistered_ops_pass() -> None:
    """Function bodies of ops we do not register (e.g. MeanVarianceNormalization) also run."""
    registered = set(ONNX_OPS)
    for op, out in outcomes().items():
        if op not in registered:
            assert not out.failed, f"{op}: {out.failed}"
            assert not out.stale, f"{op}: excluded but passing: {out.stale}"


def test_exclusions_name_real_cases() -> None:
    names = {c.name for c in node_cases()}
    assert set(EXCLUDED) <= names, f"unknown case names: {sorted(set(EXCLUDED) - names)}"
    cases = {c.name: c for c in node_cases()}
    for name in EXCLUDED:
        assert runnable(cases[name].model), f"{name} uses unregistered ops; drop it"


def test_conformance_summary() -> None:
    """Prints the per-op table (``-s``) and fails only if almost nothing ran."""
    table = outcomes()
    totals: Counter[str] = Counter()
    lines = []
    for op in sorted(table):
        out = table[op]
        totals.update(passed=len(out.passed), failed=len(out.failed),
                      excluded=len(out.excluded))
        lines.append(f"  {op:28s} {len(out.passed):4d} passed {len(out.failed):3d} failed "
                     f"{len(out.excluded):3d} excluded")
    print("\nONNX node conformance per op:\n" + "\n".join(lines))
    print(f"conformance summary: {totals['passed']} passed, {totals['failed']} failed, "
          f"{totals['excluded']} excluded, over {len(table)} ops")
    assert totals["passed"] > 1000
