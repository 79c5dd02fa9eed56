"""The ONNX backend node suite run through our importer and executor, counted whole.

Every node case the installed onnx generates is counted exactly once, in one of four bins:

- ``passed``: it ran and matched onnx's expected outputs (its rtol/atol, same dtype and
  shape), and shape inference agreed with the kernels on the dtype and every static dim of
  every tensor;
- ``failed``: it ran and did not match, or raised;
- ``excluded``: something the IR deliberately does not hold (sequence, optional or string
  values; ``EXCLUDED`` names single cases with their reason, and each of those is still run
  and must still fail, so the table cannot go stale);
- ``unsupported``: it uses an op the registry lacks (each such op is listed with its count).

The cases are built in memory by onnx's test generators (no download) and loaded through
``gerules.onnx_io.load_model``. ``tests/ir/test_conformance.py`` asserts on the counts and
``bench/conformance.py`` prints them.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
import warnings
from collections import Counter
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import numpy as np
import onnx

from ..ir.dtypes import DTYPES, ONNX_NAMES
from ..ir.graph import Graph, Value
from ..ir.ops.api import agree
from ..ir.registry import default_registry
from ..onnx_io import load_model
from ..runtime.executor import run_graph

# Case name -> why it is not expected to pass. Each one is still run and must still fail.
EXCLUDED: dict[str, str] = {
    "test_training_dropout": "training-mode Dropout draws a random mask",
    "test_training_dropout_default": "training-mode Dropout draws a random mask",
    "test_training_dropout_mask": "training-mode Dropout draws a random mask",
    "test_training_dropout_default_mask": "training-mode Dropout draws a random mask",
    "test_attention_4d_causal_fp16_expanded": (
        "float16 chain: our MatMul/Softmax compute in float32 and round once, onnx's "
        "reference rounds every step in float16; 2 of 192 values differ by one float16 ulp "
        "(4.9e-4 at 0.47), just over rtol 1e-3"),
    **{f"test_attention_{case}_bf16_expanded": (
        "bfloat16 chain: we round once per op, onnx's reference after every step; values "
        "differ by one bfloat16 ulp (2e-3 at 0.5), over rtol 1e-3")
       for case in ("4d_causal", "4d_padded_kv", "4d_causal_padded_kv",
                    "4d_attn_mask_causal", "3d_causal")},
    **{f"test_attention_{case}_bf16": (
        "bfloat16: we compute in float32 and round once per step, onnx's reference computes "
        "every elementwise step and sum in bfloat16; one bfloat16 ulp (2e-3 at 0.5) apart, "
        "over rtol 1e-3")
       for case in ("4d_causal", "4d_padded_kv", "4d_causal_padded_kv",
                    "4d_attn_mask_causal", "3d_causal")},
    "test_attention_4d_causal_fp16": (
        "float16: 2 of 192 values one float16 ulp (4.9e-4 at 0.47) from onnx's reference, "
        "which rounds every softmax step in float16; just over rtol 1e-3"),
}
BINS = ("passed", "failed", "excluded", "unsupported")


@dataclass
class Outcome:
    """The cases of one op (a case belongs to the op it tests; see ``case_op``)."""

    op: str
    passed: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)
    excluded: list[tuple[str, str]] = field(default_factory=list)
    unsupported: list[tuple[str, str]] = field(default_factory=list)  # (case, missing ops)
    stale: list[str] = field(default_factory=list)  # in EXCLUDED but passing


@dataclass(frozen=True)
class Summary:
    """Counts over every node case; ``missing`` is unsupported op -> cases that need it."""

    total: int
    counts: dict[str, int]
    missing: dict[str, int]

    @property
    def pass_rate(self) -> float:
        return self.counts["passed"] / self.total if self.total else 0.0


# ----------------------------------------------------------------------------- loading


@cache
def node_cases() -> tuple[Any, ...]:
    """onnx's node test cases, built in memory (every generator module, once per process)."""
    import onnx.backend.test.case.node as pkg

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _, name, _ in pkgutil.iter_modules(pkg.__path__):
            importlib.import_module(f"{pkg.__name__}.{name}")
    from onnx.backend.test.case.node import _NodeTestCases

    return tuple(_NodeTestCases)


def _domain(raw: str) -> str:
    return "" if raw in ("", "ai.onnx") else raw


def missing_ops(model: onnx.ModelProto) -> list[str]:
    """The ops of ``model`` the registry lacks (qualified by domain), sorted."""
    reg = default_registry()
    return sorted({f"{n.domain}.{n.op_type}" if _domain(n.domain) else n.op_type
                   for n in model.graph.node if not reg.has(n.op_type, _domain(n.domain))})


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
    """The family rule that excludes ``model``, if any (values the IR does not hold)."""
    g = model.graph
    for v in [*g.input, *g.output]:
        if not v.type.HasField("tensor_type"):
            return f"'{v.name}' is a {v.type.WhichOneof('value')} (only tensors in the IR)"
    odd = sorted(ONNX_NAMES.get(c, str(c)) for c in _elem_types(model) if c not in DTYPES)
    if odd:
        return f"element type {', '.join(odd)} is not a tensor type of the IR"
    return None


def case_op(case: Any, singles: dict[str, str]) -> str:
    """The op a case tests: its node, or for ``_expanded`` the op of its base case."""
    if "_expanded" in case.name:
        base = re.sub(r"_expanded(_ver\d+)?$", "", case.name)
        return singles.get(base, "(expanded)")
    return str(case.model.graph.node[0].op_type)


# ----------------------------------------------------------------------------- running


def check_inference(graph: Graph, values: dict[str, np.ndarray]) -> None:
    """Every inferred type must agree with the computed array (dtype, rank, static dims)."""
    for name, arr in values.items():
        t = graph.value_info.get(name)
        if t is not None:
            agree(name, [t.type], [arr])


def as_array(value: Any) -> np.ndarray:
    if isinstance(value, onnx.TensorProto):
        return onnx.numpy_helper.to_array(value)
    return np.asarray(value)


def assert_similar(expected: list[np.ndarray], got: list[np.ndarray], rtol: float,
                   atol: float) -> None:
    """onnx's comparison; low-precision outputs compare as float32 after an exact dtype check."""
    from onnx.backend.test.runner import Runner

    assert len(expected) == len(got), f"{len(got)} outputs for {len(expected)}"
    for e, g in zip(expected, got, strict=True):
        assert e.dtype == g.dtype, f"dtype {g.dtype}, expected {e.dtype}"
        if e.dtype.name != g.dtype.name or e.dtype.kind in "biufc?":
            Runner.assert_similar_outputs([e], [g], rtol=rtol, atol=atol)
        else:  # ml_dtypes: NumPy's testing helpers do not know them
            Runner.assert_similar_outputs([e.astype(np.float32)], [g.astype(np.float32)],
                                          rtol=rtol, atol=atol)


def run_case(case: Any) -> None:
    """Raise AssertionError (or our error) unless the case passes."""
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
    assert_similar(expected, [values[name] for name in wanted], case.rtol, case.atol)


def _message(err: BaseException) -> str:
    text = " ".join(str(err).split())
    return f"{type(err).__name__}: {text[:300]}"


def _run_one(case: Any, out: Outcome) -> None:
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            run_case(case)
    except Exception as e:  # noqa: BLE001 - every failure is reported per case
        if case.name in EXCLUDED:
            out.excluded.append((case.name, EXCLUDED[case.name]))
        else:
            out.failed.append((case.name, _message(e)))
        return
    (out.stale if case.name in EXCLUDED else out.passed).append(case.name)


@cache
def outcomes() -> dict[str, Outcome]:
    """Every node case, run once per process, by the op it tests."""
    cases = node_cases()
    singles = {c.name: c.model.graph.node[0].op_type for c in cases
               if len(c.model.graph.node) == 1}
    result: dict[str, Outcome] = {}
    for case in cases:
        op = case_op(case, singles)
        out = result.setdefault(op, Outcome(op))
        missing = missing_ops(case.model)
        rule = rule_exclusion(case.model)
        if rule is not None:
            out.excluded.append((case.name, rule))
        elif missing:
            out.unsupported.append((case.name, ", ".join(missing)))
        else:
            _run_one(case, out)
    return result


def summary(table: dict[str, Outcome] | None = None) -> Summary:
    """The four counts over every case and the unsupported ops with their case counts."""
    table = outcomes() if table is None else table
    counts: Counter[str] = Counter({b: 0 for b in BINS})
    missing: Counter[str] = Counter()
    for out in table.values():
        counts.update(passed=len(out.passed) + len(out.stale), failed=len(out.failed),
                      excluded=len(out.excluded), unsupported=len(out.unsupported))
        for _, ops in out.unsupported:
            missing.update(ops.split(", "))
    return Summary(sum(counts.values()), dict(counts), dict(missing.most_common()))
